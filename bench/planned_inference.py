"""Planned inference at scale: what `--sl-infer` with a device budget plans for llama2-7b.

For each configuration, compiles the weightless llama2-7b (`speedloader.export --preset
llama2-7b --weightless`, exported once) with `sl-opt --sl-infer="... plan-report"`, and records
the plan (sub-batches, live blocks), the device arena it predicts, the arena sl-allocate laid out
(`sl.device_arena_bytes` of the compiled step: they must be equal, and within the budget), the
host pool, bytes over the link for both modes, the predicted seconds for the target, and sl-opt's
wall time, CPU time and peak RSS. No weights are read and nothing runs: sl-opt alone.

    PYTHONPATH=python /usr/bin/python3 bench/planned_inference.py --sl-opt build/bin/sl-opt \
        --work /tmp/planned --record bench/results/planned-inference.md
"""

import argparse
import datetime
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

CONFIGS = [
    "batch=4 seq=2048 device-memory=24GB",
    "batch=4 seq=2048 device-memory=24GB precision=bf16 target=h100-pcie",
    "batch=64 seq=2048 device-memory=8GB precision=bf16 target=h100-pcie",
    "batch=64 seq=2048 device-memory=8GB precision=bf16 target=h100-pcie mode=canonical",
    "batch=16 seq=4096 device-memory=16GB precision=bf16 target=h100-pcie",
]


def gib(text):
    return f"{int(text) / 2**30:.2f}"


def compile_one(sl_opt, model, options, out):
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sl_opt, str(model), f"--sl-infer={options} plan-report", "-o", str(out)],
                          capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"sl-opt failed for {options}:\n{proc.stderr}")
    report = proc.stdout
    ir = out.read_text()
    plan = re.search(r"sl-plan: inference, (\w+), (\d+) sub-batches of (\d+) \(batch \d+\), "
                     r"live-blocks (\d+)", report)
    predicted = re.search(r"device arena:.*?\((\d+) bytes\)", report).group(1)
    arena = re.search(r"sl.device_arena_bytes = (\d+)", ir).group(1)
    pool = re.search(r"sl.host_pool_bytes = (\d+)", ir).group(1)
    moved = dict(re.findall(r"^  (speedloader|canonical)\s+host->device .*?\((\d+) bytes\)", report,
                            re.M))
    seconds = re.search(r"step time:\s+(\S+) s predicted", report).group(1)
    return {
        "options": options, "mode": plan.group(1), "n": plan.group(2), "b": plan.group(3),
        "k": plan.group(4), "predicted": predicted, "arena": arena, "pool": pool,
        "h2d_sl": moved["speedloader"], "h2d_canon": moved["canonical"],
        "seconds": float(seconds), "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "rss_mb": after.ru_maxrss / 1024,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sl-opt", default="build/bin/sl-opt")
    parser.add_argument("--work", type=Path, default=Path("/tmp/planned-inference"))
    parser.add_argument("--model", type=Path, help="the weightless llama2-7b (default: export it)")
    parser.add_argument("--record", type=Path, help="write the table as markdown to this file")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.model or args.work / "llama2-7b.onnx"
    if not model.exists():
        subprocess.run([sys.executable, "-m", "speedloader.export", "--preset", "llama2-7b",
                        "--weightless", "--out", str(model)], check=True)
    rows = [compile_one(args.sl_opt, model, options, args.work / f"plan{i}.mlir")
            for i, options in enumerate(CONFIGS)]
    lines = [
        "| `--sl-infer=` | plan (N x b, K) | predicted arena GiB | allocated arena GiB | "
        "host pool GiB | h2d GiB speedloader / canonical | predicted s | sl-opt wall s | "
        "CPU s | peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| `{r['options']}` | {r['mode']} {r['n']} x {r['b']}, K={r['k']} | "
            f"{gib(r['predicted'])} | {gib(r['arena'])} | {gib(r['pool'])} | "
            f"{gib(r['h2d_sl'])} / {gib(r['h2d_canon'])} | {r['seconds']:.3g} | "
            f"{r['wall']:.1f} | {r['cpu']:.1f} | {r['rss_mb']:.0f} |")
        if r["predicted"] != r["arena"]:
            lines.append(f"\nMISMATCH: {r['options']}: predicted {r['predicted']} bytes, "
                         f"allocated {r['arena']}")
    table = "\n".join(lines)
    print(table)
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        head = (f"- date: {datetime.date.today()}\n- machine: {platform.machine()}, "
                f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end\n"
                f"- commit: {commit}\n- command: `PYTHONPATH=python /usr/bin/python3 "
                f"bench/planned_inference.py --sl-opt {args.sl_opt} --work {args.work} "
                f"--record {args.record}`\n\n")
        args.record.write_text("# Planned inference: llama2-7b under a device budget\n\n" + head +
                               table + "\n")


if __name__ == "__main__":
    main()
