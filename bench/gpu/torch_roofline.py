"""PyTorch's figures at the 7B probe's shapes, on the GPU machine: the roofline the GPU suite's
performance part compares sl-run against (bench/gpu/run-gpu-perf.sh).

Measures, with CUDA events, the median of --reps runs after warm-up, on random inputs (never
zeros), rotating among input sets larger than L2:
  - GEMM TFLOP/s at the probe's products ([M, K] x [K, N] for q/k/v/o, gate/up, down and the
    head), bf16 and f32 (TF32 off, as sl-run computes f32);
  - scaled_dot_product_attention, causal, bf16: forward and forward+backward TFLOP/s;
  - pinned host<->device copies (GB/s each way) and a device-to-device copy (read + write GB/s).
Writes every figure to --out as JSON and prints a table last.

    python3 torch_roofline.py --probe probes/probe.json --out roofline.json

The shapes are the probe's (probe.json, written by make_probes.sh): a sub-batch's rows
(batch / num_sub_batches x seq), hidden, ffn, vocab, heads and seq.
"""

import argparse
import json
import statistics
import sys


def timed(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn(0)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--probe", required=True, help="make_probes.sh's probe.json")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    with open(args.probe) as f:
        probe = json.load(f)
    args.hidden, args.ffn, args.vocab = probe["hidden"], probe["ffn"], probe["vocab"]
    args.heads, args.seq = probe["heads"], probe["seq"]
    args.tokens = probe["batch"] // probe["num_sub_batches"] * probe["seq"]

    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_roofline.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "gemm": [], "attention": [], "copies": {}}
    m, h, f, v = args.tokens, args.hidden, args.ffn, args.vocab
    shapes = {"qkvo": (m, h, h), "gate_up": (m, h, f), "down": (m, f, h), "head": (m, h, v)}
    for dtype in (torch.bfloat16, torch.float32):
        for name, (mm, k, n) in shapes.items():
            sets = 3  # each set is over 50 MB at these shapes: larger than L2 together
            a = [torch.randn(mm, k, device=dev, dtype=dtype) for _ in range(sets)]
            b = [torch.randn(k, n, device=dev, dtype=dtype) for _ in range(sets)]
            seconds = timed(torch, lambda i: torch.matmul(a[i % sets], b[i % sets]), args.reps)
            result["gemm"].append({"name": name, "dtype": str(dtype).split(".")[1], "m": mm,
                                   "k": k, "n": n, "seconds": seconds,
                                   "tflops": 2 * mm * k * n / seconds / 1e12})
    d = h // args.heads
    batch = max(1, m // args.seq)
    q, k_, v_ = (torch.randn(batch, args.heads, args.seq, d, device=dev, dtype=torch.bfloat16,
                             requires_grad=True) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    flops = 4 * batch * args.heads * args.seq * args.seq * d / 2  # causal: half the scores
    fwd = timed(torch, lambda i: sdpa(q, k_, v_, is_causal=True), args.reps)
    grad = torch.randn(batch, args.heads, args.seq, d, device=dev, dtype=torch.bfloat16)

    def fwd_bwd(i):
        out = sdpa(q, k_, v_, is_causal=True)
        out.backward(grad)

    both = timed(torch, fwd_bwd, args.reps)
    result["attention"] = [
        {"name": "sdpa causal forward", "batch": batch, "heads": args.heads, "seq": args.seq,
         "head_dim": d, "seconds": fwd, "tflops": flops / fwd / 1e12},
        {"name": "sdpa causal forward+backward", "batch": batch, "heads": args.heads,
         "seq": args.seq, "head_dim": d, "seconds": both, "tflops": 3.5 * flops / both / 1e12}]
    size = 1 << 30
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    host.random_(0, 255)
    device = torch.empty(size, dtype=torch.uint8, device=dev)
    other = torch.empty(size, dtype=torch.uint8, device=dev)
    h2d = timed(torch, lambda i: device.copy_(host, non_blocking=True), 5)
    d2h = timed(torch, lambda i: host.copy_(device, non_blocking=True), 5)
    d2d = timed(torch, lambda i: other.copy_(device), 5)
    result["copies"] = {"h2d_gbps": size / h2d / 1e9, "d2h_gbps": size / d2h / 1e9,
                        "d2d_read_write_gbps": 2 * size / d2d / 1e9}
    with open(args.out, "w") as out:
        json.dump(result, out, indent=1)
    print(f"\nPyTorch {result['torch']} on {result['device']}")
    print(f"{'GEMM':10} {'dtype':9} {'m x k x n':22} {'ms':>8} {'TFLOP/s':>9}")
    for g in result["gemm"]:
        print(f"{g['name']:10} {g['dtype']:9} {g['m']}x{g['k']}x{g['n']:<10} "
              f"{g['seconds'] * 1e3:8.3f} {g['tflops']:9.1f}")
    for a in result["attention"]:
        print(f"{a['name']:32} {a['seconds'] * 1e3:8.3f} ms {a['tflops']:7.1f} TFLOP/s")
    c = result["copies"]
    print(f"pinned H2D {c['h2d_gbps']:.1f} GB/s, D2H {c['d2h_gbps']:.1f} GB/s, "
          f"device copy {c['d2d_read_write_gbps']:.0f} GB/s (read + write)")


if __name__ == "__main__":
    main()
