"""Compiles, here, SpeedLoader's side of the peer comparison: the same shapes as the peer drivers
(common.SHAPES), exported --weightless (the graph only; sl-run draws the weights there with
--random-weights, so no weight file travels), compiled by sl-opt into OUT/schedules/, and a
manifest OUT/speedloader.json that speedloader_run.py reads on the GPU machine.

Schedules (every one bf16, weights and optimizer state in host memory):
  train-sl-nN        --sl-train, SpeedLoader mode, N sub-batches (N in --train-sub-batches),
                     batch x seq tokens per step, live-blocks=1
  train-canonical-nN --sl-train mode=canonical (each sub-batch through the whole model in turn:
                     the ZeRO-3-offload data flow on SpeedLoader's machinery)
  gen-MODEL-nN       --sl-generate, N sub-batches of the generation batch, prompt 512, 32 new
                     tokens, weights and KV cache streamed from the host pool
  gen-MODEL-nN-kvdev the same with weights-on-device=false kv-cache-on-device=true (N in
                     --gen-kvdev-sub-batches): the weights streamed every decoding step, the
                     KV caches kept on the device (FlexGen's placement in its policy)

    python3 bench/peers/prepare_speedloader.py --out build-peers/carry [--train-layers 2]
        [--gen-layers 4] [--sl-opt build/bin/sl-opt] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402


TINY_OF = {"llama2-7b": "tiny-llama", "opt-6.7b": "tiny-opt"}


def export_args(s) -> list:
    """speedloader.export's options for shape `s` (weightless)."""
    if s["name"] == "llama2-7b":
        return ["--preset", "llama2-7b", "--layers", str(s["layers"])]
    a = ["--arch", s["arch"], "--layers", str(s["layers"]), "--hidden", str(s["hidden"]),
         "--heads", str(s["heads"]), "--ffn", str(s["ffn"]), "--vocab", str(s["vocab"]),
         "--max-positions", str(s["max_positions"])]
    if s["arch"] == "llama":
        a += ["--kv-heads", str(s["kv_heads"])]
    return a


def sh(cmd) -> str:
    return " ".join(shlex.quote(str(c)) for c in cmd)


def run(cmd):
    print("+", sh(cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


def plan(args):
    """(name, task, shape, sl-opt option string, extra manifest fields) for every schedule."""
    train = common.shape("tiny-llama" if args.tiny else "llama2-7b",
                         None if args.tiny else args.train_layers)
    seq = 32 if args.tiny else args.seq
    out = []
    for n in args.train_sub_batches:
        if args.train_batch % n:
            raise SystemExit(f"--train-sub-batches {n} does not divide --train-batch "
                             f"{args.train_batch}")
        for mode in ("sl", "canonical"):
            if mode == "canonical" and n not in args.canonical_sub_batches:
                continue
            opts = (f"batch={args.train_batch} seq={seq} num-sub-batches={n} live-blocks=1 "
                    f"precision=bf16" + (" mode=canonical" if mode == "canonical" else ""))
            out.append((f"train-{mode}-n{n}", "train", train, "--sl-train", opts,
                        {"batch": args.train_batch, "seq": seq, "sub_batches": n,
                         "mode": "canonical" if mode == "canonical" else "speedloader"}))
    prompt, new = (16, 4) if args.tiny else (args.prompt_len, args.new_tokens)
    batch = 4 if args.tiny else args.gen_batch
    for model in args.gen_models:
        s = common.shape(TINY_OF[model] if args.tiny else model,
                         None if args.tiny else args.gen_layers)
        for n in args.gen_sub_batches:
            if batch % n:
                raise SystemExit(f"--gen-sub-batches {n} does not divide --gen-batch {batch}")
            opts = (f"batch={batch} num-sub-batches={n} max-prompt-len={prompt} "
                    f"max-new-tokens={new} precision=bf16")
            fields = {"batch": batch, "prompt_len": prompt, "new_tokens": new,
                      "sub_batches": n, "mode": "speedloader"}
            out.append((f"gen-{model}-n{n}", "generate", s, "--sl-generate", opts, fields))
            if n in args.gen_kvdev_sub_batches:
                out.append((f"gen-{model}-n{n}-kvdev", "generate", s, "--sl-generate",
                            opts + " weights-on-device=false kv-cache-on-device=true",
                            dict(fields, weights_on_device=False, kv_cache_on_device=True)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the folder that travels (schedules/ and "
                                                 "speedloader.json are written into it)")
    ap.add_argument("--sl-opt", default=str(ROOT / "build" / "bin" / "sl-opt"))
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the Python that runs speedloader.export (needs torch and onnx)")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes, for a CPU smoke test")
    ap.add_argument("--train-layers", type=int, default=2)
    ap.add_argument("--train-batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--train-sub-batches", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--canonical-sub-batches", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--gen-layers", type=int, default=4)
    ap.add_argument("--gen-models", nargs="+", default=["llama2-7b", "opt-6.7b"],
                    choices=["llama2-7b", "opt-6.7b"])
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--gen-sub-batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--gen-kvdev-sub-batches", type=int, nargs="*", default=[1],
                    help="of --gen-sub-batches, those also compiled with the KV caches on the "
                         "device (-kvdev)")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args(argv)
    if not Path(args.sl_opt).is_file():
        raise SystemExit(f"no sl-opt at {args.sl_opt}: build it, or give --sl-opt")
    out = Path(args.out)
    schedules = out / "schedules"
    schedules.mkdir(parents=True, exist_ok=True)
    manifest = {"prepared": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short",
                                          "HEAD"], stdout=subprocess.PIPE,
                                         text=True).stdout.strip(),
                "sl_opt": args.sl_opt, "prepare_command": sh([sys.executable, *sys.argv]),
                "schedules": []}
    exported = {}
    with tempfile.TemporaryDirectory(prefix="sl-peers-") as tmp:
        for name, task, s, flag, opts, fields in plan(args):
            key = (s["name"], s["layers"])
            if key not in exported:
                model = Path(tmp) / f"{s['name']}-{s['layers']}" / "model.onnx"
                cmd = [args.python, "-m", "speedloader.export", *export_args(s), "--weightless",
                       "--out", model]
                t0 = time.time()
                run(["env", f"PYTHONPATH={ROOT / 'python'}", *cmd])
                exported[key] = (model, sh(cmd), time.time() - t0)
            model, export_cmd, export_s = exported[key]
            target = schedules / f"{name}.slsched"
            compile_cmd = [args.sl_opt, model, f"{flag}={opts}", "-o", target]
            t0 = time.time()
            run(compile_cmd)
            manifest["schedules"].append(dict(
                fields, name=name, task=task, model=s, schedule=f"schedules/{target.name}",
                sl_opt_options=f'{flag}="{opts}"',
                export_command=f"PYTHONPATH=python {export_cmd.replace(str(model), 'model.onnx')}",
                compile_command=sh(compile_cmd).replace(str(model), "model.onnx").replace(
                    str(target), f"schedules/{target.name}"),
                export_seconds=export_s, compile_seconds=time.time() - t0,
                schedule_bytes=target.stat().st_size))
            print(f"  {name}: {target.stat().st_size / 1e6:.2f} MB in "
                  f"{time.time() - t0:.0f} s", flush=True)
    (out / "speedloader.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {out / 'speedloader.json'} ({len(manifest['schedules'])} schedules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
