"""Hugging Face models of the peer drivers' shapes (common.SHAPES), random weights, no hub.

Works with transformers 4.41 (here) and 5.x (the GPU image): only configuration keys that both
accept are passed, and the attention is PyTorch's SDPA in both (eager on PyTorch 1.x).
"""

from __future__ import annotations

from typing import Any, Dict


def llama_config(s: Dict[str, Any]):
    import transformers

    if s["arch"] != "llama":
        raise SystemExit(f"{s['name']} is not a LLaMA shape")
    return transformers.LlamaConfig(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"], max_position_embeddings=s["max_positions"],
        rms_norm_eps=s["rms_norm_eps"], tie_word_embeddings=False, use_cache=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    # No padding row: LLaMA 2 has no pad token, and transformers 5 zeroes the padding row at
    # initialisation by indexing the weight, which under deepspeed.zero.Init is an empty shard
    # (IndexError on the H100, 2026-11-26).


def decoder_layer_class():
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    return LlamaDecoderLayer


def build_llama(s: Dict[str, Any]):
    """LlamaForCausalLM of shape `s` in float32 on the CPU (or on whatever a surrounding
    context, such as deepspeed.zero.Init, places it), weights as transformers initialises them
    (normal, std initializer_range) from torch's global RNG, SDPA attention (eager before
    PyTorch 2)."""
    import transformers

    config = llama_config(s)
    config._attn_implementation = attention_implementation()
    return transformers.LlamaForCausalLM(config)


def attention_implementation() -> str:
    """PyTorch's SDPA (flash/cuDNN/memory-efficient kernels), or "eager" where this PyTorch
    predates it (1.13, here: only --tiny runs there)."""
    import torch.nn.functional as F

    return "sdpa" if hasattr(F, "scaled_dot_product_attention") else "eager"


def count_parameters(model) -> int:
    # ZeRO-3 partitions parameters to empty tensors and keeps the full size in ds_numel.
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
