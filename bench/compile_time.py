"""Compile time of sl-opt: wall time and peak resident memory of --sl-infer, --sl-train and
--sl-generate on weightless LLaMA exports (issue 24: llama2-7b within 10 s and a 70B shape within
20 s for every pipeline, at most 2 GB resident, on the 2-core development machine).

Exports each model once into --work (reused while its export options are unchanged), then runs
sl-opt once per (model, sequence length, pipeline) and prints a Markdown table. The peak resident
set is sl-opt's own (os.wait4's ru_maxrss), the time its wall clock.

    /usr/bin/python3 bench/compile_time.py --work /tmp/compile-time               # 7B and 70B, 2048 and 4096
    /usr/bin/python3 bench/compile_time.py --work /tmp/compile-time --quick       # a 4-layer model, seq 2048
    /usr/bin/python3 bench/compile_time.py --sl-opt OTHER/sl-opt --models llama2-7b --seqs 2048
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Export options per model: the 70B shape is llama2-7b's preset (its max_positions of 4096 and
# rms_norm_eps) with LLaMA-2-70B's sizes.
MODELS = {
    "llama2-7b": ["--preset", "llama2-7b"],
    "70b": ["--preset", "llama2-7b", "--layers", "80", "--hidden", "8192", "--heads", "64",
            "--kv-heads", "8", "--ffn", "28672", "--vocab", "32000"],
    # --quick: llama2-7b's structure and vocabulary, 4 narrower layers.
    "mid": ["--preset", "llama2-7b", "--layers", "4", "--hidden", "1024", "--heads", "16",
            "--kv-heads", "4", "--ffn", "2816"],
    # Long contexts: the same, with room for 32768 positions.
    "mid-32k": ["--preset", "llama2-7b", "--layers", "4", "--hidden", "1024", "--heads", "16",
                "--kv-heads", "4", "--ffn", "2816", "--max-positions", "32768"],
}

# Host memory per model for the offloading pipelines: the 70B shape's f32 master weights and AdamW
# moments alone are 0.84 TB.
HOST_MEMORY = {"llama2-7b": "400GB", "70b": "2TB", "mid": "400GB", "mid-32k": "400GB"}


def pipelines(model, seq):
    host = HOST_MEMORY[model]
    return {
        "infer": f"--sl-infer=batch=4 seq={seq}",
        "train": f"--sl-train=batch=64 seq={seq} device-memory=80GB host-memory={host} "
                 "precision=bf16",
        # The KV cache holds `seq` positions: the prompt and 64 new tokens.
        "generate": f"--sl-generate=batch=8 max-prompt-len={seq - 64} max-new-tokens=64 "
                    f"device-memory=80GB host-memory={host} precision=bf16",
    }


def export(model, work, python):
    """The model's weightless ONNX file under `work`, exported unless an export with the same
    options is there."""
    out = work / model / "model.onnx"
    stamp = out.with_suffix(".options.json")
    options = MODELS[model] + ["--weightless"]
    if out.exists() and stamp.exists() and json.loads(stamp.read_text()) == options:
        return out
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    subprocess.run([python, "-m", "speedloader.export", *options, "--out", str(out)], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    stamp.write_text(json.dumps(options))
    return out


def run(command, timeout):
    """Runs `command`; returns (exit status, wall seconds, user s, system s, peak RSS bytes,
    stderr's tail, how many attentions its remarks say were not fused). A command past `timeout`
    is killed (status -9)."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    # Read stderr on a thread: a full pipe would block sl-opt before wait4 returns.
    err = []
    reader = threading.Thread(target=lambda: err.append(process.stderr.read()))
    reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    timer.cancel()
    reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    text = err[0].decode(errors="replace") if err and err[0] else ""
    tail = text.strip().splitlines()[-3:]
    return (process.returncode, wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss * 1024,
            " / ".join(tail), text.count("attention not fused"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sl-opt", type=Path, default=ROOT / "build" / "bin" / "sl-opt")
    parser.add_argument("--work", type=Path, default=Path("/tmp/sl-compile-time"),
                        help="where the exports and schedules go (default: %(default)s)")
    parser.add_argument("--models", default="llama2-7b,70b",
                        help=f"comma-separated, of {', '.join(MODELS)} (default: %(default)s)")
    parser.add_argument("--seqs", default="2048,4096", help="default: %(default)s")
    parser.add_argument("--pipelines", default="infer,train,generate", help="default: %(default)s")
    parser.add_argument("--quick", action="store_true",
                        help="the 'mid' model (4 layers, hidden 1024) at seq 2048, every pipeline")
    parser.add_argument("--nice", action="store_true", help="run sl-opt under nice")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds per sl-opt run before it is killed (default: %(default)s)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="interpreter for the export (needs torch and onnx)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    if args.quick:
        args.models, args.seqs = "mid", "2048"
    models = args.models.split(",")
    for m in models:
        if m not in MODELS:
            parser.error(f"unknown model {m!r}: one of {', '.join(MODELS)}")
    seqs = [int(s) for s in args.seqs.split(",")]
    names = args.pipelines.split(",")
    if not args.sl_opt.exists():
        parser.error(f"no sl-opt at {args.sl_opt}")

    rows = []
    print(f"sl-opt: {args.sl_opt}", flush=True)
    print("| model | seq | pipeline | wall s | user s | sys s | peak RSS MB | status |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |", flush=True)
    for model in models:
        onnx = export(model, args.work, args.python)
        for seq in seqs:
            options = pipelines(model, seq)
            for name in names:
                if name not in options:
                    parser.error(f"unknown pipeline {name!r}: one of {', '.join(options)}")
                out = args.work / model / f"{name}-{seq}.slsched"
                command = ([str(args.sl_opt), str(onnx), options[name], "-o", str(out)])
                if args.nice:
                    command = ["nice"] + command
                status, wall, user, system, rss, err, unfused = run(command, args.timeout)
                out.unlink(missing_ok=True)
                state = "ok" if status == 0 else (
                    f"killed after {args.timeout:.0f} s" if status == -9 else f"exit {status}: {err}")
                if unfused:  # compiled, but with an S x S score matrix per unfused attention
                    state += f" ({unfused} attentions not fused)"
                rows.append(dict(model=model, seq=seq, pipeline=name, option=options[name],
                                 wall_s=wall, user_s=user, sys_s=system, peak_rss_bytes=rss,
                                 status=state))
                print(f"| {model} | {seq} | {name} | {wall:.1f} | {user:.1f} | {system:.1f} | "
                      f"{rss / 2**20:.0f} | {state} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["status"].startswith("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
