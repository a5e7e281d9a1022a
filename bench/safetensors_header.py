"""Safetensors header parsing time against the number of tensors, through the real sl-run.

A checkpoint whose header lists N tensors (each an f32 [1], 4 bytes of data) is given to
`sl-run train.slsched --resume FILE`; sl-run parses and checks the whole header before it finds
that the file is no checkpoint of this model and stops. The time of that run is the parse (a run
of the same command on a one-tensor file, subtracted, is the rest: loading the schedule and the
model). Linear parsing keeps the time per tensor flat as N grows; the old parser (nlohmann's
callback parser) was quadratic: 40k tensors took 25 s.

    PYTHONPATH=python /usr/bin/python3 bench/safetensors_header.py --counts 10000 100000 1000000 \\
        --record bench/results/safetensors-header.md
"""

import argparse
import datetime
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent


def tiny_model(path):
    """An embedding, a linear layer and a head, built with onnx.helper."""
    vocab, hidden = 8, 4
    rng = np.random.default_rng(0)
    weights = {"embed": rng.standard_normal((vocab, hidden)).astype(np.float32),
               "layers.0.w": rng.standard_normal((hidden, hidden)).astype(np.float32),
               "head": rng.standard_normal((hidden, vocab)).astype(np.float32)}
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["h0"], name="/embed/Gather"),
             helper.make_node("MatMul", ["h0", "layers.0.w"], ["h1"], name="/layers.0/MatMul"),
             helper.make_node("MatMul", ["h1", "head"], ["logits"], name="/head/MatMul")]
    graph = helper.make_graph(
        nodes, "lm",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])],
        [numpy_helper.from_array(w, name) for name, w in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


def header_file(path, count):
    """A safetensors file of `count` f32 [1] tensors, written without building the JSON in
    Python objects (a million dicts would dominate the script's own time)."""
    parts = ['{"__metadata__":{"format":"bench"}']
    for i in range(count):
        parts.append(f',"t{i}":{{"dtype":"F32","shape":[1],"data_offsets":[{4 * i},{4 * i + 4}]}}')
    parts.append("}")
    text = "".join(parts).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(bytes(4 * count))
    return len(text)


def timed(cmd, repeat):
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, proc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--counts", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--repeat", type=int, default=3, help="runs per count; the fastest counts")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--record", help="also write the table as Markdown to this file")
    args = p.parse_args()

    sl_opt, sl_run = Path(args.build) / "bin" / "sl-opt", Path(args.build) / "bin" / "sl-run"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tiny_model(tmp / "lm.onnx")
        subprocess.run([sl_opt, tmp / "lm.onnx", "--sl-train=batch=2 seq=3", "-o",
                        tmp / "train.slsched"], check=True)
        (np.arange(100) % 8).astype("<u2").tofile(tmp / "tokens.bin")

        def resume(path):
            return [sl_run, tmp / "train.slsched", "--data", tmp / "tokens.bin", "--steps", "1",
                    "--resume", path]

        header_file(tmp / "one.safetensors", 1)
        base, _ = timed(resume(tmp / "one.safetensors"), args.repeat)
        for count in args.counts:
            path = tmp / f"h{count}.safetensors"
            header_bytes = header_file(path, count)
            seconds, proc = timed(resume(path), args.repeat)
            # The run must have parsed the whole header and stopped after it, at the model check.
            assert proc.returncode == 1 and "header" not in proc.stderr, proc.stderr
            rows.append({"tensors": count, "header_bytes": header_bytes, "run_s": seconds,
                         "parse_s": seconds - base,
                         "us_per_tensor": (seconds - base) / count * 1e6,
                         "message": proc.stderr.strip()[:160]})
            print(f"{count:>9} tensors, {header_bytes / 1e6:7.1f} MB header: {seconds:7.3f} s "
                  f"({(seconds - base) / count * 1e6:.2f} us a tensor)", flush=True)
            path.unlink()

    if args.record:
        command = " ".join([f"PYTHONPATH=python {sys.executable}", *sys.argv])
        lines = [
            "# Safetensors header parsing time", "",
            f"{datetime.date.today()}, {platform.node()}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs; `sl-run --resume` of a file of N f32 [1] tensors, fastest of "
            f"{args.repeat} runs; a one-tensor run ({base:.3f} s: schedule and model) subtracted "
            "for the parse.", "",
            "```sh", command, "```", "",
            "| tensors | header | sl-run | parse | per tensor |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            lines.append(f"| {r['tensors']:,} | {r['header_bytes'] / 1e6:.1f} MB | "
                         f"{r['run_s']:.3f} s | {r['parse_s']:.3f} s | {r['us_per_tensor']:.2f} us |")
        lines += ["", "sl-run's message (every run stops after the parse, at the model check):", "",
                  f"    {rows[-1]['message']}" if rows else "", ""]
        Path(args.record).write_text("\n".join(lines))
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
