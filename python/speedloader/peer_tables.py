"""The peer comparison's tables and plot, from the JSON lines the drivers in bench/peers/ print
(one object per run; bench/peers/common.py says which fields each has).

Two tables, one per task, each row one run, grouped by model shape:
  training    tokens/s, median step seconds, MFU (model FLOPs per token, recomputation not
              counted, times tokens/s, over the GPU's peak: 989.4 TFLOP/s dense bf16 for an
              H100 or H200 SXM, else the machine line's measured GEMM rate, or --peak-tflops),
              peak device and host memory, and ours/peer: SpeedLoader's best tokens/s on that
              shape over the row's
  generation  prefill and decode tokens/s, bytes to the device per decoding step, the link
              bound on decode tokens/s (batch over those bytes at the measured pinned
              host-to-device rate) and the fraction of it reached, peak memories, ours/peer
              (SpeedLoader's best decode tokens/s on the same shape over the row's)
then each peer's best against ours with the issue's targets (training >= 3x DeepSpeed and FSDP,
generation >= 5x accelerate and >= 2.35x FlexGen), and the runs that failed or were skipped.
The plot: throughput against sub-batch count (gradient-accumulation steps for the training
peers, FlexGen's GPU batches), one line per system, training and generation side by side
(matplotlib; without it the tables are written and the plot is skipped with a message).

    python3 -m speedloader.peer_tables RESULTS.jsonl... [--out tables.md] [--plot plot.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

RESULT_PREFIX = "RESULT "
# Dense bf16 tensor-core peak of the SXM parts (NVIDIA's datasheets: 989.4 TFLOP/s without
# sparsity for both the H100 SXM and the H200).
NOMINAL_PEAK_TFLOPS = {"H100": 989.4, "H200": 989.4}
OURS = "speedloader"
TARGETS = {("train", "deepspeed"): 3.0, ("train", "fsdp"): 3.0,
           ("generate", "accelerate"): 5.0, ("generate", "flexgen"): 2.35}


def read(paths: List[str]) -> List[Dict[str, Any]]:
    """Every result object of the files: JSON Lines, or logs whose result lines start with
    'RESULT '. A line that is neither is ignored; a broken JSON line is an error naming it."""
    out = []
    for p in paths:
        try:
            text = Path(p).read_text()
        except OSError as e:
            raise SystemExit(f"cannot read {p}: {e.strerror}") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if line.startswith(RESULT_PREFIX):
                line = line[len(RESULT_PREFIX):]
            elif not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{p}:{n}: not a JSON object: {e}") from None
            for key in ("system", "task", "status"):
                if key not in r:
                    raise SystemExit(f"{p}:{n}: a result line without {key!r}")
            out.append(r)
    if not out:
        raise SystemExit(f"no result lines in {', '.join(paths)}")
    return out


def _gb(v) -> str:
    return f"{v / 1e9:.2f}" if isinstance(v, (int, float)) and v == v else "n/a"


def _num(v, digits=3) -> str:
    return f"{v:.{digits}g}" if isinstance(v, (int, float)) and v == v else "n/a"


def _ratio(a, b) -> Optional[float]:
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 \
        else None


def shape_key(r) -> str:
    m = r.get("model") or {}
    return f"{m.get('name', '?')}, {m.get('layers', '?')} layers"


def peak_tflops(results, override: Optional[float]) -> Tuple[Optional[float], str]:
    if override:
        return override, f"{override:g} TFLOP/s (--peak-tflops)"
    machine = next((r for r in results if r["system"] == "machine" and r["status"] == "ok"),
                   None)
    device = (machine or {}).get("device") or next(
        (r.get("device", "") for r in results if r["status"] == "ok"), "")
    for name, peak in NOMINAL_PEAK_TFLOPS.items():
        if name in device:
            return peak, f"{peak} TFLOP/s, the {name}'s dense bf16 peak"
    if machine and machine.get("gemm_bf16_tflops"):
        g = machine["gemm_bf16_tflops"]
        return g, f"{g:.0f} TFLOP/s, the bf16 GEMM rate measured on this machine"
    return None, "no peak known (give --peak-tflops): MFU not computed"


def link_gbps(results, override: Optional[float]) -> Tuple[Optional[float], str]:
    if override:
        return override, f"{override:g} GB/s (--link-gbps)"
    machine = next((r for r in results if r["system"] == "machine" and r["status"] == "ok"),
                   None)
    if machine and machine.get("h2d_pinned_gbps"):
        g = machine["h2d_pinned_gbps"]
        return g, f"{g:.1f} GB/s, pinned host-to-device, measured (bench/peers/link.py)"
    return None, "no link rate known (run link.py or give --link-gbps): link bound not computed"


def describe(r) -> str:
    """The settings that tell a system's runs apart."""
    c = r.get("config") or {}
    n = r.get("sub_batches") or c.get("sub_batches") or (c.get("policy") or {}).get(
        "num_gpu_batches", "?")
    parts = [f"N={n}"]
    if r["task"] == "train" and "micro_batch" in r:
        parts.append(f"micro {r['micro_batch']}")
    z = (c.get("ds_config") or {}).get("zero_optimization")
    if z:
        parts.append(f"live {z.get('stage3_max_live_parameters', 0):.0e}, prefetch "
                     f"{z.get('stage3_prefetch_bucket_size', 0):.0e}".replace("e+0", "e"))
    if r["system"] == "flexgen" and r.get("policy"):
        p = r["policy"]
        parts.append(f"gbs {p['gpu_batch_size']}, % {' '.join(map(str, p['percent']))}")
    if r["task"] == "generate" and r["system"] == OURS and "weights_on_device" in r:
        parts.append(f"weights on device {r.get('weights_on_device')}, KV on device "
                     f"{r.get('kv_cache_on_device')}")
    return "; ".join(parts)


def best_of(rows, system, key) -> Optional[Dict[str, Any]]:
    rs = [r for r in rows if r["system"] == system and isinstance(r.get(key), (int, float))]
    return max(rs, key=lambda r: r[key]) if rs else None


def training_table(results, peak, peak_note) -> List[str]:
    ok = [r for r in results if r["task"] == "train" and r["status"] == "ok"]
    if not ok:
        return ["No training results."]
    cols = ["system", "settings", "tokens/step", "step s (median)", "tokens/s", "MFU",
            "peak device GB", "peak host GB (RSS)", "ours/peer"]
    lines = [f"MFU: model FLOPs per token (6 x GEMM parameters + 12 x layers x hidden x seq; "
             f"recomputation not counted) x tokens/s over {peak_note}. Peak device: "
             f"torch.cuda.max_memory_allocated for the peers, sl-run's arena peak for ours "
             f"(its CUDA context and library workspaces are outside the arena)."]
    groups = defaultdict(list)
    for r in ok:
        groups[(shape_key(r), r.get("seq"), r.get("tokens_per_step"))].append(r)
    for (shape, seq, tokens), rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        ours = best_of(rows, OURS, "tokens_per_second")
        lines += ["", f"### {shape}, seq {seq}, {tokens} tokens per optimizer step", "",
                  "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
        for r in sorted(rows, key=lambda r: (r["system"], r.get("sub_batches", 0),
                                              describe(r))):
            mfu = (r["model_flops_per_token"] * r["tokens_per_second"] / (peak * 1e12)
                   if peak and r.get("model_flops_per_token") else None)
            ratio = _ratio(ours["tokens_per_second"], r["tokens_per_second"]) if ours else None
            best = best_of(rows, r["system"], "tokens_per_second") is r
            cells = [r["system"] + (" (best)" if best and r["system"] != OURS else ""),
                     describe(r), r.get("tokens_per_step"),
                     _num(r.get("step_seconds_median")), _num(r["tokens_per_second"], 4),
                     f"{mfu:.1%}" if mfu is not None else "n/a",
                     _gb(r.get("device_peak_bytes")), _gb(r.get("host_peak_rss_bytes")),
                     f"{ratio:.2f}x" if ratio else "n/a"]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    return lines


def generation_table(results, link, link_note) -> List[str]:
    ok = [r for r in results if r["task"] == "generate" and r["status"] == "ok"]
    if not ok:
        return ["No generation results."]
    cols = ["system", "settings", "batch", "prefill tok/s", "decode tok/s",
            "GB to device per decode step", "link bound decode tok/s", "of link bound",
            "peak device GB", "peak host GB (RSS)", "ours/peer"]
    lines = [f"Link bound: batch x link rate / bytes to the device per decoding step, at "
             f"{link_note}. Bytes per step: sl-run's count for ours, the offloaded weights "
             f"for accelerate, FlexGen's from its policy (an estimate). Prompts: the same "
             f"random token ids for every system; greedy."]
    groups = defaultdict(list)
    for r in ok:
        groups[(shape_key(r), r.get("prompt_len"), r.get("new_tokens"))].append(r)
    for (shape, prompt, new), rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        ours = best_of(rows, OURS, "decode_tokens_per_second")
        lines += ["", f"### {shape}, prompt {prompt}, {new} new tokens", "",
                  "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
        for r in sorted(rows, key=lambda r: (r["system"], r.get("sub_batches", 0),
                                              describe(r))):
            per_step = r.get("bytes_to_device_per_decode_step")
            bound = (r["batch"] * link * 1e9 / per_step
                     if link and isinstance(per_step, (int, float)) and per_step > 0 else None)
            rate = r["decode_tokens_per_second"]
            ratio = _ratio(ours["decode_tokens_per_second"], rate) if ours else None
            cells = [r["system"], describe(r), r["batch"],
                     _num(r.get("prefill_tokens_per_second"), 4), _num(rate, 4),
                     _gb(per_step), _num(bound, 4),
                     f"{rate / bound:.0%}" if bound else "n/a",
                     _gb(r.get("device_peak_bytes")), _gb(r.get("host_peak_rss_bytes")),
                     f"{ratio:.2f}x" if ratio else "n/a"]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    return lines


def against_targets(results) -> List[str]:
    lines = []
    for (task, peer), target in TARGETS.items():
        key = "tokens_per_second" if task == "train" else "decode_tokens_per_second"
        rows = [r for r in results if r["task"] == task and r["status"] == "ok"]
        shapes = sorted({shape_key(r) for r in rows if r["system"] == peer})
        if not shapes:
            lines.append(f"- {task}, {peer}: no result")
            continue
        for shape in shapes:
            same = [r for r in rows if shape_key(r) == shape]
            ours, theirs = best_of(same, OURS, key), best_of(same, peer, key)
            if not ours:
                lines.append(f"- {task}, {shape}: {peer} ran, SpeedLoader did not")
                continue
            ratio = ours[key] / theirs[key]
            verdict = ("met" if ratio >= target else
                       f"missed by {target / ratio:.2f}x (ours would need "
                       f"{target * theirs[key]:.4g})")
            lines.append(f"- {task}, {shape}: SpeedLoader's best {ours[key]:.4g} "
                         f"({describe(ours)}) / {peer}'s best {theirs[key]:.4g} "
                         f"({describe(theirs)}) = "
                         f"**{ratio:.2f}x**; target {target}x: {verdict}")
    return lines


def failures(results) -> List[str]:
    out = []
    for r in results:
        if r["status"] != "ok":
            why = r.get("error") or r.get("reason") or "?"
            what = shape_key(r) if r.get("model") else r.get("run", "")
            settings = f" ({describe(r)})" if r.get("config") else ""
            out.append(f"- {r['system']} {r['task']} {what}{settings}: {r['status']}: {why}")
    return out


def tables(results, peak_override=None, link_override=None) -> str:
    peak, peak_note = peak_tflops(results, peak_override)
    link, link_note = link_gbps(results, link_override)
    machine = next((r for r in results if r["system"] == "machine" and r["status"] == "ok"),
                   None)
    any_ok = next((r for r in results if r["status"] == "ok"), results[0])
    lines = ["# SpeedLoader and its peers on one GPU", ""]
    lines.append(f"- device: {any_ok.get('device', '?')}; host {any_ok.get('host', '?')}; "
                 f"date {any_ok.get('date', '?')}")
    if machine:
        lines.append(f"- machine: {machine.get('nvidia_smi', '')}; pinned H2D "
                     f"{machine['h2d_pinned_gbps']:.1f} GB/s, D2H {machine['d2h_pinned_gbps']:.1f}"
                     f" GB/s, pageable H2D {machine['h2d_pageable_gbps']:.1f} GB/s; bf16 GEMM "
                     f"{machine['gemm_bf16_tflops']:.0f} TFLOP/s")
    versions = {}
    for r in results:
        for k, v in (r.get("versions") or {}).items():
            versions.setdefault(k, set()).add(str(v))
    lines.append("- versions: " + ", ".join(f"{k} {'/'.join(sorted(v))}"
                                            for k, v in sorted(versions.items())))
    lines += ["", "## Training", ""] + training_table(results, peak, peak_note)
    lines += ["", "## Generation", ""] + generation_table(results, link, link_note)
    lines += ["", "## Against the targets", ""] + against_targets(results)
    f = failures(results)
    if f:
        lines += ["", "## Runs that did not produce a figure", ""] + f
    lines += ["", "## Commands", "", "```"]
    seen = set()
    for r in results:
        for cmd in (r.get("command"), r.get("sl_run_command")):
            if cmd and cmd not in seen:
                seen.add(cmd)
                lines.append(cmd)
    lines += ["```", ""]
    return "\n".join(lines)


def series(results) -> Dict[str, Dict[str, List[Tuple[int, float]]]]:
    """task -> label -> [(sub-batches, best throughput at that count)], sorted by count."""
    best: Dict[Tuple[str, str, int], float] = {}
    for r in results:
        if r["status"] != "ok" or r["task"] not in ("train", "generate"):
            continue
        key = "tokens_per_second" if r["task"] == "train" else "decode_tokens_per_second"
        label = f"{r['system']} ({shape_key(r)})"
        k = (r["task"], label, int(r.get("sub_batches") or 1))
        best[k] = max(best.get(k, 0.0), float(r[key]))
    out: Dict[str, Dict[str, List[Tuple[int, float]]]] = defaultdict(dict)
    for (task, label, n), v in sorted(best.items()):
        out[task].setdefault(label, []).append((n, v))
    return out


def plot(results, path: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError as e:
        return f"plot skipped: matplotlib is not importable ({e})"
    data = series(results)
    if not data:
        return "plot skipped: no ok training or generation results"
    tasks = [t for t in ("train", "generate") if t in data]
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 4.5), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for label, pts in sorted(data[task].items()):
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=label,
                    linewidth=2.5 if label.startswith(OURS + " ") else 1.2)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_ylim(bottom=0)
        ax.set_xlabel("sub-batches (gradient-accumulation steps; FlexGen: GPU batches)")
        ax.set_ylabel("tokens/s" if task == "train" else "decode tokens/s")
        ax.set_title("training" if task == "train" else "generation")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"wrote {path}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="JSON Lines files or logs with RESULT lines")
    ap.add_argument("--out", help="write the tables (Markdown) here too")
    ap.add_argument("--plot", help="write the plot (PNG) here")
    ap.add_argument("--peak-tflops", type=float, help="the MFU denominator (default: by GPU)")
    ap.add_argument("--link-gbps", type=float,
                    help="the link bound's rate (default: the machine line's pinned H2D)")
    args = ap.parse_args(argv)
    results = read(args.files)
    text = tables(results, args.peak_tflops, args.link_gbps)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.plot:
        print(plot(results, args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
