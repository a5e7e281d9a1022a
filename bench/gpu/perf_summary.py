"""The performance part's table: sl-run's probe reports against PyTorch's roofline (run-gpu-perf.sh).

Per op kind that dominates a step: our achieved rate against PyTorch's at the same shapes (GEMM
TFLOP/s from the probe's matmul FLOPs over MATMUL seconds, attention TFLOP/s, host-to-device
GB/s of our copies over the H2D stream's busy seconds against pinned copies), then the step's
tokens/s and MFU (6 x matmul parameters x tokens/s over the measured best bf16 GEMM rate, and
over the H100 SXM datasheet's 989 TFLOP/s dense bf16).

    python3 perf_summary.py --probe probes/probe.json --roofline roofline.json \
        --train train-report.json [--infer infer-report.json]

The probe's shape comes from probe.json (make_probes.sh).

The op rates need the GPU's own kernel times: a CUDA report whose "op_seconds_clock" is not
"device" (host times around asynchronous calls, which measure only the issuing; reports from
before sl-run timed kernels on the GPU have no such field) gets no op rates, only a line saying
why, and its tokens/s and MFU (from the step's wall time) as usual.
"""

import argparse
import json
import os

DATASHEET_BF16_TFLOPS = 989.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--roofline", required=True)
    p.add_argument("--train")
    p.add_argument("--infer")
    p.add_argument("--probe", required=True, help="make_probes.sh's probe.json")
    a = p.parse_args()
    with open(a.probe) as f:
        probe = json.load(f)
    for field in ("layers", "hidden", "ffn", "vocab", "heads", "seq", "batch"):
        setattr(a, field, probe[field])
    # A part that failed on the GPU leaves its file missing: summarise what is there.
    def load(path, what):
        if path and os.path.exists(path):
            return json.load(open(path))
        if path:
            print(f"perf_summary.py: no {what} ({path}): that part failed (perf.log)")
        return None

    roof = load(a.roofline, "roofline") or {"gemm": [], "attention": [], "copies": {}}
    best_bf16 = max((g["tflops"] for g in roof["gemm"] if g["dtype"] == "bfloat16"), default=None)
    sdpa = {x["name"]: x["tflops"] for x in roof["attention"]}
    # Parameters that matmuls read per token: q, k, v, o, gate, up, down per layer, and the head.
    matmul_params = a.layers * (4 * a.hidden * a.hidden + 3 * a.hidden * a.ffn) + a.hidden * a.vocab
    head_dim = a.hidden // a.heads
    rows = []
    for kind, path in (("train", a.train), ("infer", a.infer)):
        r = load(path, f"{kind} report")
        if r is None:
            continue
        ops = r.get("ops", {})
        clock = r.get("op_seconds_clock", "missing")
        op_rates = r.get("backend") != "cuda" or clock == "device"
        if kind == "train":
            tokens = r["train"]["tokens_per_step"]
            seconds = r["train"]["step_seconds"][-1] if r["train"].get("step_seconds") else \
                r["train"]["seconds"] / max(1, r["train"]["steps"])
            passes = 3 + 1  # forward, recompute, backward (2x)
            attn_passes = 1 + 1 + 2.5
        else:
            tokens = a.batch * a.seq
            seconds = r["wall_seconds"]
            passes, attn_passes = 1, 1
        matmul_flops = 2 * matmul_params * tokens * passes
        attn_flops = 4 * a.layers * (tokens / a.seq) * a.heads * a.seq * a.seq * head_dim / 2
        if op_rates:
            mm_s = ops.get("MATMUL", {}).get("seconds", 0) + ops.get("GEMM", {}).get("seconds", 0)
            at_s = sum(ops.get(k, {}).get("seconds", 0) for k in ("ATTENTION", "ATTENTION_GRAD"))
            # sl-run reports each op's FLOPs from its kernels' shapes (since 2026-11-27): the
            # products the schedule really runs (the head is not recomputed, a pass may skip a
            # product), where the model above assumes every product in every pass. The H100
            # run of 2026-11-26 printed 860 GEMM TFLOP/s from that model; the schedule's own
            # FLOPs gave 772.
            if "flops" in ops.get("MATMUL", {}) or "flops" in ops.get("GEMM", {}):
                matmul_flops = sum(ops.get(k, {}).get("flops", 0) for k in ("MATMUL", "GEMM"))
                attn_flops, attn_passes = sum(ops.get(k, {}).get("flops", 0)
                                              for k in ("ATTENTION", "ATTENTION_GRAD")), 1
            rows.append((kind, "GEMM TFLOP/s", matmul_flops / mm_s / 1e12 if mm_s else 0,
                         best_bf16))
            rows.append((kind, "attention TFLOP/s",
                         attn_flops * attn_passes / at_s / 1e12 if at_s else 0,
                         sdpa.get("sdpa causal forward+backward" if kind == "train" else
                                  "sdpa causal forward")))
            h2d = next((s for s in r.get("streams", []) if s["kind"] == "h2d"), None)
            h2d_bytes = r.get("bytes_moved", {}).get("host_to_device", 0)
            if h2d and h2d["busy_seconds"] > 0:
                rows.append((kind, "H2D GB/s", h2d_bytes / h2d["busy_seconds"] / 1e9,
                             roof["copies"].get("h2d_gbps")))
        else:
            rows.append((kind, "op rates", f"not computed: {path} is a CUDA run whose op seconds "
                         f"are host times (op_seconds_clock: {clock}), which measure only the "
                         "issuing of asynchronous kernels; rerun with an sl-run that times "
                         "kernels on the GPU", None))
        if r.get("warmup_seconds"):
            rows.append((kind, "first run s (warm-up)", r["warmup_seconds"][0], None))
        tps = tokens / seconds
        model_flops = (6 if kind == "train" else 2) * matmul_params * tps
        rows.append((kind, "tokens/s", tps, None))
        if best_bf16:
            rows.append((kind, "MFU vs best GEMM", model_flops / (best_bf16 * 1e12), None))
        rows.append((kind, "MFU vs 989 TFLOP/s", model_flops / (DATASHEET_BF16_TFLOPS * 1e12), None))
        if op_rates:
            top = sorted(ops.items(), key=lambda kv: -kv[1]["seconds"])[:8]
            rows.append((kind, "busiest ops (s)",
                         ", ".join(f"{k} {v['seconds']:.3f}" for k, v in top), None))
    print(f"\n{'probe':6} {'figure':20} {'sl-run':>12} {'PyTorch':>10} {'ratio':>7}")
    for kind, name, ours, theirs in rows:
        if isinstance(ours, str):
            print(f"{kind:6} {name:20} {ours}")
        elif theirs:
            print(f"{kind:6} {name:20} {ours:12.2f} {theirs:10.2f} {ours / theirs:7.2f}")
        else:
            print(f"{kind:6} {name:20} {ours:12.3f}")


if __name__ == "__main__":
    main()
