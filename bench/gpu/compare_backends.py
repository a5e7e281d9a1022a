"""Runs every schedule of a models directory (make_models.py) on two backends and compares them.

Train schedules: each step's loss of a --steps run (from sl-run's --report) must agree within
--loss-rtol relative (or the entry's own "loss_rtol", which bf16 schedules carry). Inference
schedules: the outputs must agree within --output-rtol (or the entry's "output_rtol"), by
||a - b|| / ||b||. Generation schedules: greedy tokens must be equal on both, and equal to
PyTorch's where the manifest has them. Prints a table (last, so that a truncated log still ends with it) and writes
every number to --out as JSON. Exit status 1 when anything disagrees or fails to run.
--only runs the named entries alone; --candidate-env KEY=VALUE sets a variable for the candidate's
runs only (SLRT_CUDA_SYNC=1: the CUDA backend waiting for every kernel, as it did before it ran
asynchronously).

    python3 bench/gpu/compare_backends.py --sl-run bin/sl-run --models models --out e2e.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def sl_run(sl_run_path, args, timeout, env=None):
    """Runs sl-run; one that outlasts `timeout` is killed and reported, and the others still run."""
    try:
        proc = subprocess.run([str(sl_run_path)] + [str(a) for a in args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\nsl-run ran past {timeout} s and was killed"
    return proc.returncode, proc.stdout


def run_entry(entry, backend, models, sl_run_path, tmp, timeout, env=None):
    """Returns (result, error): result the losses (train) or the output array (infer)."""
    report = tmp / f"{backend}-report.json"
    args = [models / entry["schedule"], "--backend", backend, "--report", report]
    if entry["kind"] == "train":
        args += ["--data", models / entry["data"], "--steps", entry["steps"], "--vocab",
                 entry["vocab"], "--lr", "1e-3"]
    elif entry["kind"] == "generate":
        out = tmp / f"{backend}-tokens.jsonl"
        args += ["--prompts", models / entry["prompts"], "--output", out, "--temperature", "0"]
    else:
        out = tmp / f"{backend}-logits.npy"
        args += ["--input", models / entry["input"], "--output", f"logits={out}"]
    code, text = sl_run(sl_run_path, args, timeout, env)
    if code != 0:
        return None, None, text[-2000:]
    with open(report) as f:
        rep = json.load(f)
    if entry["kind"] == "train":
        result = rep["train"]["losses"]
    elif entry["kind"] == "generate":
        with open(out) as f:
            result = [json.loads(line)["tokens"] for line in f if line.strip()]
    else:
        result = np.load(out)
    return result, rep.get("wall_seconds"), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sl-run", required=True, type=Path)
    parser.add_argument("--models", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--backends", default="cpu,cuda",
                        help="reference,candidate (default cpu,cuda)")
    parser.add_argument("--loss-rtol", type=float, default=1e-3)
    parser.add_argument("--output-rtol", type=float, default=1e-4)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--only", default="",
                        help="comma-separated manifest names to run (default: every entry)")
    parser.add_argument("--candidate-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the candidate backend's runs")
    args = parser.parse_args()
    reference, candidate = args.backends.split(",")
    entries = json.loads((args.models / "manifest.json").read_text())
    if args.only:
        wanted = args.only.split(",")
        missing = sorted(set(wanted) - {e["name"] for e in entries})
        if missing:
            parser.error(f"--only names entries the manifest lacks: {', '.join(missing)}")
        entries = [e for e in entries if e["name"] in wanted]
    candidate_env = {}
    for item in args.candidate_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--candidate-env takes KEY=VALUE, got '{item}'")
        candidate_env[key] = value

    rows, ok = [], True
    for entry in entries:
        row = {"name": entry["name"], "kind": entry["kind"]}
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            want, want_wall, want_error = run_entry(entry, reference, args.models, args.sl_run,
                                                    tmp, args.timeout)
            got, got_wall, got_error = run_entry(entry, candidate, args.models, args.sl_run, tmp,
                                                 args.timeout, candidate_env)
        row["wall_seconds"] = {reference: want_wall, candidate: got_wall}
        if want_error or got_error:
            row["error"] = {reference: want_error, candidate: got_error}
            row["pass"] = False
        elif entry["kind"] == "train":
            want, got = np.array(want, dtype=np.float64), np.array(got, dtype=np.float64)
            rel = np.abs(got - want) / np.abs(want)
            row["losses"] = {reference: want.tolist(), candidate: got.tolist()}
            row["max_rel_diff"] = float(np.max(rel)) if rel.size else 0.0
            row["tolerance"] = entry.get("loss_rtol", args.loss_rtol)
            row["pass"] = bool(want.size == entry["steps"] and got.size == want.size and
                               np.all(np.isfinite(got)) and row["max_rel_diff"] <= row["tolerance"])
        elif entry["kind"] == "generate":
            row["tokens"] = {reference: want, candidate: got}
            mismatched = sum(a != b for a, b in zip(got, want)) + abs(len(got) - len(want))
            expected = entry.get("expected")
            off_torch = sum(a != b for a, b in zip(got, expected)) if expected else 0
            # Reported in the table's difference column: sequences that differ.
            row["rel_error"] = float(mismatched + off_torch)
            row["pass"] = mismatched == 0 and off_torch == 0
        else:
            want, got = want.astype(np.float64), got.astype(np.float64)
            rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
            row["rel_error"] = rel
            row["max_abs_diff"] = float(np.max(np.abs(got - want)))
            row["tolerance"] = entry.get("output_rtol", args.output_rtol)
            row["pass"] = bool(np.all(np.isfinite(got)) and rel <= row["tolerance"])
        ok = ok and row["pass"]
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("losses", "tokens")}),
              flush=True)

    args.out.write_text(json.dumps({"reference": reference, "candidate": candidate,
                                    "candidate_env": candidate_env,
                                    "loss_rtol": args.loss_rtol, "output_rtol": args.output_rtol,
                                    "runs": rows}, indent=1) + "\n")
    print(f"\n{'schedule':36} {'kind':8} {'difference':>12}  result")
    for row in rows:
        diff = row.get("max_rel_diff", row.get("rel_error"))
        text = "error" if diff is None else f"{diff:12.3e}"
        print(f"{row['name']:36} {row['kind']:8} {text:>12}  {'pass' if row['pass'] else 'FAIL'}")
    first = next((r for r in rows if r["kind"] == "train" and "losses" in r), None)
    if first:
        print(f"\nlosses of {first['name']} ({reference} / {candidate}):")
        for step, (a, b) in enumerate(zip(first["losses"][reference],
                                          first["losses"][candidate]), 1):
            print(f"  step {step:2}  {a:.6f}  {b:.6f}")
    print("\nALL PASS" if ok else "\nSOME FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
