"""Tiny models compiled into schedules, for the GPU suite (bench/gpu/run-gpu-suite.sh).

The GPU machine has no MLIR, so sl-opt runs here: each model is exported by PyTorch, compiled by
sl-opt into train schedules (SpeedLoader and canonical mode, two sub-batches), inference schedules
(fused and unfused ops) and, for the small ones, a generation schedule (two sub-batches, prompts of
different lengths, PyTorch's greedy tokens kept to compare with), and written with its token file,
an input and prompts under OUT, with OUT/manifest.json saying what to run. compare_backends.py
runs every entry on the CPU and the CUDA backend there and compares. The models of BF16 are also
compiled with precision=bf16 (train, inference and generation): bf16 storage, f32 arithmetic in
the kernels, so the two backends agree to bf16 rounding (the entry's own tolerances), and their
greedy tokens must be equal to each other (not to PyTorch's f32 tokens).

    PYTHONPATH=python /usr/bin/python3 bench/gpu/make_models.py --sl-opt build/bin/sl-opt --out DIR
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from speedloader.export import export_model
from speedloader.models.gpt2 import GPT2Config
from speedloader.models.llama import LlamaConfig

# name: (arch, config, train batch, seq, sub-batches)
MODELS = {
    # GQA, RMSNorm, rotary, SwiGLU, untied head.
    "llama-gqa": ("llama", LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64,
                                       max_positions=16), 8, 8, 2),
    # LayerNorm, GELU, fused qkv, a tied head (its two gradients meet on the host).
    "gpt2-tied": ("gpt2", GPT2Config(layers=2, hidden=32, heads=4, vocab=64, max_positions=16,
                                     activation="gelu", tie_embeddings=True), 8, 8, 2),
    # Rows longer than one attention tile (160 keys > 128 threads), wider GEMMs.
    "llama-wide": ("llama", LlamaConfig(layers=2, hidden=256, heads=8, kv_heads=2, ffn=512,
                                        vocab=512, max_positions=256), 4, 160, 2),
    # Head dim 64: in bf16 its attention runs through cuDNN (cudnn_attention.cc), so 20 training
    # steps of cuDNN's fused attention and its gradient are compared with the CPU backend.
    "llama-d64": ("llama", LlamaConfig(layers=2, hidden=128, heads=2, kv_heads=1, ffn=256,
                                       vocab=256, max_positions=64), 4, 64, 2),
}
STEPS = 20
# Generation (the models whose positions allow it): prompts of these lengths, greedy.
GENERATE = {"llama-gqa", "gpt2-tied"}
PROMPT_LENGTHS = [3, 7, 1, 5, 2, 6, 4, 7]
MAX_PROMPT, NEW_TOKENS = 7, 5
# bf16 schedules of these models. Tolerances: a bf16 store rounds to 2^-8 relative, and the two
# backends sum in different orders, so a value can land on either side of a rounding boundary.
BF16 = {"llama-gqa", "gpt2-tied", "llama-d64"}
BF16_LOSS_RTOL, BF16_OUTPUT_RTOL = 2e-2, 2e-2
# A long context, inference only (f32, and bf16 through cuDNN at head dim 64): one sequence of
# LONG_SEQ tokens, whose causal mask sl-fuse-transformer reads row by row (never evaluated), so
# the attention kernels run with 16384 keys per row. The CPU backend takes about a second for it.
LONG = {"llama-long": LlamaConfig(layers=1, hidden=128, heads=2, kv_heads=1, ffn=256, vocab=256,
                                  max_positions=16384)}
LONG_SEQ = 16384


def run(cmd):
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout}{proc.stderr}")


def greedy(model, prompt):
    """PyTorch's greedy continuation of `prompt` by NEW_TOKENS tokens."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(torch.tensor([ids], dtype=torch.int64))
            ids.append(int(torch.argmax(logits[0, -1]).item()))
    return ids[len(prompt):]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sl-opt", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()

    entries = []
    for name, (arch, config, batch, seq, subbatches) in MODELS.items():
        d = args.out / name
        d.mkdir(parents=True, exist_ok=True)
        # Without constant folding: parameters keep their names, a tied weight stays one.
        exported = export_model(arch, config, d / "model.onnx", seed=0, constant_folding=False,
                                batch=2, seq=seq)
        rng = np.random.default_rng(7)
        rng.integers(0, config.vocab, size=batch * seq * STEPS + 1, dtype=np.uint16).astype(
            "<u2").tofile(d / "tokens.bin")
        np.save(d / "input_ids.npy", rng.integers(0, config.vocab, size=(2, seq), dtype=np.int64))
        for mode in ("speedloader", "canonical"):
            sched = f"train-{mode}.slsched"
            run([args.sl_opt, d / "model.onnx",
                 f"--sl-train=batch={batch} seq={seq} num-sub-batches={subbatches} "
                 f"live-blocks=1 mode={mode}", "-o", d / sched])
            entries.append({"name": f"{name}/train-{mode}", "kind": "train",
                            "schedule": f"{name}/{sched}", "data": f"{name}/tokens.bin",
                            "steps": STEPS, "vocab": config.vocab})
        for fuse in ("true", "false"):
            sched = f"infer-fuse-{fuse}.slsched"
            run([args.sl_opt, d / "model.onnx", f"--sl-infer=batch=2 seq={seq} fuse={fuse}", "-o",
                 d / sched])
            entries.append({"name": f"{name}/infer-fuse-{fuse}", "kind": "infer",
                            "schedule": f"{name}/{sched}", "input": f"{name}/input_ids.npy"})
        # Planned inference (@infer_step): weights fetched per group, logits joined on the host.
        sched = "infer-planned.slsched"
        run([args.sl_opt, d / "model.onnx", f"--sl-infer=batch=2 seq={seq} num-sub-batches=2",
             "-o", d / sched])
        entries.append({"name": f"{name}/infer-planned", "kind": "infer",
                        "schedule": f"{name}/{sched}", "input": f"{name}/input_ids.npy"})
        if name in BF16:
            sched = "train-speedloader-bf16.slsched"
            run([args.sl_opt, d / "model.onnx",
                 f"--sl-train=batch={batch} seq={seq} num-sub-batches={subbatches} "
                 f"live-blocks=1 mode=speedloader precision=bf16", "-o", d / sched])
            entries.append({"name": f"{name}/train-speedloader-bf16", "kind": "train",
                            "schedule": f"{name}/{sched}", "data": f"{name}/tokens.bin",
                            "steps": STEPS, "vocab": config.vocab, "loss_rtol": BF16_LOSS_RTOL})
            sched = "infer-bf16.slsched"
            run([args.sl_opt, d / "model.onnx", f"--sl-infer=batch=2 seq={seq} precision=bf16",
                 "-o", d / sched])
            entries.append({"name": f"{name}/infer-bf16", "kind": "infer",
                            "schedule": f"{name}/{sched}", "input": f"{name}/input_ids.npy",
                            "output_rtol": BF16_OUTPUT_RTOL})
        if name in GENERATE:
            prompts = [rng.integers(0, config.vocab, size=n).tolist() for n in PROMPT_LENGTHS]
            with open(d / "prompts.jsonl", "w") as f:
                for p in prompts:
                    f.write(json.dumps({"tokens": p}) + "\n")
            run([args.sl_opt, d / "model.onnx",
                 f"--sl-generate=batch=6 num-sub-batches=2 max-prompt-len={MAX_PROMPT} "
                 f"max-new-tokens={NEW_TOKENS}", "-o", d / "generate.slsched"])
            entries.append({"name": f"{name}/generate", "kind": "generate",
                            "schedule": f"{name}/generate.slsched",
                            "prompts": f"{name}/prompts.jsonl",
                            "expected": [greedy(exported.model, p) for p in prompts]})
            # Weights and KV caches kept on the device: KV_WRITE (from attention's [B, T, H, D]
            # order) runs on the GPU instead of the host.
            run([args.sl_opt, d / "model.onnx",
                 f"--sl-generate=batch=6 num-sub-batches=2 max-prompt-len={MAX_PROMPT} "
                 f"max-new-tokens={NEW_TOKENS} device-memory=1GB", "-o",
                 d / "generate-resident.slsched"])
            entries.append({"name": f"{name}/generate-resident", "kind": "generate",
                            "schedule": f"{name}/generate-resident.slsched",
                            "prompts": f"{name}/prompts.jsonl",
                            "expected": entries[-1]["expected"]})
            if name in BF16:
                run([args.sl_opt, d / "model.onnx",
                     f"--sl-generate=batch=6 num-sub-batches=2 max-prompt-len={MAX_PROMPT} "
                     f"max-new-tokens={NEW_TOKENS} precision=bf16", "-o", d / "generate-bf16.slsched"])
                entries.append({"name": f"{name}/generate-bf16", "kind": "generate",
                                "schedule": f"{name}/generate-bf16.slsched",
                                "prompts": f"{name}/prompts.jsonl"})
    for name, config in LONG.items():
        d = args.out / name
        d.mkdir(parents=True, exist_ok=True)
        export_model("llama", config, d / "model.onnx", seed=0, constant_folding=False, batch=1,
                     seq=8)
        rng = np.random.default_rng(11)
        np.save(d / "input_ids.npy",
                rng.integers(0, config.vocab, size=(1, LONG_SEQ), dtype=np.int64))
        for precision in ("f32", "bf16"):
            sched = f"infer-{precision}.slsched"
            run([args.sl_opt, d / "model.onnx",
                 f"--sl-infer=batch=1 seq={LONG_SEQ} precision={precision}", "-o", d / sched])
            entry = {"name": f"{name}/infer-{precision}", "kind": "infer",
                     "schedule": f"{name}/{sched}", "input": f"{name}/input_ids.npy"}
            if precision == "bf16":
                entry["output_rtol"] = BF16_OUTPUT_RTOL
            entries.append(entry)
    (args.out / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
    print(f"{len(entries)} schedules in {args.out}")


if __name__ == "__main__":
    main()
