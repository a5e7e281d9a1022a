"""Generation on the CPU backend with a paced link: SpeedLoader's sub-batches against one
micro-batch at a time.

One LLaMA shape whose weights dominate the traffic generates for the same prompts three ways,
with `sl-run --link-gbps` pacing host<->device copies so that decoding is bound by the link:

- speedloader: the whole batch as N sub-batches of b; each stage's weights come to the device
  once per decoding step and serve all N sub-batches;
- micro-batch: the same sub-batch size b (so the same device memory for activations) compiled
  as a batch of its own, run batch after batch: the weights stream once per step per micro-batch,
  as offloaded generation does without SpeedLoader's reordering;
- resident: the weights and every KV cache chunk kept on the device (a device-memory budget that
  holds them): only tokens and positions cross the link;
- speedloader-bf16: speedloader with precision=bf16 (weights, activations and caches stored in
  bf16: half the bytes on the link; the CPU backend widens to f32 around every kernel).

Prints one table (decode and prefill tokens/s, bytes to the device per decoding step, the link
bound on decode tokens/s from those bytes, and the fraction of it reached) and checks that all
f32 ways give the same greedy tokens (and how many of bf16's tokens equal them).

    PYTHONPATH=python /usr/bin/python3 bench/generation_cpu.py --record bench/results/generation-cpu.md
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from speedloader.export import export_model  # noqa: E402
from speedloader.models.llama import LlamaConfig  # noqa: E402


def run(cmd):
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr}")
    return proc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--sub-batch", type=int, default=4)
    ap.add_argument("--max-prompt-len", type=int, default=48)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--link-gbps", type=float, default=1.0)
    ap.add_argument("--record", type=Path, help="append the table to this markdown file")
    args = ap.parse_args()
    sl_opt, sl_run = args.build / "bin" / "sl-opt", args.build / "bin" / "sl-run"

    config = LlamaConfig(layers=args.layers, hidden=args.hidden, heads=8, kv_heads=4,
                         ffn=args.hidden * 11 // 4, vocab=2048,
                         max_positions=args.max_prompt_len + args.new_tokens)
    tmp = Path(tempfile.mkdtemp(prefix="sl-gen-bench-"))
    export_model("llama", config, tmp / "model.onnx", seed=0, constant_folding=False, batch=2,
                 seq=8)
    rng = np.random.default_rng(0)
    lengths = rng.integers(args.max_prompt_len // 3, args.max_prompt_len + 1, size=args.prompts)
    with open(tmp / "prompts.jsonl", "w") as f:
        for n in lengths:
            f.write(json.dumps({"tokens": rng.integers(0, config.vocab, size=n).tolist()}) + "\n")

    n = args.prompts // args.sub_batch
    base = f"max-prompt-len={args.max_prompt_len} max-new-tokens={args.new_tokens}"
    configs = {
        "speedloader": f"batch={args.prompts} num-sub-batches={n} {base}",
        "micro-batch": f"batch={args.sub_batch} {base}",
        "resident": f"batch={args.prompts} num-sub-batches={n} {base} device-memory=64GB",
        "speedloader-bf16": f"batch={args.prompts} num-sub-batches={n} {base} precision=bf16",
    }
    rows, outputs, schedules = [], {}, {}
    for name, options in configs.items():
        sched = tmp / f"{name}.slsched"
        run([sl_opt, tmp / "model.onnx", f"--sl-generate={options}", "-o", sched])

        def generate(tag, *extra):
            report = tmp / f"{name}-{tag}.json"
            out = tmp / f"{name}-{tag}.jsonl"
            run([sl_run, sched, "--prompts", tmp / "prompts.jsonl", "--output", out,
                 "--link-gbps", args.link_gbps, "--report", report, *extra])
            with open(report) as f:
                return json.load(f)["generation"], out

        prefill_only, _ = generate("prefill", "--max-new-tokens", 1)
        full, out = generate("full")
        with open(out) as f:
            outputs[name] = [json.loads(line)["tokens"] for line in f]
        schedules[name] = full["schedule"]
        decode_bytes = (full["bytes_host_to_device"] - prefill_only["bytes_host_to_device"]) / \
            full["decode_runs"]
        batch = full["schedule"]["batch"]
        # Each decoding step moves decode_bytes over a link of link_gbps: at best `batch` tokens
        # per decode_bytes / link seconds.
        bound = batch / (decode_bytes / (args.link_gbps * 1e9)) if decode_bytes > 0 else float("inf")
        rows.append({
            "name": name, "batch": batch, "sub-batches": full["schedule"]["num_sub_batches"],
            "weights on device": full["schedule"]["weights_on_device"],
            "cache on device": full["schedule"]["kv_cache_on_device"],
            "prefill tok/s": full["prefill_tokens_per_second"],
            "decode tok/s": full["decode_tokens_per_second"],
            "MB to device per decode step": decode_bytes / 1e6,
            "link bound decode tok/s": bound,
            "of bound": full["decode_tokens_per_second"] / bound,
        })
    f32_ways = [k for k in outputs if not k.endswith("-bf16")]
    same = all(outputs[k] == outputs["speedloader"] for k in f32_ways)
    pairs = [(a, b) for x, y in zip(outputs["speedloader-bf16"], outputs["speedloader"])
             for a, b in zip(x, y)]
    bf16_equal = sum(a == b for a, b in pairs) / len(pairs)

    params = schedules["speedloader"]["parameter_bytes"]
    header = (f"LLaMA {args.layers} layers, hidden {args.hidden}, vocab {config.vocab} "
              f"({params / 1e6:.1f} MB of fp32 weights), {args.prompts} prompts of "
              f"{lengths.min()}-{lengths.max()} tokens, {args.new_tokens} new tokens, sub-batch "
              f"{args.sub_batch}, link paced at {args.link_gbps} GB/s per direction")
    cols = list(rows[0])
    lines = [header, "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    sl, micro = rows[0], rows[1]
    lines += ["", f"decode tokens/s, speedloader / micro-batch: "
                  f"{sl['decode tok/s'] / micro['decode tok/s']:.2f}x; same greedy tokens in the "
                  f"three f32 ways: {same}; bf16's tokens equal to f32's: {bf16_equal:.1%}"]
    text = "\n".join(lines)
    print(text)
    if args.record:
        load = os.getloadavg()
        with open(args.record, "a") as f:
            f.write(f"\n## {datetime.date.today()} on {platform.node()} "
                    f"({os.cpu_count()} cores, load {load[0]:.1f})\n\n"
                    f"```\nPYTHONPATH=python /usr/bin/python3 bench/generation_cpu.py "
                    f"{' '.join(sys.argv[1:])}\n```\n\n{text}\n")
    if not same:
        sys.exit("the three f32 ways generated different tokens")


if __name__ == "__main__":
    main()
