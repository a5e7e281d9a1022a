"""The CUDA backend against the CPU backend end to end: one tiny LLaMA (GQA) compiled by sl-opt
--sl-train in both schedule modes with two sub-batches, trained by sl-run on the same tokens with
--backend cpu and --backend cuda; every step's loss and the final weights must agree.

Skips where sl-run has no GPU to run on (or no CUDA backend). The GPU machines that verify the
backend have no sl-opt; bench/gpu/run-gpu-suite.sh runs the same comparison there on schedules
compiled beforehand (docs/cuda.md).
"""

import json
import os
import subprocess

import numpy as np
import pytest

from sl_helpers import check_ok
from speedloader.export import export_model
from speedloader.models.llama import LlamaConfig
from test_e2e_training import read_safetensors

BATCH, SEQ, STEPS, LR = 8, 8, 5, 1e-3
CONFIG = LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64, max_positions=16)


@pytest.fixture(scope="module")
def gpu():
    """Skips unless `sl-run --backend cuda` can start (it makes the backend before reading the
    schedule, so a missing schedule tells the two cases apart)."""
    sl_run = os.environ.get("SL_RUN")
    if not sl_run:
        pytest.skip("SL_RUN is not set")
    proc = subprocess.run([sl_run, "/nonexistent.slsched", "--backend", "cuda"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if "found no" in proc.stdout or "no CUDA backend" in proc.stdout:
        pytest.skip(proc.stdout.strip())


@pytest.mark.parametrize("mode", ["speedloader", "canonical"])
def test_training_on_the_gpu_tracks_the_cpu(gpu, sl_tools, tmp_path, mode):
    export_model("llama", CONFIG, tmp_path / "model.onnx", seed=0, constant_folding=False,
                 batch=2, seq=SEQ)
    rng = np.random.default_rng(4)
    rng.integers(0, CONFIG.vocab, size=BATCH * SEQ * STEPS + 1, dtype=np.uint16).astype(
        "<u2").tofile(tmp_path / "tokens.bin")
    sched = tmp_path / "train.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                            f"--sl-train=batch={BATCH} seq={SEQ} num-sub-batches=2 "
                            f"live-blocks=1 mode={mode}", "-o", sched]))
    results = {}
    for backend in ("cpu", "cuda"):
        report, ckpt = tmp_path / f"{backend}.json", tmp_path / f"{backend}.safetensors"
        check_ok(sl_tools._run([sl_tools.sl_run, sched, "--backend", backend, "--data",
                                tmp_path / "tokens.bin", "--steps", STEPS, "--lr", LR,
                                "--report", report, "--save", ckpt]))
        with open(report) as f:
            results[backend] = (json.load(f)["train"]["losses"], read_safetensors(ckpt))
    (want_losses, want), (losses, got) = results["cpu"], results["cuda"]
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4)
    for name in want:
        # AdamW moves a weight by about lr whatever its gradient's size (see test_e2e_training.py).
        np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=LR * 2e-2, err_msg=name)
