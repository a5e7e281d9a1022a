"""CPU training throughput: SpeedLoader (sl-opt --sl-train + sl-run) against PyTorch on the CPU.

Same model (a LLaMA shape, random weights from our builder), same tokens per step, same AdamW, on
the same cores. Each configuration runs in a fresh process, the configurations interleaved
(one run of each, then again, --repeats times), so that a load that comes and goes on a shared
machine falls on all of them alike; the CPU time other processes took during each run is measured
from /proc/stat and reported.

Configurations (T in --threads, by default 1 and every core):
- sl-run with OMP_NUM_THREADS=T (its GEMMs are single-threaded OpenBLAS calls on that pool);
- PyTorch with torch.set_num_threads(T): its GEMMs go to OpenBLAS, whose own pthreads pool uses
  every core whatever T is (PyTorch does not set it), so T = 1 already computes GEMMs on all cores;
- PyTorch on one thread: torch.set_num_threads(1) and OPENBLAS_NUM_THREADS=1.
The comparison is against PyTorch's fastest configuration (median tokens/s), and at one thread
each: sl-run with OMP_NUM_THREADS=1 against PyTorch on one thread. The one-thread configurations
(OMP_NUM_THREADS=1, PyTorch on one thread) are pinned to one CPU, so that sl-run's copy and
optimizer threads share it rather than use a second core.

    PYTHONPATH=python /usr/bin/python3 bench/cpu_training.py --record bench/results/cpu-training.md
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))


def model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=688)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=6, help="timed steps (after one warm-up step)")


def config_of(args):
    from speedloader.models.llama import LlamaConfig
    return LlamaConfig(layers=args.layers, hidden=args.hidden, heads=args.heads,
                       kv_heads=args.heads, ffn=args.ffn, vocab=args.vocab,
                       max_positions=args.seq)


def torch_worker(args) -> int:
    """One PyTorch measurement, in its own process (OpenBLAS reads its thread count at load)."""
    import ctypes

    import torch

    from speedloader.models import build_model

    torch.set_num_threads(args.torch_threads)
    model = build_model("llama", config_of(args), seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    tokens = np.fromfile(args.tokens, dtype="<u2").astype(np.int64)
    per_step = args.batch * args.seq
    times = []
    for t in range(args.steps + 1):
        window = tokens[t * per_step:(t + 1) * per_step + 1]
        x = torch.from_numpy(window[:-1].reshape(args.batch, args.seq))
        y = torch.from_numpy(window[1:].reshape(args.batch, args.seq))
        start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, args.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    blas_threads = None
    try:
        blas_threads = ctypes.CDLL("libopenblas.so.0").openblas_get_num_threads()
    except (OSError, AttributeError):
        pass
    print(json.dumps({"tokens_per_second": per_step * args.steps / sum(times[1:]),
                      "openblas_threads": blas_threads}))
    return 0


def busy_seconds():
    """CPU seconds all CPUs have spent not idle, from /proc/stat, or None where there is none."""
    try:
        with open("/proc/stat") as f:
            # user nice system idle iowait irq softirq steal (guest time is within user)
            fields = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return None
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def children_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(run):
    """Runs `run()` (which returns tokens/s; the work runs in child processes) and returns it with
    the share of the machine's CPUs that other processes used meanwhile (None without
    /proc/stat): all CPUs' busy time less the run's own, over wall time times the CPU count."""
    busy, own, start = busy_seconds(), children_seconds(), time.perf_counter()
    value = run()
    busy_after, own_after, wall = busy_seconds(), children_seconds(), time.perf_counter() - start
    other = None
    if busy is not None and busy_after is not None and wall > 0:
        other = max(0.0, (busy_after - busy) - (own_after - own)) / (wall * (os.cpu_count() or 1))
    return value, other


def pinned(threads):
    """For a one-thread configuration, a preexec_fn that keeps the process on one CPU: sl-run's
    other threads (its copy and optimizer streams) and OpenBLAS's then share that CPU too, so
    "one thread" means one core's work. None (all CPUs) otherwise."""
    if threads != 1 or not hasattr(os, "sched_setaffinity"):
        return None
    first = min(os.sched_getaffinity(0))
    return lambda: os.sched_setaffinity(0, {first})


def git_commit() -> str:
    def git(*cmd):
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return commit + (" with uncommitted changes" if dirty else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    model_args(p)
    p.add_argument("--threads", type=int, nargs="+",
                   default=sorted({1, os.cpu_count() or 1}),
                   help="thread counts to try, for sl-run and PyTorch (default: 1 and every core)")
    p.add_argument("--repeats", type=int, default=5,
                   help="interleaved runs of every configuration (the median is reported)")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--baseline-build", help="also run this build's sl-run (an earlier commit's "
                   "build directory) on the same schedule, interleaved with the others, for a "
                   "before/after comparison")
    p.add_argument("--record", help="also write the results as Markdown to this file, above the "
                   "records it holds")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--torch-threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--tokens", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker:
        return torch_worker(args)

    import torch

    from speedloader.export import export_model

    per_step = args.batch * args.seq
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        res = export_model("llama", config_of(args), tmp / "model.onnx", seed=0,
                           constant_folding=False, batch=args.batch, seq=args.seq)
        params = sum(p.numel() for p in res.model.parameters())
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, args.vocab, size=per_step * (args.steps + 1) + 1, dtype=np.uint16)
        tokens.astype("<u2").tofile(tmp / "tokens.bin")
        subprocess.run([f"{args.build}/bin/sl-opt", tmp / "model.onnx",
                        f"--sl-train=batch={args.batch} seq={args.seq}", "-o",
                        tmp / "train.slsched"], check=True)

        def sl_run(threads, build=args.build):
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            subprocess.run([f"{build}/bin/sl-run", tmp / "train.slsched", "--data",
                            tmp / "tokens.bin", "--steps", str(args.steps + 1), "--report",
                            tmp / "report.json"], check=True, env=env, stdout=subprocess.DEVNULL,
                           preexec_fn=pinned(threads))
            with open(tmp / "report.json") as f:
                seconds = json.load(f)["train"]["step_seconds"][1:]  # drop the warm-up step
            return per_step * len(seconds) / sum(seconds)

        blas_threads = {}

        def pytorch(threads, one_blas_thread):
            env = dict(os.environ)
            env.pop("OMP_NUM_THREADS", None)
            if one_blas_thread:
                env["OPENBLAS_NUM_THREADS"] = "1"
            else:
                env.pop("OPENBLAS_NUM_THREADS", None)
            worker = [sys.executable, str(Path(__file__).resolve()), "--torch-worker",
                      "--torch-threads", str(threads), "--tokens", str(tmp / "tokens.bin")]
            for name in ("layers", "hidden", "heads", "ffn", "vocab", "batch", "seq", "steps"):
                worker += [f"--{name}", str(getattr(args, name))]
            out = subprocess.run(worker, check=True, env=env, capture_output=True, text=True,
                                 preexec_fn=pinned(1 if one_blas_thread else None))
            result = json.loads(out.stdout.strip().splitlines()[-1])
            blas_threads[(threads, one_blas_thread)] = result["openblas_threads"]
            return result["tokens_per_second"]

        configs = [(f"sl-run, OMP_NUM_THREADS={t}", "sl", t, lambda t=t: sl_run(t))
                   for t in args.threads]
        if args.baseline_build:
            configs += [(f"baseline sl-run ({args.baseline_build}), OMP_NUM_THREADS={t}",
                         "baseline", t, lambda t=t: sl_run(t, args.baseline_build))
                        for t in args.threads]
        configs += [(f"PyTorch, torch.set_num_threads({t})", "torch", t,
                     lambda t=t: pytorch(t, False)) for t in args.threads]
        configs.append(("PyTorch, one thread (set_num_threads(1), OPENBLAS_NUM_THREADS=1)",
                        "torch1", 1, lambda: pytorch(1, True)))
        runs = {name: [] for name, *_ in configs}
        others = []
        loads = [os.getloadavg()[0]]
        for _ in range(args.repeats):
            for name, _, _, run in configs:
                value, other = timed(run)
                runs[name].append(value)
                if other is not None:
                    others.append(other)
                loads.append(os.getloadavg()[0])

    median = {name: statistics.median(values) for name, values in runs.items()}
    sl_best = max((n for n, kind, *_ in configs if kind == "sl"), key=median.get)
    torch_best = max((n for n, kind, *_ in configs if kind.startswith("torch")), key=median.get)
    sl_one = "sl-run, OMP_NUM_THREADS=1" if 1 in args.threads else None
    torch_one = "PyTorch, one thread (set_num_threads(1), OPENBLAS_NUM_THREADS=1)"
    default_blas = next((v for (_, one), v in sorted(blas_threads.items()) if not one), None)

    lines = [
        f"Model: LLaMA {args.layers}L h{args.hidden} ffn{args.ffn} v{args.vocab}, "
        f"{params / 1e6:.1f}M parameters, {args.batch} x {args.seq} tokens per step.",
        "",
        "| configuration | median tokens/s | runs (tokens/s, in order) |",
        "| --- | --- | --- |",
    ]
    for name, *_ in configs:
        lines.append(f"| {name} | {median[name]:.0f} | "
                     f"{', '.join(f'{v:.0f}' for v in runs[name])} |")
    lines += [
        "",
        f"- SpeedLoader's best ({sl_best}) against PyTorch's best ({torch_best}): "
        f"**{median[sl_best] / median[torch_best]:.2f}x**",
    ]
    if sl_one:
        lines.append(f"- one thread each ({sl_one} against PyTorch on one thread): "
                     f"**{median[sl_one] / median[torch_one]:.2f}x**")
    if args.baseline_build:
        base_best = max((n for n, kind, *_ in configs if kind == "baseline"), key=median.get)
        lines.append(f"- the baseline's best ({base_best}) against PyTorch's best: "
                     f"{median[base_best] / median[torch_best]:.2f}x; SpeedLoader's best against "
                     f"the baseline's best: {median[sl_best] / median[base_best]:.2f}x")
    if others:
        lines.append(f"- CPU time of other processes during the runs, as a share of all "
                     f"{os.cpu_count()} cores (/proc/stat less the runs' own): median "
                     f"{100 * statistics.median(others):.0f}%, least {100 * min(others):.0f}%, "
                     f"most {100 * max(others):.0f}%")
    lines.append(f"- 1-minute load average over the runs: {min(loads):.2f} to {max(loads):.2f}")
    if default_blas is not None:
        lines.append(f"- OpenBLAS's own thread count in PyTorch without OPENBLAS_NUM_THREADS: "
                     f"{default_blas}")
    print("\n".join(lines))
    if args.record:
        header = [
            "# CPU training throughput",
            "",
            f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
            f"- commit: {git_commit()}",
            f"- machine: {platform.machine()}, {os.cpu_count()} cores ({platform.platform()}); "
            f"PyTorch {torch.__version__}",
            f"- command: `PYTHONPATH=python /usr/bin/python3 {' '.join(sys.argv)}`",
            f"- {args.steps} timed AdamW steps after one warm-up step per run, {per_step} tokens per "
            "step; SpeedLoader's time per step from sl-run's report (the step, not start-up); "
            f"every configuration in a fresh process, interleaved, {args.repeats} times",
            "",
        ]
        path = Path(args.record)
        earlier = path.read_text() if path.exists() else ""
        if earlier.startswith("# CPU training throughput\n"):
            earlier = earlier[len("# CPU training throughput\n"):].lstrip("\n")
        text = "\n".join(header + lines) + "\n"
        if earlier:
            text += "\n## Earlier record (superseded by the one above)\n\n" + earlier
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
