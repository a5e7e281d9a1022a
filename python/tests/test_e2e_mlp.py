"""End to end: PyTorch MLP -> torch.onnx.export -> sl-opt -> sl-run (CPU), compared with PyTorch.

Needs SL_OPT and SL_RUN (ctest sets them); skips otherwise.
"""

import json

import numpy as np
import pytest

from sl_helpers import check_ok, describe, shape_pattern
from speedloader.export import export_model
from speedloader.models.mlp import MLPConfig

SEED = 0
SEQ = 3  # deliberately not the exporter's default, so a schedule bound to the wrong seq fails

# (id, config, input_rank, constant_folding)
_BASE = []
for act in ("relu", "silu"):
    for rank in (2, 3):  # 2: Linear -> Gemm; 3: Linear -> MatMul + Add
        for fold in (True, False):
            _BASE.append((f"{act}-rank{rank}-{'fold' if fold else 'nofold'}",
                          MLPConfig(in_features=32, hidden=[64, 64], out_features=16,
                                    activation=act),
                          rank, fold))
_EXTRA = [
    # Odd widths, three hidden layers.
    ("relu-rank3-nofold-odd", MLPConfig(in_features=7, hidden=[13, 5, 11], out_features=3,
                                        activation="relu"), 3, False),
    # No bias: even a 2-D input exports as MatMul (no Gemm).
    ("silu-rank2-fold-nobias", MLPConfig(in_features=32, hidden=[64], out_features=16,
                                         activation="silu", bias=False), 2, True),
]
CASES = [pytest.param(cfg, rank, fold, id=name) for name, cfg, rank, fold in _BASE + _EXTRA]


@pytest.mark.parametrize("batch", [1, 5], ids=lambda b: f"b{b}")
@pytest.mark.parametrize("config,input_rank,constant_folding", CASES)
def test_mlp_matches_pytorch(sl_tools, tmp_path, config, input_rank, constant_folding, batch):
    onnx_path = tmp_path / "model.onnx"
    ref_dir = tmp_path / "ref"
    res = export_model("mlp", config, onnx_path, seed=SEED, input_rank=input_rank,
                       constant_folding=constant_folding, batch=batch, seq=SEQ,
                       reference_dir=ref_dir)
    expected = np.load(ref_dir / "y.npy")
    want_shape = (batch, config.out_features) if input_rank == 2 else \
        (batch, SEQ, config.out_features)
    assert expected.shape == want_shape

    sched = tmp_path / "model.slsched"
    proc = sl_tools.compile(onnx_path, sched, batch=batch, seq=SEQ)
    check_ok(proc)
    assert sched.is_file(), f"sl-opt exited 0 but wrote no schedule\n{describe(proc)}"

    y_path = tmp_path / "y.npy"
    report = tmp_path / "report.json"
    proc = sl_tools.run(sched, ref_dir / "x.npy", y_path, report)
    check_ok(proc)

    assert y_path.is_file(), f"sl-run exited 0 but wrote no output\n{describe(proc)}"
    got = np.load(y_path)
    assert got.dtype == np.float32, got.dtype
    assert got.shape == want_shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # The reference files are what PyTorch computed for this very model.
    np.testing.assert_array_equal(expected, res.y)

    assert report.is_file(), f"sl-run wrote no report\n{describe(proc)}"
    with open(report) as f:
        data = json.load(f)
    assert isinstance(data, dict) and data, f"report is not a non-empty JSON object: {data!r}"


# Compiled for x of shape [2, 32]. (64,) has exactly the right number of bytes, so only a real
# shape check refuses it.
@pytest.mark.parametrize("bad_shape", [(3, 32), (2, 33), (64,), (2, 1, 32)],
                         ids=lambda s: "x".join(map(str, s)))
def test_sl_run_refuses_wrong_input_shape(sl_tools, tmp_path, bad_shape):
    config = MLPConfig(in_features=32, hidden=[64], out_features=16, activation="relu")
    good_shape = (2, 32)
    onnx_path = tmp_path / "model.onnx"
    export_model("mlp", config, onnx_path, seed=SEED, input_rank=2, batch=good_shape[0])
    sched = tmp_path / "model.slsched"
    check_ok(sl_tools.compile(onnx_path, sched, batch=good_shape[0], seq=SEQ))

    x_path = tmp_path / "x_bad.npy"
    np.save(x_path, np.random.default_rng(0).standard_normal(bad_shape).astype(np.float32))
    y_path = tmp_path / "y.npy"
    assert not y_path.exists()
    proc = sl_tools.run(sched, x_path, y_path, tmp_path / "report.json")

    assert proc.returncode != 0, f"sl-run accepted an input of shape {bad_shape}\n{describe(proc)}"
    assert proc.returncode > 0, f"sl-run crashed instead of refusing the input\n{describe(proc)}"
    message = proc.stdout + proc.stderr
    assert shape_pattern(bad_shape).search(message) or shape_pattern(good_shape).search(message), \
        f"sl-run's error does not mention the shape {bad_shape} or {good_shape}\n{describe(proc)}"
    assert not y_path.exists(), f"sl-run left an output file behind\n{describe(proc)}"
