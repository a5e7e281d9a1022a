"""Hugging Face Optimum's ONNX exports (optimum 1.20.0) through sl-opt and sl-run.

Optimum's decoder exports take `attention_mask` and `position_ids` beside `input_ids` and, with
`text-generation-with-past`, `past_key_values.*`; it folds constants, so its weights are named
`onnx::MatMul_N`. For a tiny model directory (`save_pretrained` of hf_harness's model, nothing
downloaded) exported with and without past, each export must:

- infer a left-padded batch with the mask and positions given at run time equal to PyTorch on
  the real tokens, and, with them bound (`bind-inputs=`), equal to PyTorch, every attention
  fused either way (a run-time padding mask is the fused attention's mask);
- train three AdamW steps with PyTorch's losses (--sl-train binds the mask, positions and past);
- generate greedily what HF `generate` does, attention fused (hf_harness.check_generation).

Also: axes named `b`/`s` and dynamic_axes given as a list (torch's `input_ids_dynamic_axes_1`)
bind. Optimum 1.20 fixes dynamic axes with onnxruntime after the export; without onnxruntime
that step is skipped here (it only renames output axes it finds static).
"""

import os
import sys

import numpy as np
import pytest
import torch

if os.environ.get("SL_REQUIRE_TRANSFORMERS") == "1":
    import optimum  # noqa: F401
else:
    pytest.importorskip("optimum")

from hf_harness import (TRAIN_BATCH, TRAIN_SEQ, TRAIN_STEPS, LR, WD, SUB_BATCHES,  # noqa: E402
                        LogitsOnly, HFArch, build_model, check_generation, ops_of)
from sl_helpers import check_ok  # noqa: E402
from test_e2e_training import read_safetensors, torch_training  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")

L = 2
_DECODER = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=L, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=64, max_position_embeddings=32,
                attention_dropout=0.0, use_cache=False)
_ROPE_FUSED = {"RMS_NORM": 2 * L + 1, "ROTARY": 2 * L, "ATTENTION": L, "SWIGLU": L}
ARCHS = [
    HFArch("llama", "LlamaConfig", "LlamaForCausalLM", dict(_DECODER), _ROPE_FUSED),
    HFArch("mistral", "MistralConfig", "MistralForCausalLM", dict(_DECODER), _ROPE_FUSED),
    HFArch("qwen2", "Qwen2Config", "Qwen2ForCausalLM", dict(_DECODER), _ROPE_FUSED),
    HFArch("gpt2", "GPT2Config", "GPT2LMHeadModel",
           dict(n_embd=32, n_layer=L, n_head=4, vocab_size=64, n_positions=32, resid_pdrop=0.0,
                embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False),
           {"LAYER_NORM": 2 * L + 1, "ATTENTION": L, "GELU": L}),
]
FORMS = {"no-past": "text-generation", "past": "text-generation-with-past"}


def optimum_export(model, tmp, task, constant_folding=True):
    from optimum.exporters.onnx import main_export
    from optimum.exporters.onnx.base import OnnxConfig

    directory, out = tmp / "hf", tmp / ("onnx" if constant_folding else "onnx-unfolded")
    if not directory.exists():
        model.save_pretrained(directory)
    fix = OnnxConfig.fix_dynamic_axes
    OnnxConfig.fix_dynamic_axes = lambda self, *args, **kwargs: None  # needs onnxruntime
    try:
        main_export(str(directory), output=str(out), task=task, do_validation=False,
                    do_constant_folding=constant_folding)
    finally:
        OnnxConfig.fix_dynamic_axes = fix
    return out / "model.onnx"


def check_padded_inference(arch, model, onnx_path, tools, tmp, batch=2, seq=7):
    """Left padding: the mask and HF's positions (cumsum of the mask) given at run time."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, arch.vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[1, :3] = 0
    ids[1, :3] = 0
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int64)
    for name, value in (("ids", ids), ("mask", mask), ("pos", positions)):
        np.save(tmp / f"{name}.npy", value)
    sched, report = tmp / "padded.slsched", tmp / "padded.json"
    check_ok(tools._run([tools.sl_opt, onnx_path, f"--sl-infer=batch={batch} seq={seq}", "-o",
                         sched]))
    check_ok(tools._run([tools.sl_run, sched, "--input", f"input_ids={tmp / 'ids.npy'}",
                         "--input", f"attention_mask={tmp / 'mask.npy'}",
                         "--input", f"position_ids={tmp / 'pos.npy'}",
                         "--output", f"logits={tmp / 'logits.npy'}", "--report", report]))
    with torch.no_grad():
        want = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                     position_ids=torch.from_numpy(positions), use_cache=False).logits.numpy()
    got = np.load(tmp / "logits.npy")
    real = mask.astype(bool)
    rel = float(np.abs(got[real] - want[real]).max() / np.abs(want[real]).max())
    assert rel <= 1e-4, f"{arch.name}: padded logits differ by {rel:.3g} of the largest logit"
    ops = ops_of(report)
    for kind, count in arch.fused.items():
        assert ops.get(kind, 0) == count, f"{arch.name}: padded: {kind}: {ops}"

    # Without padding, the mask and positions bound: every attention fuses.
    sched, report = tmp / "bound.slsched", tmp / "bound.json"
    check_ok(tools._run([tools.sl_opt, onnx_path,
                         f"--sl-infer=batch={batch} seq={seq} "
                         "bind-inputs=attention_mask,position_ids", "-o", sched]))
    check_ok(tools._run([tools.sl_run, sched, "--input", f"input_ids={tmp / 'ids.npy'}",
                         "--output", f"logits={tmp / 'logits.npy'}", "--report", report]))
    with torch.no_grad():
        want = LogitsOnly(model)(torch.from_numpy(ids)).numpy()
    got = np.load(tmp / "logits.npy")
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert rel <= 1e-4, f"{arch.name}: logits differ by {rel:.3g} of the largest logit"
    ops = ops_of(report)
    for kind, count in arch.fused.items():
        assert ops.get(kind, 0) == count, f"{arch.name}: {kind}: {ops}"


def check_train_losses(arch, onnx_path, tools, tmp):
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, arch.vocab, size=TRAIN_BATCH * TRAIN_SEQ * TRAIN_STEPS + 7,
                          dtype=np.uint16)
    data = tmp / "tokens.bin"
    tokens.astype("<u2").tofile(data)
    sched, report = tmp / "train.slsched", tmp / "train.json"
    check_ok(tools._run([tools.sl_opt, onnx_path,
                         f"--sl-train=batch={TRAIN_BATCH} seq={TRAIN_SEQ} "
                         f"num-sub-batches={SUB_BATCHES}", "-o", sched]))
    ckpt = tmp / "trained.safetensors"
    check_ok(tools._run([tools.sl_run, sched, "--data", data, "--steps", TRAIN_STEPS, "--lr", LR,
                         "--weight-decay", WD, "--report", report, "--save", ckpt]))
    import json
    with open(report) as f:
        rep = json.load(f)
    model = build_model(arch).train()
    want = torch_training(LogitsOnly(model), tokens, arch.vocab,
                          batch=TRAIN_BATCH, seq=TRAIN_SEQ, steps=TRAIN_STEPS, lr=LR, wd=WD)
    np.testing.assert_allclose(rep["train"]["losses"], want, rtol=1e-4,
                               err_msg=f"{arch.name}: losses")
    assert rep["ops"].get("ATTENTION", {}).get("count", 0) > 0, rep["ops"]

    # The trained weights are PyTorch's, under PyTorch's names once the folded ones
    # (`onnx::MatMul_N`, transposed) are mapped back from the MatMul nodes' module scopes.
    named = tmp / "trained-pytorch-names.safetensors"
    check_ok(tools._run([sys.executable, "-m", "speedloader.pytorch_names", onnx_path,
                         "--checkpoint", ckpt, "--out", named]))
    got = read_safetensors(named)
    assert not any(n.startswith("onnx::") for n in got), sorted(got)
    if any(n.startswith("onnx::") for n in read_safetensors(ckpt)):
        # The renamed checkpoint goes back into the model directory's export; the raw one is
        # refused with the way to rename it.
        from speedloader.hf import HFDirectoryError, export_hf
        with pytest.raises(HFDirectoryError, match="speedloader.pytorch_names"):
            export_hf(tmp / "hf", tmp / "raw" / "model.onnx", weights=ckpt)
        back = export_hf(tmp / "hf", tmp / "back" / "model.onnx", weights=named)
        import onnx
        from onnx import numpy_helper
        inits = {t.name: numpy_helper.to_array(t)
                 for t in onnx.load(str(back.onnx_path)).graph.initializer}
        name = "model.layers.0.self_attn.k_proj.weight"
        np.testing.assert_array_equal(inits[name], got[name])
    for name, param in model.named_parameters():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue  # one tensor with the embedding (exported without folding, see above)
        expected = param.detach().numpy()
        assert name in got, f"{arch.name}: {name} not in the renamed checkpoint {sorted(got)}"
        assert got[name + ".adam_m"].shape == expected.shape, name
        key_bias = _key_bias_rows(arch, name, expected.shape[0])
        if key_bias is not None:
            # The key bias shifts every score of a query alike, which softmax ignores: its true
            # gradient is zero, both sides see rounding noise, and AdamW turns noise into steps
            # of about lr. Only bound it.
            np.testing.assert_array_less(np.abs(got[name][key_bias] - expected[key_bias]),
                                         2 * LR * TRAIN_STEPS + 1e-6)
            keep = np.ones(expected.shape[0], bool)
            keep[key_bias] = False
            got[name], expected = got[name][keep], expected[keep]
        # AdamW's steps depend on ratios of gradients, which rounding moves where a gradient is
        # near zero: allow 1% of the largest total step (a wrong or untransposed mapping is off by
        # the weights' own size, ~0.1).
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=0.01 * LR * TRAIN_STEPS,
                                   err_msg=f"{arch.name}: {name}")


def _key_bias_rows(arch, name, rows):
    """The rows of parameter `name` that are a key projection's bias, or None."""
    if name.endswith("self_attn.k_proj.bias"):
        return slice(0, rows)
    if name.endswith("attn.c_attn.bias"):  # GPT-2: q, k, v biases side by side
        return slice(rows // 3, 2 * rows // 3)
    return None


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("arch", ARCHS, ids=[a.name for a in ARCHS])
def test_optimum_export(sl_tools, tmp_path, arch, form):
    model = build_model(arch)
    onnx_path = optimum_export(model, tmp_path, FORMS[form])
    check_padded_inference(arch, model, onnx_path, sl_tools, tmp_path)
    check_generation(arch, model, onnx_path, sl_tools, tmp_path)
    if model.config.tie_word_embeddings:
        # Constant folding writes the tied head as a transposed copy, a second parameter that
        # trains apart from the embedding; `--no-constant-folding` keeps one (the user guide).
        onnx_path = optimum_export(model, tmp_path, FORMS[form], constant_folding=False)
    check_train_losses(arch, onnx_path, sl_tools, tmp_path)


def test_opt_positions_from_a_run_time_mask(sl_tools, tmp_path):
    """OPT's export takes no position_ids: its learned positions are computed in the graph as the
    running sum of the attention mask (CumSum). With the mask given at run time that sum is a
    CUMSUM kernel, and a left-padded batch gives PyTorch's logits at the real tokens."""
    arch = HFArch("opt", "OPTConfig", "OPTForCausalLM",
                  dict(hidden_size=32, ffn_dim=48, num_hidden_layers=L, num_attention_heads=4,
                       vocab_size=64, max_position_embeddings=32, word_embed_proj_dim=32,
                       dropout=0.0, attention_dropout=0.0, pad_token_id=None, use_cache=False),
                  {})
    model = build_model(arch)
    onnx_path = optimum_export(model, tmp_path, FORMS["no-past"])
    batch, seq = 2, 7
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 64, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[1, :3] = 0
    ids[1, :3] = 0
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "mask.npy", mask)
    sched, report = tmp_path / "opt.slsched", tmp_path / "opt.json"
    check_ok(sl_tools._run([sl_tools.sl_opt, onnx_path, f"--sl-infer=batch={batch} seq={seq}",
                            "-o", sched]))
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--input", f"input_ids={tmp_path / 'ids.npy'}",
                            "--input", f"attention_mask={tmp_path / 'mask.npy'}",
                            "--output", f"logits={tmp_path / 'logits.npy'}", "--report", report]))
    with torch.no_grad():
        want = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                     use_cache=False).logits.numpy()
    got = np.load(tmp_path / "logits.npy")
    real = mask.astype(bool)
    rel = float(np.abs(got[real] - want[real]).max() / np.abs(want[real]).max())
    assert rel <= 1e-4, f"padded OPT logits differ by {rel:.3g} of the largest logit"
    assert ops_of(report).get("CUMSUM") == 1, ops_of(report)


@pytest.mark.parametrize("axes", ["named-b-s", "list"])
def test_axes_bind_whatever_their_names(sl_tools, tmp_path, axes):
    """Batch and sequence come from input_ids' dimensions, not from their names."""
    arch = ARCHS[0]
    model = build_model(arch)
    ids = torch.zeros((2, 5), dtype=torch.int64)
    dynamic = ({"input_ids": {0: "b", 1: "s"}, "logits": {0: "b", 1: "s"}}
               if axes == "named-b-s" else {"input_ids": [0, 1], "logits": [0, 1]})
    path = tmp_path / "model.onnx"
    torch.onnx.export(LogitsOnly(model), (ids,), str(path), input_names=["input_ids"],
                      output_names=["logits"], dynamic_axes=dynamic, opset_version=17,
                      do_constant_folding=False)
    import onnx
    dims = [d.dim_param for d in onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim]
    assert dims == (["b", "s"] if axes == "named-b-s"
                    else ["input_ids_dynamic_axes_1", "input_ids_dynamic_axes_2"]), dims
    check_generation(arch, model, path, sl_tools, tmp_path)
