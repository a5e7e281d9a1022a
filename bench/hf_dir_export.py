"""Peak memory of `speedloader.export --hf DIR` on a 7B-shaped save_pretrained directory.

    # a llama2-7b-shaped directory: config.json and random bf16 weights in safetensors shards,
    # written one tensor at a time (the model never exists in memory)
    /work/hf-venv/bin/python bench/hf_dir_export.py make --out /tmp/b/llama2-7b [--layers 32]
    # /usr/bin/time -v of `--hf DIR` and of `--hf DIR --weightless`; a markdown table on stdout
    /work/hf-venv/bin/python bench/hf_dir_export.py run --dir /tmp/b/llama2-7b --out /tmp/b/onnx

Needs transformers (the venv scripts/install-deps.sh makes) for config.json, and about 13.5 GB
(bf16 shards) + 27 GB (the float32 ONNX external data) of disk at 32 layers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARD_BYTES = 2 * 1000**3


def llama_tensors(layers, hidden, ffn, vocab, kv_heads, heads):
    kv = hidden // heads * kv_heads
    yield "model.embed_tokens.weight", (vocab, hidden)
    for i in range(layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (hidden,)
        yield p + "self_attn.q_proj.weight", (hidden, hidden)
        yield p + "self_attn.k_proj.weight", (kv, hidden)
        yield p + "self_attn.v_proj.weight", (kv, hidden)
        yield p + "self_attn.o_proj.weight", (hidden, hidden)
        yield p + "post_attention_layernorm.weight", (hidden,)
        yield p + "mlp.gate_proj.weight", (ffn, hidden)
        yield p + "mlp.up_proj.weight", (ffn, hidden)
        yield p + "mlp.down_proj.weight", (hidden, ffn)
    yield "model.norm.weight", (hidden,)
    yield "lm_head.weight", (vocab, hidden)


def write_shard(path: Path, tensors, rng) -> None:
    """One safetensors file of random bf16 tensors, each drawn and written alone."""
    header, offset = {}, 0
    for name, shape in tensors:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, shape in tensors:
            if name.endswith("norm.weight"):
                x = np.ones(shape, dtype=np.float32)
            else:
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())


def make(args) -> int:
    import transformers

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008,
                                   num_hidden_layers=args.layers, num_attention_heads=32,
                                   num_key_value_heads=32, vocab_size=32000,
                                   max_position_embeddings=4096, rms_norm_eps=1e-5,
                                   torch_dtype="bfloat16", tie_word_embeddings=False)
    cfg.save_pretrained(out)
    rng = np.random.default_rng(0)
    shards, cur, size = [], [], 0
    for name, shape in llama_tensors(args.layers, 4096, 11008, 32000, 32, 32):
        n = int(np.prod(shape)) * 2
        if cur and size + n > SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += n
    shards.append(cur)
    weight_map, total = {}, 0
    t0 = time.time()
    for i, tensors in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(out / fname, tensors, rng)
        for name, shape in tensors:
            weight_map[name] = fname
            total += int(np.prod(shape)) * 2
        print(f"wrote {fname} ({time.time() - t0:.0f} s)", flush=True)
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    print(f"{out}: {len(weight_map)} tensors, {total / 1e9:.2f} GB of bf16 in {len(shards)} shards")
    return 0


def timed(cmd, env):
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    return rss * 1024, wall, p.stdout.strip().splitlines()


def run(args) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = Path(args.out)
    rows = []
    for weightless in (False, True):
        onnx = out / ("weightless" if weightless else "weights") / "model.onnx"
        cmd = [sys.executable, "-m", "speedloader.export", "--hf", str(args.dir), "--out",
               str(onnx)] + (["--weightless"] if weightless else [])
        rss, wall, lines = timed(cmd, env)
        data = Path(str(onnx) + ".data")
        blocks = os.stat(data).st_blocks * 512
        rows.append((" ".join(["python3"] + cmd[1:]), rss, wall, data.stat().st_size, blocks,
                     lines[-1]))
        print(f"{'weightless' if weightless else 'weights'}: peak RSS {rss / 1e9:.2f} GB, "
              f"{wall:.0f} s, data {data.stat().st_size / 1e9:.2f} GB ({blocks / 1e9:.2f} GB on "
              f"disk)", flush=True)
        if args.remove_data:
            data.unlink()
    print("\n| command | peak RSS | wall | data file (on disk) |\n|---|---|---|---|")
    for cmd, rss, wall, size, blocks, _ in rows:
        print(f"| `{cmd}` | {rss / 1e9:.2f} GB ({rss // 1024} kB) | {wall:.0f} s | "
              f"{size / 1e9:.2f} GB ({blocks / 1e9:.2f} GB) |")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a llama2-7b-shaped directory of random bf16 weights")
    m.add_argument("--out", required=True)
    m.add_argument("--layers", type=int, default=32)
    r = sub.add_parser("run", help="measure --hf and --hf --weightless with /usr/bin/time -v")
    r.add_argument("--dir", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--remove-data", action="store_true",
                   help="delete each export's data file once measured")
    args = p.parse_args()
    return make(args) if args.cmd == "make" else run(args)


if __name__ == "__main__":
    sys.exit(main())
