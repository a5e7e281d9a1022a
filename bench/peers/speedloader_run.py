"""SpeedLoader's side of the peer comparison, on the GPU machine: runs one schedule that
prepare_speedloader.py compiled here (listed in CARRY/speedloader.json) with
`sl-run --backend cuda --random-weights 0` and prints one RESULT line (common.py) from sl-run's
report, in the same fields as the peer drivers.

Training: --warmup + --steps steps on random token ids (common.token_ids), the timed steps'
seconds from the report; generation: the batch of prompts every peer uses (common.prompt_ids),
greedy, run --warmup-batches times untimed first (the first batch pays cuDNN's and cuBLASLt's
plan building) and timed from the report's per_batch figures of the last batch. Peak device memory is sl-run's device arena peak (one cudaMalloc holds every activation,
weight and gradient buffer; cuBLAS's and cuDNN's workspaces and the CUDA context, 577-681 MiB on
an H200 for the 7B-shaped probes, are outside it), peak host memory the child's ru_maxrss (the
pinned pool included).

    python3 bench/peers/speedloader_run.py --carry build-peers/carry --schedule train-sl-n2
    python3 bench/peers/speedloader_run.py --carry DIR --schedule NAME --sl-run build/bin/sl-run \
        --backend cpu      # here, on schedules prepared with --tiny
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "gpu"))
import common  # noqa: E402


def find_sl_run(args, work: Path):
    """sl-run and the environment it needs (generation_offload's search: the bundle unpacked,
    cuBLAS and the bundle's C++ runtime put on the library path where the loader lacks them)."""
    import generation_offload

    ns = argparse.Namespace(sl_run=args.sl_run, bundle=args.bundle, carry=args.carry)
    return generation_offload._find_sl_run(ns, work)


def run_sl(cmd, env_extra):
    env = dict(os.environ, **env_extra)
    print("+", " ".join(str(c) for c in cmd), flush=True)
    start = time.time()
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - start
    print(output[-4000:], flush=True)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"sl-run exited {code}: {output[-1500:]}")
    return wall, usage.ru_maxrss * 1024


def measure(args, entry):
    carry = Path(args.carry)
    schedule = carry / entry["schedule"]
    s = entry["model"]
    # nvidia-smi, not PyTorch: this process runs with the library path sl-run needs
    # (bench/gpu/gpu-libs.sh), which need not suit PyTorch's own CUDA libraries.
    if args.backend == "cuda" and not common.smi_gpu_name():
        raise common.Skip("no GPU (nvidia-smi lists none; give --backend cpu for a tiny "
                          "schedule here)")
    with tempfile.TemporaryDirectory(prefix="sl-peers-") as d:
        work = Path(d)
        sl_run, env_extra = find_sl_run(args, work)
        report = work / "report.json"
        base = [sl_run, schedule, "--backend", args.backend, "--random-weights", 0,
                "--report", report]
        if entry["task"] == "train":
            steps = args.warmup + args.steps
            tokens = common.token_ids(steps * entry["batch"] * entry["seq"] + 1, s["vocab"])
            data = work / "tokens.bin"
            tokens.astype("<u2").tofile(data)
            cmd = base + ["--data", data, "--steps", steps, "--vocab", s["vocab"],
                          "--lr", args.lr]
        else:
            prompts = common.prompt_ids(entry["batch"], entry["prompt_len"], s["vocab"])
            pfile = work / "prompts.jsonl"
            # The batch twice: the first pays the one-time costs (cuDNN and cuBLASLt plans), the
            # second is timed (per_batch[-1]), as FlexGen's driver warms up before it times.
            pfile.write_text("".join(json.dumps({"tokens": p}) + "\n"
                                     for p in prompts.tolist() * (1 + args.warmup_batches)))
            cmd = base + ["--prompts", pfile, "--output", work / "out.jsonl",
                          "--temperature", 0]
        wall, rss = run_sl(cmd, env_extra)
        rep = json.loads(report.read_text())
        command = " ".join(str(c) for c in cmd).replace(str(work), "$WORK")
        common_fields = {
            "sub_batches": entry["sub_batches"], "mode": entry["mode"],
            "device_peak_bytes": rep["device_arena_peak_bytes"],
            "device_arena_bytes": rep["device_arena_bytes"],
            "host_pool_peak_bytes": rep["host_pool_peak_bytes"],
            "host_peak_rss_bytes": rss, "load_seconds": rep["load_seconds"],
            "sl_run_wall_seconds": wall, "sl_run_command": command,
            "plan": rep.get("plan"), "backend": rep["backend"],
            "random_weights": rep.get("random_weights"),
            "versions": dict(common.versions(), sl_run=_bundle_commit(sl_run)),
        }
        if entry["task"] == "train":
            t = rep["train"]
            times = t["step_seconds"][args.warmup:]
            ns = argparse.Namespace(batch=entry["batch"], seq=entry["seq"],
                                    sub_batches=entry["sub_batches"])
            fields = common.train_fields(ns, s, times)
            fields.update(common_fields, losses=t["losses"],
                          all_step_seconds=t["step_seconds"],
                          bytes_host_to_device_per_step=t["bytes_host_to_device"][-1],
                          bytes_device_to_host_per_step=t["bytes_device_to_host"][-1],
                          optimizer_overlapped=t.get("optimizer_overlapped"))
            return fields
        g = rep["generation"]
        timed = g["per_batch"][-1]
        steps = timed["decode_runs"]
        out = [json.loads(line) for line in (work / "out.jsonl").read_text().splitlines()
               if line.strip()]
        return dict(
            common_fields, batch=entry["batch"], prompt_len=entry["prompt_len"],
            new_tokens=entry["new_tokens"], prefill_seconds=timed["prefill_seconds"],
            prefill_tokens_per_second=timed["prefill_tokens_per_second"],
            decode_steps=steps, decode_seconds=timed["decode_seconds"],
            decode_tokens_per_second=timed["decode_tokens_per_second"],
            warmup_batches=len(g["per_batch"]) - 1,
            first_batch=g["per_batch"][0] if len(g["per_batch"]) > 1 else None,
            bytes_to_device_per_decode_step=(timed["decode_bytes_host_to_device"] / steps
                                             if steps else 0),
            weight_bytes=g["schedule"].get("parameter_bytes"),
            weights_on_device=g["schedule"].get("weights_on_device"),
            kv_cache_on_device=g["schedule"].get("kv_cache_on_device"),
            kv_cache_bytes=g["schedule"].get("kv_cache_bytes"),
            first_tokens=out[0]["tokens"][:8] if out else [])


def _bundle_commit(sl_run: Path) -> str:
    manifest = Path(sl_run).parent.parent / "MANIFEST"
    if manifest.is_file():
        for line in manifest.read_text().splitlines():
            if line.startswith("commit:"):
                return line.split(":", 1)[1].strip()
    return str(sl_run)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--carry", required=True, help="prepare's folder (speedloader.json, "
                                                   "schedules/, speedloader-runtime.tar.gz)")
    ap.add_argument("--schedule", required=True, help="a name in CARRY/speedloader.json")
    ap.add_argument("--bundle", help="pack-runtime.sh's tarball or directory (default: "
                                     "CARRY/speedloader-runtime.tar.gz)")
    ap.add_argument("--sl-run", help="an sl-run to use instead of the bundle's")
    ap.add_argument("--backend", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--steps", type=int, default=3, help="timed training steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed training steps first")
    ap.add_argument("--warmup-batches", type=int, default=1,
                    help="generation: untimed batches of the same prompts first")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--jsonl", help="also append the result line to this file")
    args = ap.parse_args(argv)
    manifest_path = Path(args.carry) / "speedloader.json"
    if not manifest_path.is_file():
        raise SystemExit(f"no {manifest_path}: run bench/peers/prepare.sh (here) first")
    manifest = json.loads(manifest_path.read_text())
    entries = {e["name"]: e for e in manifest["schedules"]}
    if args.schedule not in entries:
        raise SystemExit(f"no schedule {args.schedule!r} in {manifest_path}; there are: "
                         f"{', '.join(entries)}")
    entry = entries[args.schedule]
    system = "speedloader" if entry["mode"] == "speedloader" else "speedloader-canonical"
    config = {k: entry[k] for k in ("name", "schedule", "sl_opt_options", "export_command",
                                    "compile_command") if k in entry}
    config.update(sub_batches=entry["sub_batches"], prepared=manifest.get("prepared"),
                  commit=manifest.get("commit"),
                  steps=args.steps if entry["task"] == "train" else None,
                  warmup=args.warmup if entry["task"] == "train" else None,
                  lr=args.lr if entry["task"] == "train" else None, dtype="bf16",
                  weights="sl-run --random-weights 0 (normal, std 0.02)")
    return common.run_driver(system, entry["task"], entry["model"], config, args.jsonl,
                             lambda: measure(args, entry))


if __name__ == "__main__":
    sys.exit(main())
