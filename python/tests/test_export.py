"""speedloader.export, the MLP and decoder builders and the NumPy ONNX evaluator, without sl-opt
or sl-run.

Also pins down what torch.onnx.export writes for each variant, since the importer relies on it
(models/EXPORTS.md has the full inventory for the decoders).
"""

import collections
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
                "--out-features", "--activation", "--no-bias", "--layers", "--heads",
                "--kv-heads", "--ffn", "--vocab", "--max-positions", "--tie-embeddings",
                "--no-tie-embeddings", "--rope", "--fused-qkv", "--no-fused-qkv"):
        assert opt in p.stdout, opt
    for word in ("gpt2", "llama", "mlp", "opt", "input_ids", "logits", "gelu-tanh",
                 "interleaved"):
        assert word in p.stdout, word


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
    pytest.param(["--arch", "nope"], "argument --arch: invalid choice: 'nope'", id="arch"),
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


# --- decoder transformers (llama, gpt2, opt) -----------------------------------------------------

from speedloader.export import main as export_main  # noqa: E402
from speedloader.models.gpt2 import GPT2Config, OPTConfig  # noqa: E402
from speedloader.models.llama import LlamaConfig  # noqa: E402

TINY = dict(layers=2, hidden=32, heads=4, vocab=128, max_positions=32)
DECODERS = {
    "llama-mha": ("llama", LlamaConfig(ffn=48, **TINY)),
    "llama-gqa": ("llama", LlamaConfig(ffn=48, kv_heads=2, **TINY)),
    "llama-mqa-interleaved": ("llama", LlamaConfig(ffn=48, kv_heads=1, rope="interleaved",
                                                   **TINY)),
    "llama-tied": ("llama", LlamaConfig(ffn=48, tie_embeddings=True, **TINY)),
    "gpt2-tanh": ("gpt2", GPT2Config(**TINY)),
    "gpt2-erf-separate": ("gpt2", GPT2Config(activation="gelu", fused_qkv=False, **TINY)),
    "gpt2-relu-untied": ("gpt2", GPT2Config(activation="relu", tie_embeddings=False, **TINY)),
    "opt-relu": ("opt", OPTConfig(**TINY)),
    "opt-fused-gelu-tanh": ("opt", OPTConfig(fused_qkv=True, activation="gelu-tanh", ffn=40,
                                             **TINY)),
}
# (opset, constant folding): the default, and the other end of both ranges.
EXPORT_MODES = [(14, True), (17, False)]


def _ids(rng, vocab, batch, seq):
    return rng.integers(0, vocab, (batch, seq)).astype(np.int64)


@pytest.mark.parametrize("opset,fold", EXPORT_MODES,
                         ids=[f"opset{o}-{'fold' if f else 'nofold'}" for o, f in EXPORT_MODES])
@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_export_matches_pytorch(tmp_path, name, opset, fold):
    arch, cfg = DECODERS[name]
    path = tmp_path / "m.onnx"
    res = export_model(arch, cfg, path, seed=5, opset=opset, constant_folding=fold, batch=2,
                       seq=5)
    s = graph_summary(path)
    assert s["opset"] == opset
    assert s["inputs"] == {"input_ids": ["batch", "seq"]}
    assert s["outputs"] == {"logits": ["batch", "seq", cfg.vocab]}
    g = onnx.load(str(path)).graph
    assert g.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert g.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    unsupported = set(s["op_types"]) - set(onnx_numpy.supported_ops())
    assert not unsupported, f"the NumPy evaluator lacks {sorted(unsupported)}"

    assert res.x.dtype == np.int64 and res.x.shape == (2, 5)
    assert res.x.min() >= 0 and res.x.max() < cfg.vocab
    assert res.y.dtype == np.float32 and res.y.shape == (2, 5, cfg.vocab)
    # The traced size, then another (batch, seq): the symbolic axes are really symbolic (the
    # causal mask, rotary slices and position ids all follow seq).
    np.testing.assert_allclose(onnx_numpy.run(path, {"input_ids": res.x})["logits"], res.y,
                               rtol=1e-5, atol=1e-5)
    ids = _ids(np.random.default_rng(0), cfg.vocab, 3, 11)
    with torch.no_grad():
        want = res.model(torch.from_numpy(ids)).numpy()
    got = onnx_numpy.run(path, {"input_ids": ids})["logits"]
    assert got.shape == (3, 11, cfg.vocab) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _initializer_names(path):
    return [i.name for i in onnx.load(str(path)).graph.initializer]


def _uses(path, name):
    return [n.op_type for n in onnx.load(str(path)).graph.node if name in n.input]


@pytest.mark.parametrize("arch,cfg,embedding", [
    ("llama", LlamaConfig(ffn=48, tie_embeddings=True, **TINY), "model.embed_tokens.weight"),
    ("gpt2", GPT2Config(**TINY), "transformer.wte.weight"),
    ("opt", OPTConfig(**TINY), "model.decoder.embed_tokens.weight"),
], ids=["llama", "gpt2", "opt"])
def test_decoder_tied_head(tmp_path, arch, cfg, embedding):
    """Without folding a tied head is the embedding used twice; folding unties it."""
    model = build_model(arch, cfg, seed=0)
    assert model.lm_head.weight is dict(model.named_parameters())[embedding]
    export_model(arch, cfg, tmp_path / "nofold.onnx", constant_folding=False)
    names = _initializer_names(tmp_path / "nofold.onnx")
    assert embedding in names and "lm_head.weight" not in names
    assert sorted(_uses(tmp_path / "nofold.onnx", embedding)) == ["Gather", "Transpose"]
    export_model(arch, cfg, tmp_path / "fold.onnx")
    m = onnx.load(str(tmp_path / "fold.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    assert _uses(tmp_path / "fold.onnx", embedding) == ["Gather"]
    head = [n for n in m.graph.node if n.output[0] == "logits" or n.name == "/lm_head/MatMul"]
    copy = [i for i in head[0].input if i in inits]
    assert len(copy) == 1 and copy[0].startswith("onnx::MatMul_")
    np.testing.assert_array_equal(inits[copy[0]], inits[embedding].T)


def test_decoder_nofold_keeps_pytorch_names(tmp_path):
    for arch, cfg in (DECODERS["llama-gqa"], DECODERS["gpt2-erf-separate"],
                      DECODERS["opt-fused-gelu-tanh"]):
        path = tmp_path / f"{arch}.onnx"
        export_model(arch, cfg, path, constant_folding=False)
        model = build_model(arch, cfg, seed=0)
        params = {n for n, _ in model.named_parameters()}
        buffers = {n for n, _ in model.named_buffers()}
        names = set(_initializer_names(path))
        # Every parameter keeps its PyTorch name; the only other initializers are buffers
        # (GPT-2's causal-mask buffer; llama's rotary caches are Constant nodes).
        assert params <= names, sorted(params - names)
        assert names - params <= buffers, sorted(names - params - buffers)


def test_decoder_op_facts(tmp_path):
    """The facts EXPORTS.md reports and the fusion pass relies on, kept true."""
    def ops(arch, cfg, **kw):
        path = tmp_path / "m.onnx"
        export_model(arch, cfg, path, **kw)
        return collections.Counter(graph_summary(path)["op_types"])

    base = LlamaConfig(ffn=48, **TINY)
    llama = ops("llama", base)
    assert llama["If"] == 2 * TINY["layers"]          # squeeze(1) of the sliced rotary caches
    assert llama["Softmax"] == TINY["layers"] and llama["Sigmoid"] == TINY["layers"]
    assert llama["Expand"] == 1                       # the causal mask only
    assert "LayerNormalization" not in ops("llama", base, opset=17)
    gqa = ops("llama", LlamaConfig(ffn=48, kv_heads=2, **TINY))
    assert gqa["Expand"] == 1 + 2 * TINY["layers"]    # repeat_kv of k and v
    inter = ops("llama", LlamaConfig(ffn=48, rope="interleaved", **TINY))
    assert inter["Slice"] == llama["Slice"] + 2 * TINY["layers"]

    gpt2 = ops("gpt2", GPT2Config(**TINY))
    assert gpt2["Split"] == TINY["layers"] and gpt2["Tanh"] == TINY["layers"]
    assert gpt2["Gemm"] == 4 * TINY["layers"] and "LayerNormalization" not in gpt2
    assert ops("gpt2", GPT2Config(**TINY), opset=17)["LayerNormalization"] == \
        2 * TINY["layers"] + 1
    assert ops("gpt2", GPT2Config(activation="gelu", **TINY))["Erf"] == TINY["layers"]
    assert "Split" not in ops("gpt2", GPT2Config(fused_qkv=False, **TINY))
    opt = ops("opt", OPTConfig(**TINY))
    assert opt["Relu"] == TINY["layers"] and opt["Gemm"] == 2 * TINY["layers"]
    assert ops("opt", OPTConfig(fused_qkv=True, **TINY))["Split"] == TINY["layers"]


def test_decoder_reference_files_and_determinism(tmp_path):
    arch, cfg = DECODERS["llama-gqa"]
    ref = tmp_path / "ref"
    res = export_model(arch, cfg, tmp_path / "a.onnx", seed=3, batch=3, seq=7,
                       reference_dir=ref)
    assert sorted(p.name for p in ref.iterdir()) == ["input_ids.npy", "logits.npy"]
    ids, logits = np.load(ref / "input_ids.npy"), np.load(ref / "logits.npy")
    assert ids.dtype == np.int64 and ids.shape == (3, 7) and 0 <= ids.min() <= ids.max() < 128
    assert logits.dtype == np.float32 and logits.shape == (3, 7, 128)
    np.testing.assert_array_equal(ids, res.x)
    np.testing.assert_array_equal(logits, res.y)
    assert res.input_file == ref / "input_ids.npy" and res.output_file == ref / "logits.npy"
    with torch.no_grad():
        np.testing.assert_array_equal(
            build_model(arch, cfg, seed=3)(torch.from_numpy(ids)).numpy(), logits)
    again = export_model(arch, cfg, tmp_path / "b.onnx", seed=3, batch=3, seq=7)
    np.testing.assert_array_equal(again.x, ids)
    np.testing.assert_array_equal(again.y, logits)
    other = export_model(arch, cfg, tmp_path / "c.onnx", seed=4, batch=3, seq=7)
    assert not np.array_equal(other.y, logits)


def test_decoder_modules_and_configs():
    for name in ("llama", "gpt2", "opt"):
        assert name in arch_names()
        assert get_arch(name).input_name == "input_ids"
        assert get_arch(name).output_name == "logits"
    m = build_model("llama", LlamaConfig(ffn=48, kv_heads=2, **TINY))
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (32, 32)
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (16, 32)
    assert shapes["model.layers.1.mlp.gate_proj.weight"] == (48, 32)
    assert shapes["lm_head.weight"] == (128, 32) and "model.norm.weight" in shapes
    assert not any("bias" in n for n in shapes)
    g = build_model("gpt2", GPT2Config(**TINY))
    names = {n for n, _ in g.named_parameters()}
    assert "transformer.h.0.attn.c_attn.weight" in names and "lm_head.weight" not in names
    assert dict(g.named_parameters())["transformer.h.0.mlp.c_fc.weight"].shape == (32, 128)
    o = build_model("opt", OPTConfig(**TINY))
    assert dict(o.named_parameters())["model.decoder.embed_positions.weight"].shape == (34, 32)
    assert GPT2Config(**TINY).activation == "gelu-tanh" and GPT2Config(**TINY).fused_qkv
    assert OPTConfig(**TINY).activation == "relu" and not OPTConfig(**TINY).fused_qkv
    assert LlamaConfig(**TINY).kv_heads == 4 and LlamaConfig(**TINY).ffn == 128
    assert not LlamaConfig(**TINY).tie_embeddings and GPT2Config(**TINY).tie_embeddings
    with pytest.raises(TypeError):
        build_model("gpt2", OPTConfig(**TINY))
    for cls, bad, message in (
            (LlamaConfig, dict(heads=3), "multiple of heads"),
            (LlamaConfig, dict(kv_heads=3), "multiple of kv_heads"),
            (LlamaConfig, dict(heads=8, kv_heads=8, hidden=24), "even head dimension"),
            (LlamaConfig, dict(rope="complex"), "rope must be one of"),
            (LlamaConfig, dict(layers=0), "layers must be a positive integer"),
            (GPT2Config, dict(kv_heads=2), "no grouped-query attention"),
            (OPTConfig, dict(activation="silu"), "activation must be one of")):
        with pytest.raises(ValueError, match=message):
            cls(**{**TINY, **bad})
    with pytest.raises(ValueError, match="max_positions"):
        export_model("gpt2", GPT2Config(**TINY), "unused.onnx", seq=33)
    with pytest.raises(ValueError, match="opset >= 14"):
        export_model("llama", LlamaConfig(**TINY), "unused.onnx", opset=13)


def _main(argv, capsys):
    """Runs the exporter's main() in this process (no torch start-up); (exit code, stderr)."""
    try:
        code = export_main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


LLAMA_CLI = ["--arch", "llama", "--layers", 2, "--hidden", 32, "--heads", 4, "--vocab", 128,
             "--max-positions", 16]


@pytest.mark.parametrize("args,message", [
    pytest.param(["--arch", "llama", "--hidden", 32, "--vocab", 8],
                 "--arch llama requires --layers, --heads", id="missing"),
    pytest.param(LLAMA_CLI + ["--kv-heads", 3], "multiple of kv_heads", id="kv-heads"),
    pytest.param(LLAMA_CLI + ["--hidden", "32,32"], "argument --hidden: --arch llama takes one "
                 "width", id="hidden-list"),
    pytest.param(LLAMA_CLI + ["--activation", "relu"], "argument --activation: --arch llama has "
                 "a SwiGLU MLP", id="llama-activation"),
    pytest.param(LLAMA_CLI + ["--fused-qkv"], "--fused-qkv/--no-fused-qkv apply to --arch gpt2 "
                 "and opt only", id="llama-fused"),
    pytest.param(LLAMA_CLI + ["--in-features", 4], "--in-features does not apply to --arch llama",
                 id="mlp-option"),
    pytest.param(LLAMA_CLI + ["--seq", 17], "--seq 17 exceeds --max-positions 16", id="seq"),
    pytest.param(LLAMA_CLI + ["--opset", 13], "argument --opset: --arch llama needs an opset in "
                 "[14, 17], got 13", id="opset"),
    pytest.param(LLAMA_CLI + ["--rope", "complex"], "argument --rope: invalid choice", id="rope"),
    pytest.param(["--arch", "gpt2"] + LLAMA_CLI[2:] + ["--kv-heads", 2],
                 "gpt2 has no grouped-query attention", id="gpt2-gqa"),
    pytest.param(["--arch", "gpt2"] + LLAMA_CLI[2:] + ["--rope", "half"],
                 "--rope applies to --arch llama only", id="gpt2-rope"),
    pytest.param(["--arch", "opt"] + LLAMA_CLI[2:] + ["--activation", "silu"],
                 "argument --activation: invalid choice: 'silu' for --arch opt", id="opt-silu"),
    pytest.param(["--arch", "mlp", "--in-features", 4, "--hidden", 8, "--out-features", 2,
                  "--layers", 2], "--layers does not apply to --arch mlp", id="mlp-layers"),
])
def test_cli_decoder_bad_arguments(tmp_path, capsys, args, message):
    out = tmp_path / "m.onnx"
    code, err = _main(args + ["--out", out], capsys)
    assert code == 2, err
    assert message in err
    assert not out.exists()


def test_cli_decoder_example_from_brief(tmp_path):
    """The documented command line, through `python3 -m` (llama GQA, saved reference)."""
    out, ref = tmp_path / "tiny.onnx", tmp_path / "ref"
    p = _cli(["--arch", "llama", "--layers", 2, "--hidden", 64, "--heads", 4, "--kv-heads", 2,
              "--ffn", 128, "--vocab", 256, "--max-positions", 128, "--rope", "interleaved",
              "--tie-embeddings", "--seed", 0, "--out", out, "--no-constant-folding",
              "--opset", 17, "--save-reference", ref, "--batch", 3, "--seq", 9])
    assert p.returncode == 0, p.stderr
    assert "input_ids['batch', 'seq']; logits['batch', 'seq', 256]" in p.stdout
    assert "input_ids.npy [3, 9] int64" in p.stdout and "logits.npy [3, 9, 256] float32" in p.stdout
    ids, logits = np.load(ref / "input_ids.npy"), np.load(ref / "logits.npy")
    assert graph_summary(out)["opset"] == 17
    cfg = LlamaConfig(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=256,
                      max_positions=128, rope="interleaved", tie_embeddings=True)
    with torch.no_grad():
        np.testing.assert_array_equal(build_model("llama", cfg, seed=0)(torch.from_numpy(ids))
                                      .numpy(), logits)
    np.testing.assert_allclose(onnx_numpy.run(out, {"input_ids": ids})["logits"], logits,
                               rtol=1e-5, atol=1e-5)


def test_cli_gpt2_opt_options(tmp_path, capsys):
    out = tmp_path / "g.onnx"
    code, _ = _main(["--arch", "gpt2", "--layers", 1, "--hidden", 16, "--heads", 2, "--vocab",
                     32, "--activation", "gelu", "--no-fused-qkv", "--no-tie-embeddings",
                     "--max-positions", 8, "--out", out], capsys)
    assert code == 0
    s = graph_summary(out)
    assert "Erf" in s["op_types"] and "Split" not in s["op_types"]
    assert "lm_head.weight" not in s["initializers"]  # untied, folded: an onnx::MatMul copy
    code, _ = _main(["--arch", "opt", "--layers", 1, "--hidden", 16, "--heads", 2, "--vocab", 32,
                     "--fused-qkv", "--ffn", 24, "--no-constant-folding", "--out", out], capsys)
    assert code == 0
    s = graph_summary(out)
    assert "Split" in s["op_types"] and "Relu" in s["op_types"]
    assert "model.decoder.layers.0.self_attn.qkv_proj.weight" in s["initializers"]
    assert "model.decoder.layers.0.fc1.weight" in s["initializers"]


def test_exports_inventory_is_current(tmp_path):
    """models/EXPORTS.md is what `python3 -m speedloader.models.inventory` writes today."""
    from speedloader.models import inventory

    doc = Path(inventory.__file__).with_name("EXPORTS.md")
    text = inventory.render(inventory.export_all(tmp_path), inventory.PROSE)
    assert doc.read_text() == text, (
        f"{doc} is stale: regenerate it with PYTHONPATH=python /usr/bin/python3 -m "
        f"speedloader.models.inventory")
