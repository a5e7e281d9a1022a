"""Sub-batch overlap on the CPU backend: SpeedLoader against canonical with a throttled link.

Trains one LLaMA shape (enough layers that the parameters dominate the traffic) with both
schedules for the same batch, for several sub-batch counts N and live blocks K, a few steps each
(the first is a warm-up and is left out), with `sl-run --link-gbps` pacing host<->device copies
so that the step is bound by the link, not by compute. Prints one table: tokens/s, bytes moved
per step, the SpeedLoader/canonical throughput ratio measured in this run, the compute stream's
busy fraction, the h2d link's busy fraction, and the fraction of copy time that overlaps compute,
all from sl-run's report and Chrome trace. Checks that both schedules give the same losses (to
fp32 rounding) for every N and K.

    PYTHONPATH=python /usr/bin/python3 bench/subbatch_overlap.py --record bench/results/subbatch-overlap.md
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
from speedloader.plot_trace import load_trace  # noqa: E402

COPY_TRACKS = ("h2d", "d2h")


def union(intervals):
    """Sorted, disjoint (start, end) intervals covering `intervals`."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(intervals):
    return sum(e - s for s, e in intervals)


def intersect(a, b):
    """The intersection of two sorted disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def trace_metrics(path, first_run):
    """Compute-busy, h2d-busy and copy-overlap fractions over the runs from `first_run` on."""
    trace = load_trace(path)
    windows = [(s, s + d) for r, s, d in trace.runs if r >= first_run]
    if not windows:
        raise RuntimeError(f"{path}: no traced run from {first_run} on")
    total = sum(e - s for s, e in windows)

    def kernels(tracks):
        spans = [(s.start_us, s.end_us) for s in trace.spans
                 if s.cat != "wait" and s.track.split(" (")[0] in tracks]
        return intersect(union(spans), union(windows))

    compute = kernels(("compute",))
    copies = kernels(COPY_TRACKS)
    h2d = kernels(("h2d",))
    overlap = length(intersect(copies, compute))
    return {
        "compute_busy": length(compute) / total,
        "h2d_busy": length(h2d) / total,
        "copy_overlap": overlap / length(copies) if copies else 0.0,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=344)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--n", default="1,2,4,8", help="sub-batch counts N, comma-separated")
    p.add_argument("--k", default="1,2", help="live blocks K, comma-separated")
    p.add_argument("--steps", type=int, default=4, help="timed steps (after one warm-up step)")
    p.add_argument("--link-gbps", type=float, default=0.25,
                   help="sl-run --link-gbps: GB/s per copy direction")
    p.add_argument("--threads", type=int, default=1,
                   help="OMP_NUM_THREADS for sl-run (its copy threads need a core of their own)")
    p.add_argument("--rtol", type=float, default=1e-5,
                   help="largest relative loss difference SpeedLoader vs canonical allowed")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--keep", help="keep schedules, reports and traces in this directory")
    p.add_argument("--record", help="also write the table as Markdown to this file")
    args = p.parse_args()
    ns = [int(x) for x in args.n.split(",")]
    ks = [int(x) for x in args.k.split(",")]

    config = LlamaConfig(layers=args.layers, hidden=args.hidden, heads=args.heads,
                         kv_heads=args.heads, ffn=args.ffn, vocab=args.vocab,
                         max_positions=args.seq)
    tokens_per_step = args.batch * args.seq
    steps = args.steps + 1
    tmp_ctx = tempfile.TemporaryDirectory()
    tmp = Path(args.keep) if args.keep else Path(tmp_ctx.name)
    tmp.mkdir(parents=True, exist_ok=True)
    res = export_model("llama", config, tmp / "model.onnx", seed=0, constant_folding=False,
                       batch=1, seq=args.seq)
    params = sum(q.numel() for q in res.model.parameters())
    rng = np.random.default_rng(0)
    rng.integers(0, args.vocab, size=tokens_per_step * steps + 1, dtype=np.uint16).astype(
        "<u2").tofile(tmp / "tokens.bin")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

    rows = {}
    for k in ks:
        for n in ns:
            for mode in ("speedloader", "canonical"):
                name = f"{mode}-n{n}-k{k}"
                sched = tmp / f"{name}.slsched"
                subprocess.run([f"{args.build}/bin/sl-opt", tmp / "model.onnx",
                                f"--sl-train=batch={args.batch} seq={args.seq} "
                                f"num-sub-batches={n} live-blocks={k} mode={mode}",
                                "-o", sched], check=True)
                report, trace = tmp / f"{name}.json", tmp / f"{name}.trace.json"
                subprocess.run([f"{args.build}/bin/sl-run", sched, "--data", tmp / "tokens.bin",
                                "--steps", str(steps), "--report", report, "--trace", trace,
                                "--link-gbps", str(args.link_gbps)],
                               check=True, env=env, stdout=subprocess.DEVNULL)
                with open(report) as f:
                    rep = json.load(f)
                train = rep["train"]
                seconds = train["step_seconds"][1:]
                row = {
                    "tps": tokens_per_step * len(seconds) / sum(seconds),
                    "h2d": train["bytes_host_to_device"][-1],
                    "d2h": train["bytes_device_to_host"][-1],
                    "losses": train["losses"],
                    "plan": rep["plan"],
                }
                row.update(trace_metrics(trace, first_run=1))
                rows[(mode, n, k)] = row
                print(f"  ran {name}: {row['tps']:.0f} tokens/s", file=sys.stderr)

    # Same losses: SpeedLoader vs canonical for each (N, K), and every run vs the first.
    worst_pair, worst_any = 0.0, 0.0
    ref = np.array(rows[("speedloader", ns[0], ks[0])]["losses"])
    for (mode, n, k), row in rows.items():
        losses = np.array(row["losses"])
        worst_any = max(worst_any, float(np.max(np.abs(losses - ref) / np.abs(ref))))
        if mode == "speedloader":
            other = np.array(rows[("canonical", n, k)]["losses"])
            worst_pair = max(worst_pair, float(np.max(np.abs(losses - other) / np.abs(other))))

    plan = rows[("speedloader", ns[0], ks[0])]["plan"]
    mb = 1e6
    lines = [
        "| mode | N | K | tokens/s | H2D MB/step | D2H MB/step | SL/canonical | compute busy "
        "| h2d busy | copy overlapping compute |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k in ks:
        for n in ns:
            for mode in ("speedloader", "canonical"):
                r = rows[(mode, n, k)]
                ratio = (f"{rows[('speedloader', n, k)]['tps'] / rows[('canonical', n, k)]['tps']:.2f}"
                         if mode == "speedloader" else "")
                lines.append(
                    f"| {mode} | {n} | {k} | {r['tps']:.0f} | {r['h2d'] / mb:.2f} | "
                    f"{r['d2h'] / mb:.2f} | {ratio} | {r['compute_busy']:.2f} | "
                    f"{r['h2d_busy']:.2f} | {r['copy_overlap']:.2f} |")
    ok = worst_pair <= args.rtol and worst_any <= args.rtol
    summary = [
        "",
        f"P (parameter bytes) = {plan['parameter_bytes'] / mb:.2f} MB ({params} parameters, fp32); "
        f"link {args.link_gbps} GB/s per direction, so moving P takes "
        f"{plan['parameter_bytes'] / (args.link_gbps * 1e9) * 1e3:.1f} ms.",
        f"Losses over {steps} steps: largest relative difference SpeedLoader vs canonical "
        f"{worst_pair:.1e}, any run vs speedloader N={ns[0]} K={ks[0]} {worst_any:.1e} "
        f"({'OK' if ok else 'FAIL'}: limit {args.rtol:.0e}).",
    ]
    print("\n".join(lines + summary))
    if args.record:
        header = [
            "# Sub-batch overlap: SpeedLoader against canonical on a throttled link (CPU)",
            "",
            f"- date: {datetime.date.today().isoformat()}",
            f"- machine: {platform.machine()}, {os.cpu_count()} cores ({platform.platform()})",
            f"- command: `PYTHONPATH=python /usr/bin/python3 {' '.join(sys.argv)}`",
            f"- model: LLaMA {args.layers} layers, hidden {args.hidden}, ffn {args.ffn}, vocab "
            f"{args.vocab}, {params / 1e6:.2f}M parameters; batch {args.batch} x seq {args.seq} "
            f"= {tokens_per_step} tokens per step for every N; {args.steps} timed AdamW steps "
            f"after one warm-up step; OMP_NUM_THREADS={args.threads}",
            "",
        ]
        Path(args.record).write_text("\n".join(header + lines + summary) + "\n")
    tmp_ctx.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
