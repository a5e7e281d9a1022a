"""Every Hugging Face architecture of the tests at a long context, end to end against PyTorch.

Each architecture of python/tests/test_hf_architectures.py is built with room for --seq positions
(its position limits, and GPT-Neo's local window, raised to it), exported as the tests export it,
compiled with `sl-opt --sl-infer="batch=1 seq=SEQ"` and run by sl-run on the CPU backend on one
random sequence of SEQ tokens. Prints a Markdown table: the largest logit difference from
PyTorch relative to the largest logit, and whether attention ran fused (sl.attention) or as a
softmax. Past 8192 positions a causal mask has more than 2^26 values, which sl-fuse-transformer
could only judge by reading its ops row by row (sl/Analysis/AttentionMasks.h).

    PYTHONPATH=python SL_OPT=build/bin/sl-opt SL_RUN=build/bin/sl-run \\
        .venv/bin/python bench/long_context_hf.py --seq 9000 --work /tmp/long-context
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python" / "tests"))

from hf_harness import LogitsOnly, build_model, export  # noqa: E402
from test_hf_architectures import ARCHS  # noqa: E402

POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "window_size")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=9000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/long-context"))
    parser.add_argument("--archs", help="comma-separated names (default: all)")
    args = parser.parse_args()
    sl_opt, sl_run = os.environ["SL_OPT"], os.environ["SL_RUN"]
    names = args.archs.split(",") if args.archs else [a.name for a in ARCHS]
    print(f"| architecture | seq | max abs diff / max abs logit | attention |")
    print("| --- | ---: | ---: | --- |", flush=True)
    failed = False
    for arch in ARCHS:
        if arch.name not in names:
            continue
        kwargs = {k: (args.seq if k in POSITION_KEYS else v) for k, v in arch.kwargs.items()}
        if arch.name == "gpt-neo":
            kwargs["window_size"] = args.seq
        long = dataclasses.replace(arch, kwargs=kwargs)
        d = args.work / arch.name
        d.mkdir(parents=True, exist_ok=True)
        model = build_model(long)
        export(model, d / "model.onnx", training=False)
        ids = np.random.default_rng(0).integers(0, long.vocab, size=(1, args.seq), dtype=np.int64)
        np.save(d / "ids.npy", ids)
        steps = [[sl_opt, d / "model.onnx", f"--sl-infer=batch=1 seq={args.seq}", "-o",
                  d / "infer.slsched"],
                 [sl_run, d / "infer.slsched", "--input", d / "ids.npy", "--output",
                  d / "logits.npy", "--report", d / "report.json"]]
        error = None
        for step in steps:
            proc = subprocess.run([str(c) for c in step], capture_output=True, text=True)
            if proc.returncode != 0:
                error = proc.stderr.strip().splitlines()[-1]
                break
        if error:
            failed = True
            print(f"| {arch.name} | {args.seq} | failed: {error} | |", flush=True)
            continue
        with torch.no_grad():
            want = LogitsOnly(model)(torch.from_numpy(ids)).numpy()
        got = np.load(d / "logits.npy")
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        ops = json.loads((d / "report.json").read_text())["ops"]
        kind = "fused" if "ATTENTION" in ops and "SOFTMAX" not in ops else "softmax (unfused)"
        print(f"| {arch.name} | {args.seq} | {rel:.2g} | {kind} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
