"""End to end: PyTorch decoders (llama, gpt2, opt) -> torch.onnx.export -> sl-opt -> sl-run (CPU),
logits compared with PyTorch's.

Each case is compiled twice, with the transformer fusions (`--sl-infer="batch=B seq=S"`) and
without (`--sl-infer="batch=B seq=S fuse=false"`), so that a wrong fused kernel and a wrong
unfused lowering are told apart. Needs SL_OPT and SL_RUN (ctest sets them); skips otherwise.
What the exports contain is described in python/speedloader/models/EXPORTS.md.
"""

import json

import numpy as np
import pytest

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from speedloader.models.gpt2 import GPT2Config, OPTConfig
from speedloader.models.llama import LlamaConfig

SEED = 0
RTOL, ATOL = 1e-4, 1e-5

_LLAMA = dict(layers=2, hidden=64, heads=4, ffn=96, vocab=256, max_positions=32)
_GPT = dict(layers=2, hidden=32, heads=4, vocab=128, max_positions=32)

# (id, arch, config, constant folding, batch, seq). Batch and seq differ between cases (and seq
# from the exporter's default of 8), so a schedule bound to the wrong sizes cannot pass.
_CASES = [
    ("llama-mha-half-untied", "llama", LlamaConfig(**_LLAMA), True, 2, 7),
    ("llama-mha-interleaved-tied", "llama",
     LlamaConfig(rope="interleaved", tie_embeddings=True, **_LLAMA), True, 1, 16),
    ("llama-gqa-half-tied", "llama", LlamaConfig(kv_heads=2, tie_embeddings=True, **_LLAMA),
     True, 3, 5),
    ("llama-gqa-interleaved-untied", "llama", LlamaConfig(kv_heads=2, rope="interleaved",
                                                          **_LLAMA), True, 2, 9),
    # Without constant folding: PyTorch names, weight Transposes in the graph, and a tied head
    # that is one initializer used twice (embedding Gather and head Transpose).
    ("llama-gqa-half-tied-nofold", "llama",
     LlamaConfig(kv_heads=2, tie_embeddings=True, **_LLAMA), False, 2, 6),
    ("gpt2-tanh-fused", "gpt2", GPT2Config(activation="gelu-tanh", fused_qkv=True, **_GPT),
     True, 2, 7),
    ("gpt2-erf-fused", "gpt2", GPT2Config(activation="gelu", fused_qkv=True, **_GPT), True, 4, 3),
    ("gpt2-tanh-separate-untied", "gpt2",
     GPT2Config(fused_qkv=False, tie_embeddings=False, **_GPT), True, 1, 12),
    ("gpt2-erf-fused-nofold", "gpt2", GPT2Config(activation="gelu", **_GPT), False, 2, 5),
    ("opt-relu", "opt", OPTConfig(activation="relu", **_GPT), True, 3, 6),
    # A sequence whose S x S causal mask (90000 elements) is too big to fold into the IR: the
    # fusion must still recognise it as causal.
    ("llama-long-mask", "llama", LlamaConfig(**dict(_LLAMA, max_positions=320)), True, 1, 300),
    ("opt-relu-fused-qkv-nofold", "opt", OPTConfig(fused_qkv=True, **_GPT), False, 2, 10),
]
CASES = [pytest.param(arch, cfg, fold, batch, seq, id=name)
         for name, arch, cfg, fold, batch, seq in _CASES]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("arch,config,constant_folding,batch,seq", CASES)
def test_decoder_matches_pytorch(sl_tools, tmp_path, arch, config, constant_folding, batch, seq,
                                 fuse):
    onnx_path = tmp_path / "model.onnx"
    ref_dir = tmp_path / "ref"
    res = export_model(arch, config, onnx_path, seed=SEED, constant_folding=constant_folding,
                       batch=batch, seq=seq, reference_dir=ref_dir)
    ids_path, expected = ref_dir / "input_ids.npy", np.load(ref_dir / "logits.npy")
    want_shape = (batch, seq, config.vocab)
    assert expected.shape == want_shape and expected.dtype == np.float32
    np.testing.assert_array_equal(expected, res.y)
    assert np.load(ids_path).dtype == np.int64

    sched = tmp_path / "model.slsched"
    # fuse=True is the default pipeline: no fuse= option on the command line.
    proc = sl_tools.compile(onnx_path, sched, batch=batch, seq=seq,
                            fuse=None if fuse else False)
    check_ok(proc)
    assert sched.is_file(), f"sl-opt exited 0 but wrote no schedule\n{describe(proc)}"

    out_path = tmp_path / "logits.npy"
    report = tmp_path / "report.json"
    proc = sl_tools.run(sched, ids_path, out_path, report, input_name="input_ids",
                        output_name="logits")
    check_ok(proc)

    assert out_path.is_file(), f"sl-run exited 0 but wrote no output\n{describe(proc)}"
    got = np.load(out_path)
    assert got.dtype == np.float32, got.dtype
    assert got.shape == want_shape, (got.shape, want_shape)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL,
                               err_msg=f"{'fused' if fuse else 'unfused'} schedule")

    assert report.is_file(), f"sl-run wrote no report\n{describe(proc)}"
    with open(report) as f:
        data = json.load(f)
    assert isinstance(data, dict) and data, f"report is not a non-empty JSON object: {data!r}"

    # The fused schedule really is fused: one kernel per block of every layer, and none unfused.
    expected_fused = {
        "llama": {"RMS_NORM": 2 * config.layers + 1, "ROTARY": 2 * config.layers,
                  "ATTENTION": config.layers, "SWIGLU": config.layers},
        "gpt2": {"LAYER_NORM": 2 * config.layers + 1, "ATTENTION": config.layers,
                 "GELU": config.layers},
        "opt": {"LAYER_NORM": 2 * config.layers + 1, "ATTENTION": config.layers},
    }[arch]
    ops = {name: entry["count"] for name, entry in data["ops"].items()}
    for kind, count in expected_fused.items():
        assert ops.get(kind, 0) == (count if fuse else 0), (kind, ops)
    if fuse:
        assert "SOFTMAX" not in ops, ops


# The training loss (sl-append-loss): mean cross-entropy of the logits against the next tokens,
# equal to PyTorch's F.cross_entropy on the same logits and labels.
@pytest.mark.parametrize("arch,config,constant_folding,batch,seq",
                         [c for c in CASES if c.id in ("llama-gqa-half-tied", "gpt2-tanh-fused",
                                                       "opt-relu")])
def test_loss_matches_pytorch(sl_tools, tmp_path, arch, config, constant_folding, batch, seq):
    import torch

    onnx_path = tmp_path / "model.onnx"
    res = export_model(arch, config, onnx_path, seed=SEED, constant_folding=constant_folding,
                       batch=batch, seq=seq, reference_dir=tmp_path / "ref")
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, config.vocab, size=(batch, seq + 1), dtype=np.int64)
    ids, labels = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    labels[0, 0] = -100  # PyTorch's ignore_index: left out of the mean
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "labels.npy", labels)
    with torch.no_grad():
        logits = res.model(torch.from_numpy(ids))
        want = torch.nn.functional.cross_entropy(logits.reshape(-1, config.vocab),
                                                 torch.from_numpy(labels).reshape(-1)).item()

    sched = tmp_path / "loss.slsched"
    proc = sl_tools._run([sl_tools.sl_opt, onnx_path, "--sl-append-loss",
                          f"--sl-infer=batch={batch} seq={seq}", "-o", sched])
    check_ok(proc)
    proc = sl_tools._run([sl_tools.sl_run, sched, "--input", f"input_ids={tmp_path / 'ids.npy'}",
                          "--input", f"labels={tmp_path / 'labels.npy'}",
                          "--output", f"loss={tmp_path / 'loss.npy'}"])
    check_ok(proc)
    got = np.load(tmp_path / "loss.npy")
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(float(got), want, rtol=1e-5)

    # A label outside the vocabulary is a clear run-time error, and no output is written.
    labels[1, 2] = config.vocab
    np.save(tmp_path / "labels.npy", labels)
    (tmp_path / "loss.npy").unlink()
    proc = sl_tools._run([sl_tools.sl_run, sched, "--input", f"input_ids={tmp_path / 'ids.npy'}",
                          "--input", f"labels={tmp_path / 'labels.npy'}",
                          "--output", f"loss={tmp_path / 'loss.npy'}"])
    assert proc.returncode == 1, describe(proc)
    assert f"label {config.vocab} at position {1 * seq + 2} is outside the vocabulary" in proc.stderr
    assert not (tmp_path / "loss.npy").exists()
