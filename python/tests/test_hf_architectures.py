"""Hugging Face decoder architectures (transformers 4.41.2) through sl-opt and sl-run.

For each architecture, a tiny random model built from its transformers config class (see
hf_harness.py for how it is built and exported) must give PyTorch's logits under --sl-infer
(max |diff| / max |logit| <= 1e-4), train three AdamW steps with two sub-batches under --sl-train
with PyTorch's losses and step-1 gradients, and generate under --sl-generate, for prompts of
different lengths in one batch, the tokens HF `generate` gives for each prompt alone, with every
block fused in all three.

ctest runs this file with the interpreter of the venv scripts/install-deps.sh makes (transformers
4.41.2 over Debian's torch) and sets SL_REQUIRE_TRANSFORMERS=1, so that a missing transformers
fails there; elsewhere (the main suite's /usr/bin/python3) the file skips.
"""

import os
from typing import Dict, Tuple

import pytest
import torch

if os.environ.get("SL_REQUIRE_TRANSFORMERS") == "1":
    import transformers  # noqa: F401
else:
    pytest.importorskip("transformers")

from hf_harness import (HFArch, build_model, check_all, check_inference,  # noqa: E402
                        export)
from sl_helpers import check_ok  # noqa: E402

# Tracing HF code warns about every Python branch on a shape; the checks here are what count.
pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")

L = 2  # layers
_DECODER = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=L, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=64, max_position_embeddings=32,
                attention_dropout=0.0, use_cache=False)
_ROPE_FUSED = {"RMS_NORM": 2 * L + 1, "ROTARY": 2 * L, "ATTENTION": L, "SWIGLU": L}

ARCHS = [
    HFArch("llama-gqa-untied", "LlamaConfig", "LlamaForCausalLM",
           dict(_DECODER, tie_word_embeddings=False), _ROPE_FUSED),
    HFArch("llama-gqa-tied", "LlamaConfig", "LlamaForCausalLM",
           dict(_DECODER, tie_word_embeddings=True), _ROPE_FUSED),
    # Embeddings scaled by sqrt(hidden), RMSNorm with (1 + weight), GeGLU with the tanh GELU,
    # tied head. Gemma's config makes token 0 the embedding's padding_idx, whose row PyTorch
    # never updates through the lookup; an ONNX Gather has no such exception (the user guide
    # says so), so the reference here has no padding token.
    HFArch("gemma", "GemmaConfig", "GemmaForCausalLM",
           dict(_DECODER, head_dim=8, hidden_activation="gelu_pytorch_tanh", pad_token_id=None),
           {"RMS_NORM": 2 * L + 1, "ROTARY": 2 * L, "ATTENTION": L, "GELU": L}),
    HFArch("mistral", "MistralConfig", "MistralForCausalLM", dict(_DECODER), _ROPE_FUSED),
    HFArch("qwen2", "Qwen2Config", "Qwen2ForCausalLM", dict(_DECODER), _ROPE_FUSED),
    HFArch("gpt2", "GPT2Config", "GPT2LMHeadModel",
           dict(n_embd=32, n_layer=L, n_head=4, vocab_size=64, n_positions=32, resid_pdrop=0.0,
                embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False),
           {"LAYER_NORM": 2 * L + 1, "ATTENTION": L, "GELU": L},
           # The key bias shifts every score of a query alike, which softmax ignores.
           zero_grad_slices={f"transformer.h.{i}.attn.c_attn.bias": (32, 64) for i in range(L)}),
    # baddbmm scales 3-D scores and adds beta * zeros before the reshape to 4-D; rotary on the
    # first half of each head only (rotary_pct=0.5); parallel attention and MLP.
    HFArch("gpt-neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
           dict(hidden_size=32, intermediate_size=48, num_hidden_layers=L, num_attention_heads=4,
                vocab_size=64, max_position_embeddings=32, rotary_pct=0.5, attention_dropout=0.0,
                hidden_dropout=0.0, use_cache=False),
           {"LAYER_NORM": 2 * L + 1, "ROTARY": 2 * L, "ATTENTION": L, "GELU": L}),
    # Positions from the cumsum of the all-ones mask, learned with an offset of 2; q scaled before
    # the 3-D matmul; ReLU MLP. No pad token: torch gives the embedding row of padding_idx no
    # gradient, which ONNX cannot express (the exporter warns), and the data here has no padding.
    HFArch("opt", "OPTConfig", "OPTForCausalLM",
           dict(hidden_size=32, ffn_dim=48, num_hidden_layers=L, num_attention_heads=4,
                vocab_size=64, max_position_embeddings=32, word_embed_proj_dim=32, dropout=0.0,
                attention_dropout=0.0, pad_token_id=None, use_cache=False),
           {"LAYER_NORM": 2 * L + 1, "ATTENTION": L},
           # The key bias shifts every score of a query alike, which softmax ignores.
           zero_grad_slices={f"model.decoder.layers.{i}.self_attn.k_proj.bias": (0, 32)
                             for i in range(L)}),
    # Interleaved rotary (pairs 2i, 2i+1) on the first rotary_dim of each head, its sin/cos
    # tables gathered from a sinusoidal buffer and repeat_interleave'd (a Loop, unrolled while
    # importing); scores divided by the scale after the causal Where; parallel attention and
    # MLP under one LayerNorm; an lm_head with a bias.
    HFArch("gpt-j", "GPTJConfig", "GPTJForCausalLM",
           dict(n_embd=32, n_layer=L, n_head=4, rotary_dim=4, vocab_size=64, n_positions=32,
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False),
           {"LAYER_NORM": L + 1, "ROTARY": 2 * L, "ATTENTION": L, "GELU": L}),
    # ALiBi bias added to the 3-D scores by baddbmm, an inverted causal mask, k^T a 4-D transpose
    # merged to [B * H, D, T], GELU written as x * (1 + 0.044715 * x * x). The bias becomes
    # sl.attention's ALiBi slopes, which the decode kernel applies at each token's position.
    HFArch("bloom", "BloomConfig", "BloomForCausalLM",
           dict(hidden_size=32, n_layer=L, n_head=4, vocab_size=64, hidden_dropout=0.0,
                attention_dropout=0.0, use_cache=False),
           {"LAYER_NORM": 2 * L + 2, "ATTENTION": L, "GELU": L}),
]

# The other decoder-only causal LMs of transformers 4.41.2 that torch 1.13 exports (the user
# guide's table says which classes are left out and why).
_NO_DROPOUT = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
_LN_ROPE_GELU = {"LAYER_NORM": 2 * L + 1, "ROTARY": 2 * L, "ATTENTION": L, "GELU": L}
_LN_GELU = {"LAYER_NORM": 2 * L + 1, "ATTENTION": L, "GELU": L}
# Parallel attention and MLP from one norm: one LayerNorm per block.
_PARALLEL = {"LAYER_NORM": L + 1, "ROTARY": 2 * L, "ATTENTION": L, "GELU": L}


def _key_bias(fmt: str, size: int = 32) -> Dict[str, Tuple[int, int]]:
    """The key bias shifts every score of a query alike, which softmax ignores."""
    return {fmt.format(i): (0, size) for i in range(L)}


ARCHS += [
    # Partial rotary (half of each head), parallel attention and MLP, gelu_new.
    HFArch("phi", "PhiConfig", "PhiForCausalLM",
           dict(_DECODER, partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0),
           _PARALLEL),
    # Fused qkv and gate_up projections, sliced apart.
    HFArch("phi3", "Phi3Config", "Phi3ForCausalLM",
           dict(_DECODER, original_max_position_embeddings=32, resid_pdrop=0.0, embd_pdrop=0.0,
                pad_token_id=None), _ROPE_FUSED),
    # LayerNorm, partial rotary, biased q/k/v, SwiGLU.
    HFArch("stablelm", "StableLmConfig", "StableLmForCausalLM",
           dict(_DECODER, partial_rotary_factor=0.5, use_qkv_bias=True, hidden_dropout=0.0),
           {"LAYER_NORM": 2 * L + 1, "ROTARY": 2 * L, "ATTENTION": L, "SWIGLU": L}),
    # Rotary Falcon (alibi=False): one key/value head, parallel attention and MLP.
    HFArch("falcon", "FalconConfig", "FalconForCausalLM",
           dict(hidden_size=32, num_hidden_layers=L, num_attention_heads=4, vocab_size=64,
                max_position_embeddings=32, alibi=False, hidden_dropout=0.0,
                attention_dropout=0.0, use_cache=False), _PARALLEL),
    # Multi-head GPTBigCode (multi_query=False; see the user guide for multi-query).
    HFArch("gpt-bigcode", "GPTBigCodeConfig", "GPTBigCodeForCausalLM",
           dict(vocab_size=64, n_positions=32, n_embd=32, n_layer=L, n_head=4, n_inner=48,
                multi_query=False, use_cache=False, **_NO_DROPOUT), _LN_GELU),
    # Unscaled scores; a global and a local layer, whose window (256) covers every position here.
    HFArch("gpt-neo", "GPTNeoConfig", "GPTNeoForCausalLM",
           dict(vocab_size=64, max_position_embeddings=32, hidden_size=32, num_layers=L,
                num_heads=4, intermediate_size=48, attention_types=[[["global", "local"], 1]],
                embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0, use_cache=False),
           _LN_GELU),
    HFArch("starcoder2", "Starcoder2Config", "Starcoder2ForCausalLM",
           dict(_DECODER, residual_dropout=0.0, embedding_dropout=0.0), _LN_ROPE_GELU),
    # LayerNorm over each head's queries and keys, partial rotary, squared-ReLU MLP.
    HFArch("persimmon", "PersimmonConfig", "PersimmonForCausalLM",
           dict(_DECODER, partial_rotary_factor=0.5, qk_layernorm=True, hidden_dropout=0.0,
                pad_token_id=None),
           {"LAYER_NORM": 4 * L + 1, "ROTARY": 2 * L, "ATTENTION": L}),
    HFArch("gpt-neox-japanese", "GPTNeoXJapaneseConfig", "GPTNeoXJapaneseForCausalLM",
           dict(hidden_size=32, num_hidden_layers=L, num_attention_heads=4, vocab_size=64,
                max_position_embeddings=32, intermediate_multiple_size=1, attention_dropout=0.0,
                hidden_dropout=0.0, use_cache=False), _LN_ROPE_GELU),
    # Rotary on the first rotary_dim features of each head, parallel attention and MLP.
    HFArch("codegen", "CodeGenConfig", "CodeGenForCausalLM",
           dict(vocab_size=64, n_positions=32, n_ctx=32, n_embd=32, n_layer=L, n_head=4,
                rotary_dim=4, n_inner=48, use_cache=False, **_NO_DROPOUT), _PARALLEL),
    # Sinusoidal positions, scaled embeddings.
    HFArch("xglm", "XGLMConfig", "XGLMForCausalLM",
           dict(vocab_size=64, max_position_embeddings=32, d_model=32, ffn_dim=48, num_layers=L,
                attention_heads=4, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                layerdrop=0.0, pad_token_id=None, use_cache=False), _LN_GELU,
           zero_grad_slices=_key_bias("model.layers.{}.self_attn.k_proj.bias")),
    HFArch("biogpt", "BioGptConfig", "BioGptForCausalLM",
           dict(vocab_size=64, hidden_size=32, num_hidden_layers=L, num_attention_heads=4,
                intermediate_size=48, max_position_embeddings=32, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0, activation_dropout=0.0, layerdrop=0.0,
                pad_token_id=None, use_cache=False), _LN_GELU,
           zero_grad_slices=_key_bias("biogpt.layers.{}.self_attn.k_proj.bias")),
    # Post-norm blocks, learned positions, w * b + -1e4 * (1 - b) masking, no KV cache in HF.
    HFArch("openai-gpt", "OpenAIGPTConfig", "OpenAIGPTLMHeadModel",
           dict(vocab_size=64, n_positions=32, n_embd=32, n_layer=L, n_head=4, **_NO_DROPOUT),
           {"LAYER_NORM": 2 * L, "ATTENTION": L, "GELU": L}),
    # Sinusoidal positions, scaled embeddings, an additive -1e4 mask, ReLU MLP.
    HFArch("ctrl", "CTRLConfig", "CTRLLMHeadModel",
           dict(vocab_size=64, n_positions=32, n_embd=32, dff=48, n_layer=L, n_head=4,
                resid_pdrop=0.0, embd_pdrop=0.0, use_cache=False),
           {"LAYER_NORM": 2 * L + 1, "ATTENTION": L},
           zero_grad_slices=_key_bias("transformer.h.{}.multi_head_attention.Wk.bias")),
    # ALiBi bias added to the scores, no position embeddings, LayerNorm without bias.
    HFArch("mpt", "MptConfig", "MptForCausalLM",
           dict(vocab_size=64, max_seq_len=32, d_model=32, n_layers=L, n_heads=4,
                expansion_ratio=2, resid_pdrop=0.0, emb_pdrop=0.0, use_cache=False),
           {"LAYER_NORM": 2 * L + 1, "ATTENTION": L, "GELU": L}),
]


@pytest.mark.parametrize("arch", ARCHS, ids=[a.name for a in ARCHS])
def test_architecture(sl_tools, tmp_path, arch):
    check_all(arch, sl_tools, tmp_path)


def test_unfused_schedule_fails_the_fusion_check(sl_tools, tmp_path):
    """The fusion assertion can fail: the same model compiled with fuse=false runs its softmax,
    norms and activations op by op, and assert_fused refuses that report."""
    import numpy as np

    from hf_harness import assert_fused, build_model, export, ops_of
    from sl_helpers import check_ok

    arch = next(a for a in ARCHS if a.name == "llama-gqa-untied")
    export(build_model(arch), tmp_path / "model.onnx", training=False)
    np.save(tmp_path / "ids.npy", np.zeros((1, 4), dtype=np.int64))
    check_ok(sl_tools.compile(tmp_path / "model.onnx", tmp_path / "m.slsched", batch=1, seq=4,
                              fuse=False))
    check_ok(sl_tools.run(tmp_path / "m.slsched", tmp_path / "ids.npy", tmp_path / "y.npy",
                          tmp_path / "report.json", input_name="input_ids",
                          output_name="logits"))
    with pytest.raises(AssertionError, match="unfused kernels ran"):
        assert_fused(arch, ops_of(tmp_path / "report.json"), "inference", exact=True)


def test_position_bias_that_is_not_alibi_refuses_generation(sl_tools, tmp_path, monkeypatch):
    """A BLOOM whose position bias is the square of ALiBi's (slope^2 * key^2, not a line in the
    key position) fuses it as sl.attention's additive mask: inference is fused and exact, but a
    decoding step cannot compute such a bias from the cache, and --sl-generate says so, naming
    the op."""
    from transformers.models.bloom import modeling_bloom

    alibi = modeling_bloom.build_alibi_tensor
    monkeypatch.setattr(modeling_bloom, "build_alibi_tensor",
                        lambda mask, heads, dtype: alibi(mask, heads, dtype) ** 2)
    arch = next(a for a in ARCHS if a.name == "bloom")
    model = build_model(arch)
    onnx_path = tmp_path / "model.onnx"
    export(model, onnx_path, training=False)
    check_inference(arch, model, onnx_path, sl_tools, tmp_path)
    proc = sl_tools._run([sl_tools.sl_opt, onnx_path, "--sl-generate=batch=2 max-prompt-len=4 "
                          "max-new-tokens=2", "-o", tmp_path / "gen.slsched"])
    assert proc.returncode != 0
    assert "sl-split-generation: sl.attention adds a mask" in proc.stderr, proc.stderr
    assert "neither causal masking nor an ALiBi position bias" in proc.stderr, proc.stderr


def test_gpt_neo_local_window_shorter_than_the_cache_is_refused(sl_tools, tmp_path):
    """GPT-Neo's local layer keeps the last window_size keys: causal up to that many positions,
    so it fuses at a short prompt, but decoding past the window would attend to keys the model
    masks. sl-opt refuses a cache longer than the window and accepts one within it."""
    arch = next(a for a in ARCHS if a.name == "gpt-neo")
    local = HFArch("gpt-neo-window4", arch.config, arch.model, dict(arch.kwargs, window_size=4),
                   arch.fused)
    export(build_model(local), tmp_path / "model.onnx", training=False)

    def generate(prompt, new):
        return sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                              f"--sl-generate=batch=2 max-prompt-len={prompt} "
                              f"max-new-tokens={new}", "-o", tmp_path / "gen.slsched"])

    proc = generate(3, 2)
    assert proc.returncode != 0
    assert ("/transformer/h.1/attn/attention/Softmax" in proc.stderr and
            "causal at the prompt length but not over all 5 positions" in proc.stderr), proc.stderr
    check_ok(generate(2, 2))
