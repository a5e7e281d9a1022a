"""Does a calibrated profile predict the runs? sl-run --calibrate on this machine, then sl-opt
plans a small LLaMA with target=<that profile> at several sub-batch counts, sl-run trains each,
and the planner's predicted step time is set beside the measured one.

    PYTHONPATH=python /usr/bin/python3 bench/calibrated_plan.py [--record bench/results/calibrated-plan.md]

The CPU backend's "link" is memcpy between the host pool and the arena (both RAM), which is what
--calibrate measures on it; the runs are not paced.
"""

import argparse
import datetime
import json
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=688)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--sub-batches", default="1,2,4")
    p.add_argument("--steps", type=int, default=4, help="timed steps (after one warm-up step)")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--record", help="also write the table as Markdown to this file")
    args = p.parse_args()
    sl_opt, sl_run = f"{args.build}/bin/sl-opt", f"{args.build}/bin/sl-run"
    config = LlamaConfig(layers=args.layers, hidden=args.hidden, heads=args.heads,
                         kv_heads=args.heads, ffn=args.ffn, vocab=args.vocab,
                         max_positions=args.seq)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        profile = tmp / "machine.json"
        subprocess.run([sl_run, "--calibrate", profile], check=True, stdout=subprocess.DEVNULL)
        rates = json.loads(profile.read_text())
        export_model("llama", config, tmp / "model.onnx", seed=0, constant_folding=False,
                     batch=args.batch, seq=args.seq)
        tokens_per_step = args.batch * args.seq
        rng = np.random.default_rng(0)
        rng.integers(0, args.vocab, size=tokens_per_step * (args.steps + 1) + 1,
                     dtype=np.uint16).astype("<u2").tofile(tmp / "tokens.bin")
        for n in (int(x) for x in args.sub_batches.split(",")):
            sched, report = tmp / f"train{n}.slsched", tmp / f"report{n}.json"
            subprocess.run([sl_opt, tmp / "model.onnx",
                            f"--sl-train=batch={args.batch} seq={args.seq} num-sub-batches={n} "
                            f"target={profile}", "-o", sched], check=True)
            subprocess.run([sl_run, sched, "--data", tmp / "tokens.bin", "--steps",
                            str(args.steps + 1), "--report", report], check=True,
                           stdout=subprocess.DEVNULL)
            rep = json.loads(report.read_text())
            measured = rep["train"]["step_seconds"][1:]
            mean = sum(measured) / len(measured)
            predicted = rep["plan"]["predicted_step_seconds"]
            rows.append((n, predicted, mean, predicted / mean))
    lines = [
        f"| sub-batches | predicted s/step | measured s/step | predicted / measured |",
        "| ---: | ---: | ---: | ---: |",
        *[f"| {n} | {p:.4f} | {m:.4f} | {r:.2f} |" for n, p, m, r in rows],
    ]
    table = "\n".join(lines)
    print(f"profile: {json.dumps(rates)}")
    print(table)
    if args.record:
        text = (f"# A calibrated CPU profile against the CPU runs it plans\n\n"
                f"Recorded {datetime.date.today()} on {platform.node()} "
                f"({platform.processor() or platform.machine()}), with\n\n```sh\n"
                f"PYTHONPATH=python /usr/bin/python3 bench/calibrated_plan.py "
                f"{' '.join(sys.argv[1:])}\n```\n\n"
                f"LLaMA {args.layers} layers, hidden {args.hidden}, ffn {args.ffn}, vocab "
                f"{args.vocab}; batch {args.batch} x seq {args.seq}; {args.steps} timed steps "
                f"after a warm-up.\n\nProfile: `{json.dumps(rates)}`\n\n{table}\n")
        Path(args.record).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
