"""`speedloader.export --hf DIR`: a save_pretrained directory to ONNX, checked against PyTorch.

Tiny LLaMA (safetensors) and GPT-2 (pytorch_model.bin, tied head) directories are written here
from a config with `save_pretrained`; the export's logits under sl-opt --sl-infer / sl-run equal
the model's own (`from_pretrained` on the same directory). A `--train` export trains three AdamW
steps with PyTorch's losses, and `--weights CHECKPOINT` puts the trained weights back into an
eval-mode export. `--weightless` writes the same graph with a sparse data file. Bad directories are
clear errors.

Needs transformers: ctest runs it in python-hf (SL_REQUIRE_TRANSFORMERS=1); elsewhere it skips.
"""

import json
import os
import zipfile

import numpy as np
import onnx
import pytest
import torch

if os.environ.get("SL_REQUIRE_TRANSFORMERS") == "1":
    import transformers
else:
    transformers = pytest.importorskip("transformers")

from hf_harness import LogitsOnly  # noqa: E402
from sl_helpers import check_ok  # noqa: E402
from speedloader.export import main as export_main  # noqa: E402
from speedloader.hf import HFDirectoryError, export_hf  # noqa: E402
from speedloader.hf_weights import WeightFiles  # noqa: E402
from test_e2e_training import read_safetensors, torch_training  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")

VOCAB = 64
LOGITS_RTOL = 1e-4


def tiny_config(kind):
    if kind == "llama":
        return transformers.LlamaConfig(
            hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=32,
            tie_word_embeddings=False)
    return transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB,
                                   n_positions=32)


def save_tiny(kind, path, *, safetensors, seed=0):
    """A tiny model of `kind` with weights re-drawn around their initial values (so that no two
    norm weights are equal), written by save_pretrained."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config(kind))
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.08)
    model.save_pretrained(path, safe_serialization=safetensors)
    return path


def hf_logits(directory, ids, state=None):
    model = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    if state is not None:
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    with torch.no_grad():
        return model(torch.from_numpy(ids), use_cache=False).logits.numpy()


def sl_logits(tools, onnx_path, ids, tmp):
    np.save(tmp / "ids.npy", ids)
    sched = tmp / "infer.slsched"
    b, s = ids.shape
    check_ok(tools._run([tools.sl_opt, onnx_path, f"--sl-infer=batch={b} seq={s}", "-o", sched]))
    check_ok(tools._run([tools.sl_run, sched, "--input", f"input_ids={tmp / 'ids.npy'}",
                         "--output", f"logits={tmp / 'logits.npy'}"]))
    return np.load(tmp / "logits.npy")


def assert_close(got, want, what):
    assert got.shape == want.shape, (got.shape, want.shape)
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert rel <= LOGITS_RTOL, f"{what}: logits differ by {rel:.3g} of the largest logit"


@pytest.mark.parametrize("kind,safetensors", [("llama", True), ("gpt2", False)],
                         ids=["llama-safetensors", "gpt2-bin"])
def test_directory_infers_as_pytorch(sl_tools, tmp_path, capsys, kind, safetensors):
    d = save_tiny(kind, tmp_path / "dir", safetensors=safetensors)
    weight_file = "model.safetensors" if safetensors else "pytorch_model.bin"
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["config.json", "generation_config.json", weight_file])
    out = tmp_path / "onnx" / "model.onnx"
    assert export_main(["--hf", str(d), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    m = onnx.load(str(out), load_external_data=False)
    assert [i.name for i in m.graph.input] == ["input_ids"]
    assert [o.name for o in m.graph.output] == ["logits"]
    assert max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) == 17
    # Every weight is external data in one file, under its PyTorch name.
    names = set(WeightFiles(d).names())
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) >= 1 and t.name in names:
            assert t.data_location == onnx.TensorProto.EXTERNAL, t.name
    assert {t.name for t in m.graph.initializer} >= names - {"lm_head.weight"}
    ids = np.random.default_rng(1).integers(0, VOCAB, size=(2, 7), dtype=np.int64)
    assert_close(sl_logits(sl_tools, out, ids, tmp_path), hf_logits(d, ids), kind)


def test_sharded_directory(sl_tools, tmp_path):
    """Shards and their index, as save_pretrained writes past max_shard_size."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("llama"))
    d = tmp_path / "dir"
    model.save_pretrained(d, max_shard_size="20KB")
    assert (d / "model.safetensors.index.json").is_file()
    assert len(list(d.glob("model-*.safetensors"))) > 2
    out = tmp_path / "model.onnx"
    export_hf(d, out)
    ids = np.random.default_rng(2).integers(0, VOCAB, size=(1, 5), dtype=np.int64)
    assert_close(sl_logits(sl_tools, out, ids, tmp_path), hf_logits(d, ids), "sharded")


def test_train_then_export_trained_weights(sl_tools, tmp_path):
    """--train export trains as PyTorch does; --weights puts sl-run's checkpoint into an eval
    export whose logits are the trained model's."""
    d = save_tiny("llama", tmp_path / "dir", safetensors=True)
    train_onnx = tmp_path / "train" / "model.onnx"
    assert export_main(["--hf", str(d), "--out", str(train_onnx), "--train"]) == 0
    batch, seq, steps, lr = 4, 8, 3, 1e-3
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, size=batch * seq * steps + 7, dtype=np.uint16)
    tokens.astype("<u2").tofile(tmp_path / "tokens.bin")
    sched, ckpt, report = (tmp_path / "train" / "train.slsched", tmp_path / "ckpt.safetensors",
                           tmp_path / "train.json")
    check_ok(sl_tools._run([sl_tools.sl_opt, train_onnx,
                            f"--sl-train=batch={batch} seq={seq} num-sub-batches=2", "-o", sched]))
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--data", tmp_path / "tokens.bin", "--steps",
                            steps, "--lr", lr, "--save", ckpt, "--report", report]))
    losses = json.loads(report.read_text())["train"]["losses"]

    model = transformers.AutoModelForCausalLM.from_pretrained(d)
    model.train()
    want = torch_training(LogitsOnly(model), tokens, VOCAB, batch=batch, seq=seq, steps=steps, lr=lr,
                          wd=0.01)
    np.testing.assert_allclose(losses, want, rtol=1e-4)

    trained = tmp_path / "trained" / "model.onnx"
    assert export_main(["--hf", str(d), "--weights", str(ckpt), "--out", str(trained)]) == 0
    state = {k: v for k, v in read_safetensors(ckpt).items() if not k.endswith((".adam_m",
                                                                                 ".adam_v"))}
    ids = np.random.default_rng(3).integers(0, VOCAB, size=(2, 6), dtype=np.int64)
    want_logits = hf_logits(d, ids, state)
    assert not np.allclose(want_logits, hf_logits(d, ids), atol=1e-4)  # the weights did change
    assert_close(sl_logits(sl_tools, trained, ids, tmp_path), want_logits, "trained")


def test_weightless_is_the_same_graph(tmp_path):
    d = tmp_path / "dir"
    tiny_config("llama").save_pretrained(d)  # config.json alone: no weights are read
    w = export_hf(d, tmp_path / "w" / "model.onnx", weightless=True)
    assert w.data_path.stat().st_blocks == 0 and w.data_path.stat().st_size > 0
    save_tiny("llama", tmp_path / "full", safetensors=True)
    full = export_hf(tmp_path / "full", tmp_path / "f" / "model.onnx")
    a = onnx.load(str(w.onnx_path), load_external_data=False).graph
    b = onnx.load(str(full.onnx_path), load_external_data=False).graph
    assert [n.op_type for n in a.node] == [n.op_type for n in b.node]
    assert [(t.name, list(t.dims)) for t in a.initializer] == \
        [(t.name, list(t.dims)) for t in b.initializer]
    assert w.data_path.stat().st_size == full.data_path.stat().st_size


def _error(capsys, argv):
    assert export_main(argv) == 1
    return capsys.readouterr().err


def test_bad_directories(tmp_path, capsys):
    out = str(tmp_path / "m.onnx")
    err = _error(capsys, ["--hf", str(tmp_path / "nowhere"), "--out", out])
    assert "no such directory" in err and "nothing is downloaded" in err

    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no config.json" in _error(capsys, ["--hf", str(empty), "--out", out])

    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({"model_type": "not-a-model"}))
    assert "unknown model_type 'not-a-model'" in _error(capsys, ["--hf", str(odd), "--out", out])

    vit = tmp_path / "vit"
    transformers.ViTConfig().save_pretrained(vit)
    assert "'vit' has no causal-LM class" in _error(capsys, ["--hf", str(vit), "--out", out])

    no_weights = tmp_path / "noweights"
    tiny_config("llama").save_pretrained(no_weights)
    err = _error(capsys, ["--hf", str(no_weights), "--out", out])
    assert "no weights" in err and "--weightless" in err

    # A directory whose weights do not fit its config; the export it fails to replace stays.
    d = save_tiny("llama", tmp_path / "wide", safetensors=True)
    assert export_main(["--hf", str(d), "--out", out]) == 0
    capsys.readouterr()
    before = [open(f, "rb").read() for f in (out, out + ".data")]
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 40
    (d / "config.json").write_text(json.dumps(cfg))
    err = _error(capsys, ["--hf", str(d), "--out", out])
    assert "weight 'model.layers.0.mlp.gate_proj.weight' is [48, 32]; config.json makes it " \
           "[40, 32]" in err
    assert [open(f, "rb").read() for f in (out, out + ".data")] == before
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["m.onnx", "m.onnx.data", "empty", "odd", "vit", "noweights", "wide"])

    # --hf takes its model from the directory.
    with pytest.raises(SystemExit):
        export_main(["--hf", str(d), "--out", out, "--layers", "3"])
    assert "--layers does not go with it" in capsys.readouterr().err


def test_pickle_reader_reads_views_and_refuses_code(tmp_path):
    """A .bin tensor that is a view into a larger storage reads as the view; a pickle holding
    anything but tensors is refused without running it."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    torch.save({"a": base, "b": base[1:3, ::2], "c": base.t()}, tmp_path / "pytorch_model.bin")
    w = WeightFiles(tmp_path)
    for name, want in (("a", base), ("b", base[1:3, ::2]), ("c", base.t())):
        np.testing.assert_array_equal(w.read_f32(name), want.numpy())

    torch.save({"a": base, "f": print}, tmp_path / "evil.bin")
    assert zipfile.is_zipfile(tmp_path / "evil.bin")
    with pytest.raises(ValueError, match=r"holds a .*print, which a weights file does not"):
        WeightFiles.of_file(tmp_path / "evil.bin")


def test_error_type():
    with pytest.raises(HFDirectoryError):
        export_hf("/nonexistent/model", "/tmp/never.onnx")


def test_safetensors_reader_widens_half_types(tmp_path):
    """bf16 and f16 tensors (as save_pretrained writes a half-precision model) read as their
    float32 values, exactly; an index naming a shard outside the directory is refused."""
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(0)
    tensors = {"b": torch.randn(3, 5, generator=gen).to(torch.bfloat16),
               "h": torch.randn(7, generator=gen).to(torch.float16),
               "f": torch.randn(2, 2, generator=gen)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    w = WeightFiles(tmp_path)
    for name, t in tensors.items():
        got = w.read_f32(name)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, t.float().numpy())

    index = tmp_path / "bad" / "model.safetensors.index.json"
    index.parent.mkdir()
    index.write_text(json.dumps({"weight_map": {"b": "../model.safetensors"}}))
    with pytest.raises(ValueError, match="is not a file in"):
        WeightFiles(index.parent)
