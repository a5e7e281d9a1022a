"""What the planner picks and predicts at the paper's scale, from sl-opt alone (issue 24 item 6).

For weightless llama2-7b, 13B and 70B exports, `sl-opt --sl-train` with `plan-report` on each
machine profile (target=), in both schedule modes, on one rank and on 8: the chosen sub-batch size,
count and live blocks, the predicted step time, tokens/s, model FLOPs utilisation (6 x parameters
x tokens per step against the profile's datasheet bf16 peak) and bytes over the link per step.

    PYTHONPATH=python /usr/bin/python3 bench/paper_scale_plans.py --model 7b=/tmp/7b/model.onnx \
        --model 13b=... --model 70b=... [--record bench/results/paper-scale-plans.md]

Export the models with `python3 -m speedloader.export --preset llama2-7b --weightless ...`
(13B: --preset llama2-13b; 70B: bench/compile_time.py's options).
Nothing here runs a model: these are the planner's predictions, not measurements.
"""

import argparse
import datetime
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Dense bf16 datasheet peaks, for MFU (the profiles' rates are what the planner uses).
PEAK_TFLOPS = {"a100": 312.0, "h100-pcie": 756.0, "h100-sxm": 989.0, "h200": 989.0}


def plan(sl_opt, model, options):
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sl_opt, model, f"--sl-train={options} plan-report", "-o",
                               str(Path(tmp) / "t.slsched")], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last}
    out = proc.stdout
    head = re.search(r"sl-plan: (\w+), (\d+) sub-batches of (\d+) \(batch (\d+)\), live-blocks "
                     r"(\d+), world (\d+)", out)
    step = re.search(r"step time:\s+([0-9.e+-]+) s predicted", out)
    params = re.search(r"parameters \(P\):.*\((\d+) bytes\)", out)
    moved = re.search(rf"{head.group(1)}\s+host->device\s+.*?\((\d+) bytes\), device->host\s+.*?"
                      r"\((\d+) bytes\)", out)
    device = re.search(r"device arena:.*?\((\d+) bytes\)", out)
    return {"mode": head.group(1), "n": int(head.group(2)), "b": int(head.group(3)),
            "live": int(head.group(5)), "step": float(step.group(1)),
            "param_bytes": int(params.group(1)), "h2d": int(moved.group(1)),
            "d2h": int(moved.group(2)), "device": int(device.group(1))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True, metavar="NAME=ONNX")
    p.add_argument("--targets", default="a100,h100-pcie,h100-sxm")
    p.add_argument("--batch", type=int, default=64, help="sequences per step (per rank)")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--worlds", default="1,8")
    p.add_argument("--device-memory", default="80GB")
    p.add_argument("--optimizer-gparams", type=float, default=2.9,
                   help="host AdamW rate (10^9 parameters/s); the datasheet profiles leave it "
                        "unmodelled; 2.9 is what the H200 machine's 16 host cores ran")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--record")
    args = p.parse_args()
    sl_opt = f"{args.build}/bin/sl-opt"
    rows = []
    for spec in args.model:
        name, path = spec.split("=", 1)
        for target in args.targets.split(","):
            for world in (int(w) for w in args.worlds.split(",")):
                for mode in ("speedloader", "canonical"):
                    # batch= is per rank: the step's tokens are batch x world x seq.
                    options = (f"batch={args.batch} seq={args.seq} "
                               f"device-memory={args.device_memory} precision=bf16 "
                               f"target={target} mode={mode} world={world} "
                               f"optimizer-gparams={args.optimizer_gparams}")
                    r = plan(sl_opt, path, options)
                    r.update(model=name, target=target, world=world, mode=mode)
                    rows.append(r)
                    print(r, flush=True)
    lines = ["| model | target | ranks | mode | N x b, live | step s | tokens/s (all ranks) | "
             "MFU | GB over the link per step per rank (h2d + d2h) | device arena GB | "
             "SpeedLoader / canonical |",
             "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    by = {(r["model"], r["target"], r["world"], r["mode"]): r for r in rows}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['target']} | {r['world']} | {r['mode']} | "
                         f"{r['error']} | | | | | | |")
            continue
        tokens = args.batch * r["world"] * args.seq
        tps = tokens / r["step"]
        params = r["param_bytes"] / 2  # bf16
        mfu = 6 * params * tps / (r["world"] * PEAK_TFLOPS[r["target"]] * 1e12)
        other = by.get((r["model"], r["target"], r["world"], "canonical"))
        ratio = (f"{other['step'] / r['step']:.2f}"
                 if r["mode"] == "speedloader" and other and "step" in other else "")
        lines.append(f"| {r['model']} | {r['target']} | {r['world']} | {r['mode']} | "
                     f"{r['n']} x {r['b']}, {r['live']} | {r['step']:.2f} | {tps:,.0f} | "
                     f"{mfu:.1%} | {(r['h2d'] + r['d2h']) / 1e9:.0f} | {r['device'] / 1e9:.1f} | "
                     f"{ratio} |")
    table = "\n".join(lines)
    print(table)
    if args.record:
        Path(args.record).write_text(
            f"# Plans at the paper's scale (sl-opt's predictions, not measurements)\n\n"
            f"Generated {datetime.date.today()} by\n\n```sh\nPYTHONPATH=python /usr/bin/python3 "
            f"bench/paper_scale_plans.py {' '.join(sys.argv[1:])}\n```\n\n"
            f"{args.batch} sequences of {args.seq} per rank per step, bf16, device memory "
            f"{args.device_memory} per rank, host memory unlimited, host AdamW "
            f"{args.optimizer_gparams}e9 parameters/s.\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
