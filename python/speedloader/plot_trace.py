"""Renders a Chrome trace written by `sl-run --trace` as a PNG timeline (matplotlib).

One row per stream (compute, h2d, d2h, host, ...), each kernel a bar coloured by what it does:
compute kernels, parameter fetches and activation prefetches (host -> device copies), offloads
(device -> host copies), host accumulations and optimizer steps. Waits that blocked a stream are
drawn as thin hatched bars under the row (in a CUDA trace, whose kernels the GPU timed, a stream's
host-thread waits are a row of their own: "compute host waits", ...). `--run N` shows one run
(one training step) only, `--window START END` a time window in milliseconds from the start of
the trace.

    PYTHONPATH=python python3 -m speedloader.plot_trace trace.json timeline.png --run 1

A host -> device copy whose name is a parameter's (sl-opt names a fetch's copies after the
parameters, a prefetch's after the buffer it reads) counts as a fetch when `--params` names the
parameters' prefix or, by default, when its name ends in `.weight` or `.bias`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple


class TraceError(ValueError):
    """The file is not a Chrome trace as sl-run writes it (the message says what is wrong)."""


@dataclass
class Span:
    track: str
    name: str
    cat: str
    start_us: float
    dur_us: float
    run: Optional[int] = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass
class Trace:
    # Track names in display order (sort index), without the "runs" track.
    tracks: List[str]
    spans: List[Span]
    # (run index, start, duration) of every traced run, from the "runs" track.
    runs: List[Tuple[int, float, float]] = field(default_factory=list)

    def run_window(self, run: int) -> Tuple[float, float]:
        for index, start, dur in self.runs:
            if index == run:
                return start, start + dur
        have = ", ".join(str(r[0]) for r in self.runs) or "none"
        raise TraceError(f"the trace holds no run {run} (runs traced: {have})")


def load_trace(path: os.PathLike) -> Trace:
    """Reads an sl-run Chrome trace; a file that is not one raises TraceError saying why."""
    path = Path(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}: not JSON ({e})") from None
    if isinstance(data, list):  # the array form of the format
        events = data
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events = data["traceEvents"]
    else:
        raise TraceError(f"{path}: not a Chrome trace (expected an object with a "
                         "\"traceEvents\" array, or an array of events)")

    names: Dict[int, str] = {}
    order: Dict[int, int] = {}
    raw = []
    for i, e in enumerate(events):
        if not isinstance(e, dict) or "ph" not in e:
            raise TraceError(f"{path}: event {i} is not an object with a \"ph\" field: {e!r:.80}")
        if e["ph"] == "M":
            args = e.get("args") or {}
            if e.get("name") == "thread_name" and "tid" in e:
                names[e["tid"]] = str(args.get("name", e["tid"]))
            elif e.get("name") == "thread_sort_index" and "tid" in e:
                order[e["tid"]] = int(args.get("sort_index", e["tid"]))
        elif e["ph"] == "X":
            for key in ("tid", "ts", "dur"):
                if key not in e:
                    raise TraceError(f"{path}: event {i} (\"X\" {e.get('name', '?')!r}) has no "
                                     f"\"{key}\"")
            try:
                ts, dur = float(e["ts"]), float(e["dur"])
            except (TypeError, ValueError):
                raise TraceError(f"{path}: event {i} has a non-numeric ts or dur") from None
            if dur < 0:
                raise TraceError(f"{path}: event {i} has a negative duration {dur}")
            raw.append((e, ts, dur))
    if not raw:
        raise TraceError(f"{path}: the trace has no spans (\"X\" events)")

    spans, runs = [], []
    tids = set()
    for e, ts, dur in raw:
        track = names.get(e["tid"], f"track {e['tid']}")
        args = e.get("args") or {}
        if e.get("cat") == "run" or track == "runs":
            run = args.get("run")
            if run is None:
                name = str(e.get("name", ""))
                run = int(name.split()[-1]) if name.startswith("run ") else len(runs)
            runs.append((int(run), ts, dur))
            continue
        tids.add(e["tid"])
        spans.append(Span(track, str(e.get("name", "")), str(e.get("cat", "")), ts, dur,
                          args.get("run")))
    tracks = [names.get(t, f"track {t}") for t in sorted(tids, key=lambda t: (order.get(t, t), t))]
    return Trace(tracks, spans, sorted(runs))


# Colour classes, in legend order.
KINDS = {
    "compute": ("compute", "#4C72B0"),
    "fetch": ("parameter fetch (h2d)", "#DD8452"),
    "prefetch": ("activation prefetch (h2d)", "#F2C14E"),
    "offload": ("offload (d2h)", "#55A868"),
    "host": ("host accumulate", "#8172B3"),
    "optimizer": ("optimizer step (host)", "#C44E52"),
    "other": ("other", "#8C8C8C"),
    "wait": ("wait (blocked)", "#BBBBBB"),
}


def classify(span: Span, param_prefix: Optional[str] = None) -> str:
    """The colour class of a span: a key of KINDS."""
    if span.cat == "wait":
        return "wait"
    track = span.track.split(" (stream")[0]
    if span.cat == "OPTIMIZER_STEP":
        return "optimizer"
    if track == "host":
        return "host"
    if span.cat == "COPY" or track in ("h2d", "d2h"):
        if track == "d2h":
            return "offload"
        if track == "h2d":
            if param_prefix is not None:
                return "fetch" if span.name.startswith(param_prefix) else "prefetch"
            return "fetch" if span.name.endswith((".weight", ".bias")) else "prefetch"
        return "other"
    if track == "compute":
        return "compute"
    return "other"


def plot_trace(trace, out: os.PathLike, *, run: Optional[int] = None,
               window: Optional[Tuple[float, float]] = None, title: Optional[str] = None,
               param_prefix: Optional[str] = None, width: float = 14.0,
               xmax: Optional[float] = None) -> Path:
    """Draws `trace` (a Trace or the path of a trace file) into the PNG `out` and returns its path.

    `run` restricts the picture to one run (a training step), `window` to (start, end) in
    milliseconds from the trace's first span; with neither, the whole trace is drawn. `xmax`
    fixes the time axis's length in milliseconds (to draw two traces on the same scale).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    origin = min([s.start_us for s in trace.spans] + [r[1] for r in trace.runs])
    if run is not None and window is not None:
        raise ValueError("give a run or a window, not both")
    if run is not None:
        lo, hi = trace.run_window(run)
    elif window is not None:
        lo, hi = origin + window[0] * 1e3, origin + window[1] * 1e3
        if not hi > lo:
            raise ValueError(f"the window's end ({window[1]}) must be after its start "
                             f"({window[0]})")
    else:
        lo = origin
        hi = max(s.end_us for s in trace.spans)
    t0 = lo  # the picture's time zero

    rows = {name: i for i, name in enumerate(trace.tracks)}
    fig_height = 1.0 + 0.6 * len(rows)
    fig, ax = plt.subplots(figsize=(width, fig_height))
    used = set()
    bars: Dict[str, List[Tuple[float, float, int]]] = {}
    for s in trace.spans:
        if s.end_us < lo or s.start_us > hi:
            continue
        start, end = max(s.start_us, lo), min(s.end_us, hi)
        kind = classify(s, param_prefix)
        bars.setdefault(kind, []).append(((start - t0) / 1e3, (end - start) / 1e3, rows[s.track]))
    for kind, items in bars.items():
        label, colour = KINDS[kind]
        used.add(kind)
        for y_pos in set(i[2] for i in items):
            ranges = [(x, w) for x, w, y in items if y == y_pos]
            if kind == "wait":
                ax.broken_barh(ranges, (y_pos + 0.28, 0.12), facecolors="white",
                               edgecolors=colour, hatch="////", linewidth=0.3)
            else:
                ax.broken_barh(ranges, (y_pos - 0.3, 0.55), facecolors=colour,
                               edgecolors="none")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(list(rows))
    ax.set_ylim(len(rows) - 0.5, -0.6)
    ax.set_xlim(0, xmax if xmax is not None else (hi - lo) / 1e3)
    ax.set_xlabel("time (ms)" + (f" from the start of run {run}" if run is not None else ""))
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    if title:
        ax.set_title(title, fontsize=10)
    handles = [Patch(facecolor=KINDS[k][1] if k != "wait" else "white",
                     edgecolor=KINDS[k][1] if k == "wait" else "none",
                     hatch="////" if k == "wait" else None, label=KINDS[k][0])
               for k in KINDS if k in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8,
              frameon=False)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", help="the Chrome trace JSON that sl-run --trace wrote")
    p.add_argument("out", help="the PNG to write")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--run", type=int, help="show only this run (training step), 0-based")
    g.add_argument("--window", type=float, nargs=2, metavar=("START_MS", "END_MS"),
                   help="show only this window, in ms from the trace's first span")
    p.add_argument("--title", help="a title for the picture")
    p.add_argument("--params", metavar="PREFIX",
                   help="h2d copies whose names start with PREFIX are parameter fetches "
                        "(default: names ending in .weight or .bias)")
    p.add_argument("--width", type=float, default=14.0, help="figure width in inches")
    p.add_argument("--xmax", type=float, metavar="MS",
                   help="length of the time axis in ms (default: the window's), to draw two "
                        "traces on one scale")
    args = p.parse_args(argv)
    try:
        plot_trace(args.trace, args.out, run=args.run,
                   window=tuple(args.window) if args.window else None, title=args.title,
                   param_prefix=args.params, width=args.width, xmax=args.xmax)
    except (TraceError, ValueError) as e:
        print(f"plot_trace: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
