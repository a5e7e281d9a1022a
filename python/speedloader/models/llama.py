"""A LLaMA-style decoder, written the way HuggingFace transformers (4.28-4.34, torch 1.13 era)
writes ``LlamaForCausalLM``, so that torch.onnx.export produces what it produces for real LLaMAs.

* ``LlamaRMSNorm``: ``weight * (x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))``.
* Rotary embeddings: ``cos_cached`` / ``sin_cached`` are registered buffers ``[1, 1, max, d]``,
  sliced to the sequence length and indexed with ``position_ids = arange(seq)``;
  ``q * cos + rotate(q) * sin``. ``rope="half"`` is HF's rotate-half (pairs (i, i + d/2));
  ``rope="interleaved"`` is the GPT-J / Meta pairing (2i, 2i + 1): the caches hold each
  frequency twice in a row and the rotation is ``rotate_every_two`` (strided slices, stack,
  flatten).
* Attention written out: ``q @ k^T / sqrt(d) + causal_mask``, clamped at ``finfo.min``, softmax
  in float32, ``@ v``; grouped-query attention (``kv_heads < heads``) repeats k/v with HF's
  ``repeat_kv`` (expand + reshape). The causal mask is built in ``forward`` as HF's
  ``_make_causal_mask`` does: ``full((S, S), finfo.min)``, ``masked_fill`` with
  ``arange < (arange + 1).view(S, 1)``, then ``[None, None].expand(B, 1, S, S)``.
* SwiGLU MLP ``down(silu(gate(x)) * up(x))``; no biases anywhere; final RMSNorm; ``lm_head``
  untied (default) or tied to ``embed_tokens``.

Parameter names are HF's: ``model.embed_tokens.weight``,
``model.layers.<i>.self_attn.q_proj.weight`` (k_proj, v_proj, o_proj),
``model.layers.<i>.mlp.gate_proj.weight`` (up_proj, down_proj),
``model.layers.<i>.input_layernorm.weight``, ``model.layers.<i>.post_attention_layernorm.weight``,
``model.norm.weight``, ``lm_head.weight``. The rotary caches are non-persistent buffers: the
exporter writes them as Constant nodes, not initializers. EXPORTS.md lists what the exporter
makes of all of it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import ClassVar, Tuple

import torch
from torch import nn

from . import Arch, register, register_preset
from . import transformer as tf

ROPE_STYLES = ("half", "interleaved")


@dataclass
class LlamaConfig(tf.DecoderConfig):
    rope: str = "half"
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6

    family: ClassVar[str] = "llama"
    default_tie_embeddings: ClassVar[bool] = False
    supports_gqa: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rope not in ROPE_STYLES:
            raise ValueError(f"rope must be one of {', '.join(ROPE_STYLES)}, got {self.rope!r}")
        if self.head_dim % 2:
            raise ValueError(f"rotary embeddings need an even head dimension, got "
                             f"hidden/heads = {self.head_dim}")


class LlamaRMSNorm(tf.RMSNormLike):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, max_position_embeddings: int, base: float,
                 interleaved: bool) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.max_seq_len_cached = max_position_embeddings
        t = torch.arange(self.max_seq_len_cached, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        if interleaved:  # GPT-J / Meta: each frequency twice in a row, pairs (2i, 2i + 1)
            emb = torch.repeat_interleave(freqs, 2, dim=-1)
        else:  # HF: the frequencies twice over, pairs (i, i + d/2)
            emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, x: torch.Tensor, seq_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
        # x: [bs, num_attention_heads, seq_len, head_size]
        return (
            self.cos_cached[:, :, :seq_len, ...].to(dtype=x.dtype),
            self.sin_cached[:, :, :seq_len, ...].to(dtype=x.dtype),
        )


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotates half the hidden dims of the input (HF LLaMA)."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    """Rotates each pair (2i, 2i + 1) (HF GPT-J, Meta's LLaMA)."""
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids, rotate):
    # The first two dimensions of cos and sin are always 1, so we can `squeeze` them.
    cos = cos.squeeze(1).squeeze(0)  # [seq_len, dim]
    sin = sin.squeeze(1).squeeze(0)  # [seq_len, dim]
    cos = cos[position_ids].unsqueeze(1)  # [bs, 1, seq_len, dim]
    sin = sin[position_ids].unsqueeze(1)  # [bs, 1, seq_len, dim]
    q_embed = (q * cos) + (rotate(q) * sin)
    k_embed = (k * cos) + (rotate(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[batch, kv_heads, seq, d] -> [batch, kv_heads * n_rep, seq, d] (HF's torch.repeat_interleave
    over dim 1, written as expand + reshape)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(
        batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaMLP(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden, config.ffn, bias=False)
        self.up_proj = nn.Linear(config.hidden, config.ffn, bias=False)
        self.down_proj = nn.Linear(config.ffn, config.hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.hidden_size = config.hidden
        self.num_heads = config.heads
        self.head_dim = config.head_dim
        self.num_key_value_heads = config.kv_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim,
                                bias=False)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim,
                                bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, config.max_positions,
                                               config.rope_theta, config.rope == "interleaved")
        self.rotate = rotate_every_two if config.rope == "interleaved" else rotate_half

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                position_ids: torch.Tensor) -> torch.Tensor:
        bsz, q_len, _ = hidden_states.size()

        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads,
                                     self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads,
                                         self.head_dim).transpose(1, 2)

        kv_seq_len = key_states.shape[-2]
        cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin,
                                                        position_ids, self.rotate)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(
            self.head_dim)
        attn_weights = attn_weights + attention_mask
        attn_weights = torch.max(attn_weights,
                                 torch.tensor(torch.finfo(attn_weights.dtype).min))

        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(
            query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        return self.o_proj(attn_output)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask, position_ids):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask, position_ids)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


def _make_causal_mask(input_ids_shape: torch.Size, dtype: torch.dtype,
                      device: torch.device) -> torch.Tensor:
    """HF's causal mask: 0 on and below the diagonal, finfo.min above; [bsz, 1, tgt, tgt]."""
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)


class LlamaModel(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab, config.hidden)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config) for _ in range(config.layers))
        self.norm = LlamaRMSNorm(config.hidden, eps=config.rms_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        batch_size, seq_length = input_ids.shape
        position_ids = torch.arange(0, seq_length, dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).view(-1, seq_length)

        inputs_embeds = self.embed_tokens(input_ids)
        attention_mask = _make_causal_mask((batch_size, seq_length), inputs_embeds.dtype,
                                           inputs_embeds.device)
        hidden_states = inputs_embeds
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, attention_mask, position_ids)
        return self.norm(hidden_states)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False)
        tf.init_parameters(self)
        if config.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden_states = self.model(input_ids)
        logits = self.lm_head(hidden_states)
        return logits.float()


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    tf.add_arguments(parser)
    g = parser.add_argument_group("llama options (--arch llama)")
    g.add_argument("--rope", choices=ROPE_STYLES, default=None,
                   help="rotary pairing: half = HF rotate_half, dims (i, i + d/2); interleaved = "
                        "GPT-J/Meta, dims (2i, 2i + 1) (default: half)")


def _config_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> LlamaConfig:
    kw = tf.common_config_kwargs(args, parser, "llama")
    if args.activation not in (None, "silu"):
        parser.error(f"argument --activation: --arch llama has a SwiGLU MLP (silu); "
                     f"got {args.activation!r}")
    if args.fused_qkv is not None:
        parser.error("--fused-qkv/--no-fused-qkv apply to --arch gpt2 and opt only")
    return LlamaConfig(rope=args.rope or "half", **kw)


# Real LLaMA sizes (https://arxiv.org/abs/2302.13971 table 2; LLaMA-2's config.json): multi-head
# attention (kv_heads = heads), head_dim 128, rotate-half rotary as HF writes it.
register_preset("llama-30b", "llama", layers=60, hidden=6656, heads=52, ffn=17920, vocab=32000,
                max_positions=2048, rms_norm_eps=1e-6)
register_preset("llama2-7b", "llama", layers=32, hidden=4096, heads=32, ffn=11008, vocab=32000,
                max_positions=4096, rms_norm_eps=1e-5)
register_preset("llama2-13b", "llama", layers=40, hidden=5120, heads=40, ffn=13824, vocab=32000,
                max_positions=4096, rms_norm_eps=1e-5)

register(Arch(
    name="llama",
    config_cls=LlamaConfig,
    build=LlamaForCausalLM,
    make_input=tf.make_input,
    dynamic_axes=tf.dynamic_axes,
    input_ranks=(2,),
    add_arguments=_add_arguments,
    config_from_args=_config_from_args,
    description="LLaMA decoder (RMSNorm, rotary, MHA/GQA, SwiGLU); input_ids [batch, seq] -> "
                "logits [batch, seq, vocab]",
    input_name=tf.INPUT_NAME,
    output_name=tf.OUTPUT_NAME,
    min_opset=tf.MIN_OPSET,
))
