"""Training end to end: sl-opt --sl-train, then sl-run --data --steps, against PyTorch.

The same model (exported without constant folding, so parameters keep their PyTorch names) is
trained for 5 AdamW steps on the same token file by both: every step's loss and the final
weights (read from sl-run's safetensors checkpoint) must agree. Also: 3 steps, save, resume, 2
steps equals 5 straight steps bit for bit.
"""

import json
import struct
import subprocess

import numpy as np
import pytest
import torch

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from speedloader.models.gpt2 import GPT2Config
from speedloader.models.llama import LlamaConfig

BATCH, SEQ, STEPS, LR, WD = 2, 8, 5, 1e-3, 0.01
CASES = [
    pytest.param("llama", LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64,
                                      max_positions=16), id="llama-gqa-untied"),
    pytest.param("gpt2", GPT2Config(layers=2, hidden=32, heads=4, vocab=64, max_positions=16,
                                    activation="gelu"), id="gpt2"),
]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        assert info["dtype"] == "F32"
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], dtype="<f4").reshape(
            info["shape"])
    return out


def torch_training(model, tokens, vocab, *, batch=BATCH, seq=SEQ, steps=STEPS, lr=LR, wd=WD):
    """torch.optim.AdamW on the batches sl-run --data reads: step t's B*S+1 tokens from t*B*S."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    losses = []
    n = len(tokens)
    for t in range(steps):
        start = t * batch * seq
        window = np.array([tokens[(start + i) % n] for i in range(batch * seq + 1)], dtype=np.int64)
        inputs = torch.from_numpy(window[:-1].reshape(batch, seq))
        labels = torch.from_numpy(window[1:].reshape(batch, seq))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs).reshape(-1, vocab), labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("arch,config", CASES)
def test_training_matches_pytorch(sl_tools, tmp_path, arch, config):
    res = export_model(arch, config, tmp_path / "model.onnx", seed=0, constant_folding=False,
                       batch=BATCH, seq=SEQ)
    sched = tmp_path / "train.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                            f"--sl-train=batch={BATCH} seq={SEQ}", "-o", sched]))
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, config.vocab, size=BATCH * SEQ * STEPS + 7, dtype=np.uint16)
    data = tmp_path / "tokens.bin"
    tokens.astype("<u2").tofile(data)

    def train(steps, *extra):
        proc = sl_tools._run([sl_tools.sl_run, sched, "--data", data, "--steps", steps,
                              "--lr", LR, "--weight-decay", WD, *extra])
        check_ok(proc)
        return proc

    report = tmp_path / "report.json"
    train(STEPS, "--report", report, "--save", tmp_path / "final.safetensors",
          "--export-onnx", tmp_path / "trained.onnx")
    with open(report) as f:
        losses = json.load(f)["train"]["losses"]
    want = torch_training(res.model, tokens, config.vocab)
    np.testing.assert_allclose(losses, want, rtol=1e-4)

    weights = read_safetensors(tmp_path / "final.safetensors")
    for name, param in res.model.named_parameters():
        got, expected = weights[name], param.detach().numpy()
        if name.endswith("attn.c_attn.bias"):
            # The key bias shifts every score of a query alike, which softmax ignores: its true
            # gradient is exactly zero, both sides see rounding noise (~1e-9), and AdamW turns
            # noise into steps of about lr in random directions. Only bound that slice.
            h = config.hidden
            np.testing.assert_array_less(np.abs(got[h:2 * h] - expected[h:2 * h]),
                                         2 * LR * STEPS + 1e-6)
            got = np.concatenate([got[:h], got[2 * h:]])
            expected = np.concatenate([expected[:h], expected[2 * h:]])
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6, err_msg=name)

    # --export-onnx: the same graph with the trained weights, which runs like PyTorch's trained
    # model.
    import onnx
    import onnx.numpy_helper
    trained = onnx.load(str(tmp_path / "trained.onnx"))
    assert len(trained.graph.node) == len(onnx.load(str(tmp_path / "model.onnx")).graph.node)
    for init in trained.graph.initializer:
        if init.name in weights:
            np.testing.assert_array_equal(onnx.numpy_helper.to_array(init), weights[init.name])
    ids = rng.integers(0, config.vocab, size=(BATCH, SEQ), dtype=np.int64)
    np.save(tmp_path / "ids.npy", ids)
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "trained.onnx",
                            f"--sl-infer=batch={BATCH} seq={SEQ}", "-o", tmp_path / "fwd.slsched"]))
    check_ok(sl_tools._run([sl_tools.sl_run, tmp_path / "fwd.slsched", "--input",
                            f"input_ids={tmp_path / 'ids.npy'}", "--output",
                            f"logits={tmp_path / 'logits.npy'}"]))
    with torch.no_grad():
        want_logits = res.model(torch.from_numpy(ids)).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), want_logits, rtol=1e-4,
                               atol=1e-4 * np.abs(want_logits).max())

    # Resume: 3 steps, save, 2 more from the checkpoint = the 5 straight steps, bit for bit.
    train(3, "--save", tmp_path / "three.safetensors")
    train(2, "--resume", tmp_path / "three.safetensors", "--save", tmp_path / "resumed.safetensors")
    resumed = read_safetensors(tmp_path / "resumed.safetensors")
    final = read_safetensors(tmp_path / "final.safetensors")
    for name in final:
        np.testing.assert_array_equal(resumed[name], final[name], err_msg=name)
