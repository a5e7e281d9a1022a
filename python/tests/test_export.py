"""speedloader.export and the MLP builder, without sl-opt or sl-run.

Also pins down what torch.onnx.export writes for each variant, since the importer relies on it.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from sl_helpers import shape_pattern
from speedloader.export import export_model, graph_summary
from speedloader.models import arch_names, build_model, get_arch
from speedloader.models.mlp import MLP, MLPConfig
from speedloader.reference import onnx_numpy

PYTHON_DIR = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "speedloader.export"]


def _cli(args, **kw):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(CLI + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=300, **kw)


def _act_ops(activation):
    return ["Relu"] if activation == "relu" else ["Sigmoid", "Mul"]


def _expected_ops(n_linear, activation, rank, fold, bias):
    if rank == 2 and bias:
        linear = ["Gemm"]
    else:
        linear = ([] if fold else ["Transpose"]) + ["MatMul"] + (["Add"] if bias else [])
    ops = []
    for i in range(n_linear):
        ops += linear
        if i != n_linear - 1:
            ops += _act_ops(activation)
    return ops


VARIANTS = [
    pytest.param(act, rank, fold, bias,
                 id=f"{act}-rank{rank}-{'fold' if fold else 'nofold'}-{'bias' if bias else 'nobias'}")
    for act in ("relu", "silu") for rank in (2, 3) for fold in (True, False)
    for bias in (True, False)
]


@pytest.mark.parametrize("activation,rank,fold,bias", VARIANTS)
def test_export_graph_structure_and_numerics(tmp_path, activation, rank, fold, bias):
    cfg = MLPConfig(in_features=6, hidden=[10, 9], out_features=4, activation=activation,
                    bias=bias)
    path = tmp_path / "m.onnx"
    res = export_model("mlp", cfg, path, seed=3, input_rank=rank, constant_folding=fold,
                       batch=4, seq=8)
    s = graph_summary(path)

    assert s["opset"] == 14
    if rank == 2:
        assert s["inputs"] == {"x": ["batch", 6]}
        assert s["outputs"] == {"y": ["batch", 4]}
    else:
        assert s["inputs"] == {"x": ["batch", "seq", 6]}
        assert s["outputs"] == {"y": ["batch", "seq", 4]}
    assert s["op_types"] == _expected_ops(3, activation, rank, fold, bias)

    inits = set(s["initializers"])
    biases = {f"layers.{i}.bias" for i in range(3)} if bias else set()
    weights = {f"layers.{i}.weight" for i in range(3)}
    if (rank == 2 and bias) or not fold:
        # Gemm(transB=1) uses the weights as they are; without folding Transpose does.
        assert inits == weights | biases
    else:
        # Folding pre-transposes the weights into new, renamed initializers.
        assert biases <= inits and not (weights & inits)
        renamed = inits - biases
        assert len(renamed) == 3 and all(n.startswith("onnx::MatMul_") for n in renamed)
        m = onnx.load(str(path))
        shapes = sorted(tuple(numpy_helper.to_array(i).shape) for i in m.graph.initializer
                        if i.name in renamed)
        assert shapes == sorted([(6, 10), (10, 9), (9, 4)])

    # The graph computes what PyTorch computed, for the traced input...
    got = onnx_numpy.run(path, {"x": res.x})["y"]
    np.testing.assert_allclose(got, res.y, rtol=1e-5, atol=1e-5)
    # ...and for other batch (and seq) sizes: the symbolic axes are really symbolic.
    x2 = np.random.default_rng(1).standard_normal((7, 6) if rank == 2 else (7, 5, 6))
    x2 = x2.astype(np.float32)
    with torch.no_grad():
        want = res.model(torch.from_numpy(x2)).numpy()
    np.testing.assert_allclose(onnx_numpy.run(path, {"x": x2})["y"], want, rtol=1e-5, atol=1e-5)


def test_reference_files(tmp_path):
    cfg = MLPConfig(in_features=5, hidden=[8], out_features=3, activation="silu")
    ref = tmp_path / "deep" / "ref"
    res = export_model("mlp", cfg, tmp_path / "sub" / "m.onnx", seed=1, input_rank=3,
                       batch=2, seq=6, reference_dir=ref)
    assert (tmp_path / "sub" / "m.onnx").is_file()
    x = np.load(ref / "x.npy")
    y = np.load(ref / "y.npy")
    assert x.dtype == np.float32 and y.dtype == np.float32
    assert x.shape == (2, 6, 5) and y.shape == (2, 6, 3)
    np.testing.assert_array_equal(x, res.x)
    np.testing.assert_array_equal(y, res.y)
    model = build_model("mlp", cfg, seed=1)
    with torch.no_grad():
        np.testing.assert_array_equal(model(torch.from_numpy(x)).numpy(), y)


def test_seed_determinism(tmp_path):
    cfg = MLPConfig(in_features=4, hidden=[8], out_features=2)

    def params(path):
        return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}

    a = export_model("mlp", cfg, tmp_path / "a.onnx", seed=7)
    b = export_model("mlp", cfg, tmp_path / "b.onnx", seed=7)
    c = export_model("mlp", cfg, tmp_path / "c.onnx", seed=8)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    pa, pb, pc = params(tmp_path / "a.onnx"), params(tmp_path / "b.onnx"), params(tmp_path / "c.onnx")
    assert pa.keys() == pb.keys() == pc.keys()
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k])
    assert any(not np.array_equal(pa[k], pc[k]) for k in pa)
    assert not np.array_equal(a.x, c.x)


def test_opset_option(tmp_path):
    cfg = MLPConfig(in_features=4, hidden=[8], out_features=2, activation="silu")
    for opset in (13, 17):
        export_model("mlp", cfg, tmp_path / f"m{opset}.onnx", opset=opset, input_rank=3)
        assert graph_summary(tmp_path / f"m{opset}.onnx")["opset"] == opset
    with pytest.raises(ValueError, match="opset"):
        export_model("mlp", cfg, tmp_path / "bad.onnx", opset=5)


def test_mlp_module_and_registry():
    assert "mlp" in arch_names()
    m = build_model("mlp", MLPConfig(in_features=3, hidden=[], out_features=2))
    assert [n for n, _ in m.named_parameters()] == ["layers.0.weight", "layers.0.bias"]
    assert not m.training
    m = MLP(MLPConfig(in_features=3, hidden=[4, 5], out_features=2, bias=False))
    assert [tuple(p.shape) for p in m.parameters()] == [(4, 3), (5, 4), (2, 5)]
    with pytest.raises(KeyError, match="unknown architecture 'nope'.*mlp"):
        get_arch("nope")
    with pytest.raises(TypeError):
        build_model("mlp", {"in_features": 3})
    for bad in (dict(in_features=0, out_features=2), dict(in_features=3, out_features=2,
                                                           hidden=[4, -1]),
                dict(in_features=3, out_features=2, activation="gelu")):
        with pytest.raises(ValueError):
            MLPConfig(**bad)


# --- the command line -----------------------------------------------------------------------------

def test_cli_example_from_docs(tmp_path):
    out = tmp_path / "mlp.onnx"
    ref = tmp_path / "ref"
    p = _cli(["--arch", "mlp", "--in-features", 32, "--hidden", "64,64", "--out-features", 16,
              "--activation", "relu", "--seed", 0, "--out", out, "--save-reference", ref],
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Gemm x3" in p.stdout
    s = graph_summary(out)
    assert s["op_types"] == ["Gemm", "Relu", "Gemm", "Relu", "Gemm"]
    assert s["inputs"] == {"x": ["batch", 32]} and s["outputs"] == {"y": ["batch", 16]}
    x, y = np.load(ref / "x.npy"), np.load(ref / "y.npy")
    assert x.shape == (4, 32) and y.shape == (4, 16)
    # Same seed through the API gives the same reference.
    res = export_model("mlp", MLPConfig(in_features=32, hidden=[64, 64], out_features=16),
                       tmp_path / "api.onnx", seed=0)
    np.testing.assert_array_equal(res.x, x)
    np.testing.assert_array_equal(res.y, y)
    np.testing.assert_allclose(onnx_numpy.run(out, {"x": x})["y"], y, rtol=1e-5, atol=1e-5)


def test_cli_rank3_no_folding(tmp_path):
    out = tmp_path / "m.onnx"
    p = _cli(["--arch", "mlp", "--in-features", 8, "--hidden", "16", "--out-features", 4,
              "--activation", "silu", "--input-rank", 3, "--no-constant-folding", "--opset", 13,
              "--batch", 2, "--seq", 5, "--save-reference", tmp_path / "r", "--out", out])
    assert p.returncode == 0, p.stderr
    s = graph_summary(out)
    assert s["opset"] == 13
    assert s["op_types"] == ["Transpose", "MatMul", "Add", "Sigmoid", "Mul",
                             "Transpose", "MatMul", "Add"]
    assert s["initializers"] == ["layers.0.weight", "layers.0.bias", "layers.1.weight",
                                 "layers.1.bias"]
    assert s["inputs"] == {"x": ["batch", "seq", 8]}
    assert np.load(tmp_path / "r" / "x.npy").shape == (2, 5, 8)
    assert np.load(tmp_path / "r" / "y.npy").shape == (2, 5, 4)


def test_cli_help_lists_every_option():
    p = _cli(["--help"])
    assert p.returncode == 0
    for opt in ("--arch", "--out", "--seed", "--opset", "--input-rank", "--no-constant-folding",
                "--save-reference", "--batch", "--seq", "--in-features", "--hidden",
                "--out-features", "--activation", "--no-bias"):
        assert opt in p.stdout, opt


BASE = ["--arch", "mlp", "--in-features", "32", "--hidden", "64,64", "--out-features", "16"]


@pytest.mark.parametrize("args,message", [
    pytest.param(["--hidden", "64,x"],
                 "argument --hidden: expected comma-separated positive integers", id="hidden-nan"),
    pytest.param(["--hidden", "64,0"], "argument --hidden: hidden widths must be positive",
                 id="hidden-zero"),
    pytest.param(["--in-features", "0"], "argument --in-features: expected a positive integer",
                 id="in-features-zero"),
    pytest.param(["--activation", "gelu"], "argument --activation: invalid choice",
                 id="activation"),
    pytest.param(["--opset", "5"], "argument --opset: expected an integer in [9, 17]",
                 id="opset"),
    pytest.param(["--input-rank", "4"], "argument --input-rank: invalid choice", id="rank"),
    pytest.param(["--batch", "0"], "argument --batch: expected an integer >= 1", id="batch"),
    pytest.param(["--seq", "4"], "--seq only applies to --input-rank 3", id="seq-rank2"),
    pytest.param(["--arch", "llama"], "argument --arch: invalid choice: 'llama'", id="arch"),
])
def test_cli_bad_arguments(tmp_path, args, message):
    out = tmp_path / "m.onnx"
    p = _cli(BASE + ["--out", str(out)] + args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr
    assert not out.exists()


def test_cli_missing_arguments(tmp_path):
    p = _cli(["--arch", "mlp", "--in-features", "4", "--out", tmp_path / "m.onnx"])
    assert p.returncode == 2
    assert "--arch mlp requires --hidden, --out-features" in p.stderr
    p = _cli(BASE)
    assert p.returncode == 2 and "--out" in p.stderr
    p = _cli(BASE + ["--out", tmp_path])
    assert p.returncode == 2 and "is a directory" in p.stderr


# --- the test helpers themselves ------------------------------------------------------------------

def test_shape_pattern():
    p = shape_pattern((2, 33))
    for text in ("got [2, 33]", "shape (2,33)", "2x33", "2 x 33", "f32[2 33]", "2*33"):
        assert p.search(text), text
    for text in ("[12, 33]", "[2, 331]", "[2, 3, 33]", "33"):
        assert not p.search(text), text
    p1 = shape_pattern((64,))
    assert p1.search("shape [64]") and p1.search("(64,)")
    assert not p1.search("64 bytes") and not p1.search("[640]")
