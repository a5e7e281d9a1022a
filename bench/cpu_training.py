"""CPU training throughput: SpeedLoader (sl-opt --sl-train + sl-run) against PyTorch on the CPU.

Same model (a LLaMA shape, random weights from our builder), same tokens per step, same AdamW,
same number of threads. Prints a table and, with --record FILE, writes it as Markdown with the
date, machine and command.

    PYTHONPATH=python /usr/bin/python3 bench/cpu_training.py --threads 2 --record bench/results/cpu-training.md
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from speedloader.export import export_model  # noqa: E402
from speedloader.models.llama import LlamaConfig  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=688)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=6, help="timed steps (after one warm-up step)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--record", help="also write the table as Markdown to this file")
    args = p.parse_args()

    config = LlamaConfig(layers=args.layers, hidden=args.hidden, heads=args.heads,
                         kv_heads=args.heads, ffn=args.ffn, vocab=args.vocab,
                         max_positions=args.seq)
    tokens_per_step = args.batch * args.seq
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        res = export_model("llama", config, tmp / "model.onnx", seed=0, constant_folding=False,
                           batch=args.batch, seq=args.seq)
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, args.vocab, size=tokens_per_step * (args.steps + 1) + 1,
                              dtype=np.uint16)
        tokens.astype("<u2").tofile(tmp / "tokens.bin")
        subprocess.run([f"{args.build}/bin/sl-opt", tmp / "model.onnx",
                        f"--sl-train=batch={args.batch} seq={args.seq}", "-o",
                        tmp / "train.slsched"], check=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        subprocess.run([f"{args.build}/bin/sl-run", tmp / "train.slsched", "--data",
                        tmp / "tokens.bin", "--steps", str(args.steps + 1), "--report",
                        tmp / "report.json"], check=True, env=env, stdout=subprocess.DEVNULL)
        with open(tmp / "report.json") as f:
            seconds = json.load(f)["train"]["step_seconds"][1:]  # drop the warm-up step
        ours = tokens_per_step * len(seconds) / sum(seconds)

        torch.set_num_threads(args.threads)
        model = res.model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        times = []
        for t in range(args.steps + 1):
            window = tokens[t * tokens_per_step:(t + 1) * tokens_per_step + 1].astype(np.int64)
            x = torch.from_numpy(window[:-1].reshape(args.batch, args.seq))
            y = torch.from_numpy(window[1:].reshape(args.batch, args.seq))
            start = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, args.vocab), y.reshape(-1))
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start)
        theirs = tokens_per_step * args.steps / sum(times[1:])

    params = sum(p.numel() for p in model.parameters())
    lines = [
        f"| model | params | batch x seq | threads | SpeedLoader tokens/s | PyTorch tokens/s | ratio |",
        f"| --- | --- | --- | --- | --- | --- | --- |",
        f"| LLaMA {args.layers}L h{args.hidden} ffn{args.ffn} v{args.vocab} | {params / 1e6:.1f}M | "
        f"{args.batch} x {args.seq} | {args.threads} | {ours:.0f} | {theirs:.0f} | "
        f"{ours / theirs:.2f} |",
    ]
    print("\n".join(lines))
    if args.record:
        header = [
            "# CPU training throughput",
            "",
            f"- date: {datetime.date.today().isoformat()}",
            f"- machine: {platform.machine()}, {os.cpu_count()} cores ({platform.platform()}); "
            f"PyTorch {torch.__version__}",
            f"- command: `PYTHONPATH=python /usr/bin/python3 {' '.join(sys.argv)}`",
            f"- {args.steps} timed AdamW steps after one warm-up step, {tokens_per_step} tokens per "
            "step; SpeedLoader's time per step from sl-run's report (the step, not start-up)",
            "",
        ]
        Path(args.record).write_text("\n".join(header + lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
