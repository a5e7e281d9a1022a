"""GPT-2 and OPT decoders, written the way HuggingFace transformers (4.25-4.34, torch 1.13 era)
writes ``GPT2LMHeadModel`` and ``OPTForCausalLM``, so that torch.onnx.export produces what it
produces for the real models. Both: pre-norm blocks with ``nn.LayerNorm`` (weight and bias), learned
positional embeddings, biases on every projection, a final LayerNorm, ``lm_head`` tied to the token
embedding by default.

GPT-2 (``--arch gpt2``), as in ``modeling_gpt2.py``:

* projections are HF's ``Conv1D`` (weight [in, out], ``addmm`` on the input flattened to 2-D:
  exports as ``Gemm`` between ``Reshape``s);
* ``c_attn`` computes q, k and v at once and ``.split(hidden, dim=2)`` separates them
  (``--fused-qkv``, the default; ``--no-fused-qkv`` has three Conv1Ds ``q_proj``/``k_proj``/
  ``v_proj`` instead);
* heads split with ``view`` + ``permute``; ``q @ k^T / tensor(sqrt(d))``; the causal mask is the
  registered ``uint8`` buffer ``attn.bias`` (``tril(ones(max, max))`` as [1, 1, max, max]) sliced to
  ``[:, :, k - q : k, :k]``, cast to bool and applied with ``torch.where(mask, w, finfo.min)``;
* MLP ``c_proj(act(c_fc(x)))``; ``gelu-tanh`` (the default) is HF's ``NewGELUActivation`` written
  out: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))``; ``gelu`` is exact
  (``nn.functional.gelu``, erf); ``relu`` is ``nn.ReLU``.
* Names: ``transformer.wte.weight``, ``transformer.wpe.weight``, ``transformer.h.<i>.ln_1.weight``
  (``.bias``), ``transformer.h.<i>.attn.c_attn.weight`` (``.bias``), ``...attn.c_proj...``,
  ``...ln_2...``, ``...mlp.c_fc...``, ``...mlp.c_proj...``, ``transformer.h.<i>.attn.bias`` (the
  mask buffer), ``transformer.ln_f...``, ``lm_head.weight``.

OPT (``--arch opt``), as in ``modeling_opt.py``:

* ``nn.Linear`` projections ``q_proj``/``k_proj``/``v_proj``/``out_proj`` (``--fused-qkv``: one
  ``qkv_proj`` and ``.split``, not in HF), ``q`` scaled by ``head_dim ** -0.5`` before ``bmm`` over
  ``[batch * heads, seq, d]``; the causal mask is HF's ``_make_causal_mask`` (``full(finfo.min)`` +
  ``masked_fill`` with an arange comparison), added, then ``max(w, finfo.min)``, softmax;
* the MLP runs on the residual stream flattened to 2-D (``reshape(-1, hidden)``), so ``fc1``/``fc2``
  export as ``Gemm``; activation ``relu`` by default;
* learned positions with OPT's offset of 2: ``embed_positions`` has ``max_positions + 2`` rows and
  position ``p`` uses row ``p + 2``. (HF derives positions from the attention mask with ``cumsum``;
  without a padding mask that is ``arange(seq)``, which is what is written here.)
* Names: ``model.decoder.embed_tokens.weight``, ``model.decoder.embed_positions.weight``,
  ``model.decoder.layers.<i>.self_attn.{q,k,v,out}_proj.{weight,bias}``,
  ``...self_attn_layer_norm...``, ``...fc1...``, ``...fc2...``, ``...final_layer_norm...``,
  ``model.decoder.final_layer_norm...``, ``lm_head.weight``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import ClassVar, Optional

import torch
from torch import nn

from . import Arch, register
from . import transformer as tf
from .transformer import Conv1D

ACTIVATIONS = ("gelu", "gelu-tanh", "relu")


@dataclass
class _GPTFamilyConfig(tf.DecoderConfig):
    # None: the family's default (gpt2: gelu-tanh, opt: relu).
    activation: Optional[str] = None
    # None: the family's default (gpt2: fused c_attn, opt: separate q/k/v).
    fused_qkv: Optional[bool] = None
    layer_norm_eps: float = 1e-5

    default_tie_embeddings: ClassVar[bool] = True
    default_activation: ClassVar[str] = "gelu-tanh"
    default_fused_qkv: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.activation is None:
            self.activation = self.default_activation
        if self.fused_qkv is None:
            self.fused_qkv = self.default_fused_qkv
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, "
                             f"got {self.activation!r}")


@dataclass
class GPT2Config(_GPTFamilyConfig):
    family: ClassVar[str] = "gpt2"
    default_activation: ClassVar[str] = "gelu-tanh"
    default_fused_qkv: ClassVar[bool] = True


@dataclass
class OPTConfig(_GPTFamilyConfig):
    family: ClassVar[str] = "opt"
    default_activation: ClassVar[str] = "relu"
    default_fused_qkv: ClassVar[bool] = False


class NewGELUActivation(nn.Module):
    """GPT-2's gelu_new, written out with tanh (HF activations.NewGELUActivation)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return 0.5 * input * (1.0 + torch.tanh(
            math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GELUActivation(nn.Module):
    """Exact (erf) GELU (HF activations.GELUActivation)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(input)


def _activation(name: str) -> nn.Module:
    return {"gelu": GELUActivation, "gelu-tanh": NewGELUActivation, "relu": nn.ReLU}[name]()


# --- GPT-2 ----------------------------------------------------------------------------------------

class GPT2Attention(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        max_positions = config.max_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.uint8)).view(
                1, 1, max_positions, max_positions),
        )
        self.embed_dim = config.hidden
        self.num_heads = config.heads
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.fused_qkv = config.fused_qkv
        if self.fused_qkv:
            self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        else:
            self.q_proj = Conv1D(self.embed_dim, self.embed_dim)
            self.k_proj = Conv1D(self.embed_dim, self.embed_dim)
            self.v_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.tensor(
            value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)

        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length].to(
            torch.bool)
        mask_value = torch.finfo(attn_weights.dtype).min
        # Need to be a tensor, otherwise we get error: `RuntimeError: expected scalar type float
        # but found double`.
        mask_value = torch.tensor(mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)

        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        return torch.matmul(attn_weights, value)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.fused_qkv:
            query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        else:
            query = self.q_proj(hidden_states)
            key = self.k_proj(hidden_states)
            value = self.v_proj(hidden_states)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)

        attn_output = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        return self.c_proj(attn_output)


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size: int, config: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.hidden)
        self.c_proj = Conv1D(config.hidden, intermediate_size)
        self.act = _activation(config.activation)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        return self.c_proj(hidden_states)


class GPT2Block(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.mlp = GPT2MLP(config.ffn, config)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states)
        # residual connection
        hidden_states = attn_output + residual

        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        # residual connection
        return residual + feed_forward_hidden_states


class GPT2Model(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(config.vocab, config.hidden)
        self.wpe = nn.Embedding(config.max_positions, config.hidden)
        self.h = nn.ModuleList(GPT2Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        past_length = 0
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long,
                                    device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])

        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds

        output_shape = input_shape + (hidden_states.size(-1),)
        for block in self.h:
            hidden_states = block(hidden_states)
        hidden_states = self.ln_f(hidden_states)
        return hidden_states.view(output_shape)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False)
        tf.init_parameters(self)
        if config.tie_embeddings:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden_states = self.transformer(input_ids)
        return self.lm_head(hidden_states)


# --- OPT ------------------------------------------------------------------------------------------

def _make_causal_mask(input_ids_shape: torch.Size, dtype: torch.dtype,
                      past_key_values_length: int = 0) -> torch.Tensor:
    """HF's causal mask: 0 on and below the diagonal, finfo.min above; [bsz, 1, tgt, tgt]."""
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.tensor(torch.finfo(dtype).min))
    mask_cond = torch.arange(mask.size(-1))
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)


class OPTLearnedPositionalEmbedding(nn.Embedding):
    """Learned positions with OPT's offset: position p reads row p + 2."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        self.offset = 2
        super().__init__(num_embeddings + self.offset, embedding_dim)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return super().forward(positions + self.offset)


class OPTAttention(nn.Module):
    def __init__(self, config: OPTConfig) -> None:
        super().__init__()
        self.embed_dim = config.hidden
        self.num_heads = config.heads
        self.head_dim = self.embed_dim // self.num_heads
        self.scaling = self.head_dim ** -0.5
        self.fused_qkv = config.fused_qkv
        if self.fused_qkv:
            self.qkv_proj = nn.Linear(self.embed_dim, 3 * self.embed_dim, bias=True)
        else:
            self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=True)
            self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=True)
            self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=True)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=True)

    def _shape(self, tensor: torch.Tensor, seq_len: int, bsz: int) -> torch.Tensor:
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        bsz, tgt_len, _ = hidden_states.size()

        if self.fused_qkv:
            q, k, v = self.qkv_proj(hidden_states).split(self.embed_dim, dim=-1)
        else:
            q = self.q_proj(hidden_states)
            k = self.k_proj(hidden_states)
            v = self.v_proj(hidden_states)
        # get query proj
        query_states = q * self.scaling
        key_states = self._shape(k, -1, bsz)
        value_states = self._shape(v, -1, bsz)

        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)

        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))

        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = torch.max(attn_weights,
                                 torch.tensor(torch.finfo(attn_weights.dtype).min))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)

        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)

        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)
        attn_output = attn_output.transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


class OPTDecoderLayer(nn.Module):
    def __init__(self, config: OPTConfig) -> None:
        super().__init__()
        self.embed_dim = config.hidden
        self.self_attn = OPTAttention(config)
        self.activation_fn = _activation(config.activation)
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_eps)
        self.fc1 = nn.Linear(self.embed_dim, config.ffn)
        self.fc2 = nn.Linear(config.ffn, self.embed_dim)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask)
        hidden_states = residual + hidden_states

        # Fully Connected
        hidden_states_shape = hidden_states.shape
        hidden_states = hidden_states.reshape(-1, hidden_states.size(-1))
        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        hidden_states = self.fc2(hidden_states)
        return (residual + hidden_states).view(hidden_states_shape)


class OPTDecoder(nn.Module):
    def __init__(self, config: OPTConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab, config.hidden)
        self.embed_positions = OPTLearnedPositionalEmbedding(config.max_positions, config.hidden)
        self.final_layer_norm = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(OPTDecoderLayer(config) for _ in range(config.layers))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        inputs_embeds = self.embed_tokens(input_ids)
        positions = torch.arange(input_shape[-1], dtype=torch.long,
                                 device=inputs_embeds.device).unsqueeze(0)
        pos_embeds = self.embed_positions(positions)
        attention_mask = _make_causal_mask(input_shape, inputs_embeds.dtype)

        hidden_states = inputs_embeds + pos_embeds
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, attention_mask)
        return self.final_layer_norm(hidden_states)


class OPTModel(nn.Module):
    def __init__(self, config: OPTConfig) -> None:
        super().__init__()
        self.decoder = OPTDecoder(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.decoder(input_ids)


class OPTForCausalLM(nn.Module):
    def __init__(self, config: OPTConfig) -> None:
        super().__init__()
        self.config = config
        self.model = OPTModel(config)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False)
        tf.init_parameters(self)
        if config.tie_embeddings:
            self.lm_head.weight = self.model.decoder.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(input_ids)).contiguous()


# --- registration ---------------------------------------------------------------------------------

_ADDED = "_speedloader_gpt_family_arguments"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    tf.add_arguments(parser)
    if getattr(parser, _ADDED, False):
        return
    setattr(parser, _ADDED, True)
    g = parser.add_argument_group("gpt2 and opt options (--arch gpt2, opt)")
    g.add_argument("--fused-qkv", action=argparse.BooleanOptionalAction, default=None,
                   help="one projection for q, k and v, split in the graph (Split) "
                        "(default: fused for gpt2, separate for opt)")


def _config_from_args_for(cls):
    def config_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser):
        kw = tf.common_config_kwargs(args, parser, cls.family)
        if args.activation is not None and args.activation not in ACTIVATIONS:
            parser.error(f"argument --activation: invalid choice: {args.activation!r} for "
                         f"--arch {cls.family} (choose from "
                         f"{', '.join(repr(a) for a in ACTIVATIONS)})")
        if args.rope is not None:
            parser.error("--rope applies to --arch llama only")
        return cls(activation=args.activation, fused_qkv=args.fused_qkv, **kw)
    return config_from_args


register(Arch(
    name="gpt2",
    config_cls=GPT2Config,
    build=GPT2LMHeadModel,
    make_input=tf.make_input,
    dynamic_axes=tf.dynamic_axes,
    input_ranks=(2,),
    add_arguments=_add_arguments,
    config_from_args=_config_from_args_for(GPT2Config),
    description="GPT-2 decoder (LayerNorm, learned positions, Conv1D/Gemm, GELU); input_ids "
                "[batch, seq] -> logits [batch, seq, vocab]",
    input_name=tf.INPUT_NAME,
    output_name=tf.OUTPUT_NAME,
    min_opset=tf.MIN_OPSET,
))

register(Arch(
    name="opt",
    config_cls=OPTConfig,
    build=OPTForCausalLM,
    make_input=tf.make_input,
    dynamic_axes=tf.dynamic_axes,
    input_ranks=(2,),
    add_arguments=_add_arguments,
    config_from_args=_config_from_args_for(OPTConfig),
    description="OPT decoder (LayerNorm, learned positions with offset 2, ReLU MLP); input_ids "
                "[batch, seq] -> logits [batch, seq, vocab]",
    input_name=tf.INPUT_NAME,
    output_name=tf.OUTPUT_NAME,
    min_opset=tf.MIN_OPSET,
))
