"""What the decoder-only transformers (llama, gpt2, opt) share: config, input, CLI, initialisation.

Every transformer arch has the same contract: ``forward(input_ids)`` with ``input_ids`` int64
``[batch, seq]`` returns ``logits`` float32 ``[batch, seq, vocab]``; the exporter names the graph's
input ``input_ids`` and its output ``logits``, both with symbolic axes 0 ``batch`` and 1 ``seq``.
There is no attention-mask input (no padding): attention is causal only.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Optional

import torch
from torch import nn

INPUT_NAME = "input_ids"
OUTPUT_NAME = "logits"
# Opset 14 is the first with Trilu and with Reshape's allowzero; the decoders are exported (and
# documented in EXPORTS.md) at 14..17 only.
MIN_OPSET = 14


def _check_positive(what: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{what} must be a positive integer, got {v!r}")


@dataclass
class DecoderConfig:
    """Sizes shared by every decoder-only family; subclasses add the family's options.

    ``kv_heads`` None means ``heads`` (multi-head attention); ``ffn`` None means ``4 * hidden``;
    ``tie_embeddings`` None means the family's default (LLaMA untied, GPT-2 and OPT tied).
    """

    layers: int
    hidden: int
    heads: int
    vocab: int
    kv_heads: Optional[int] = None
    ffn: Optional[int] = None
    max_positions: int = 128
    tie_embeddings: Optional[bool] = None

    # Family defaults, overridden by subclasses.
    family: ClassVar[str] = ""
    default_tie_embeddings: ClassVar[bool] = False
    supports_gqa: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            self.kv_heads = self.heads
        if self.ffn is None and isinstance(self.hidden, int):
            self.ffn = 4 * self.hidden
        if self.tie_embeddings is None:
            self.tie_embeddings = self.default_tie_embeddings
        for what in ("layers", "hidden", "heads", "vocab", "kv_heads", "ffn", "max_positions"):
            _check_positive(what, getattr(self, what))
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")
        if self.kv_heads != self.heads and not self.supports_gqa:
            raise ValueError(f"{self.family} has no grouped-query attention: kv_heads must equal "
                             f"heads ({self.heads}), got {self.kv_heads}")
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"tie_embeddings must be a bool, got {self.tie_embeddings!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def make_input(config: DecoderConfig, batch: int, seq: int, input_rank: int,
               generator: torch.Generator) -> torch.Tensor:
    """Random token ids in [0, vocab), int64 [batch, seq]."""
    if input_rank != 2:
        raise ValueError(f"input_ids has rank 2, got input_rank {input_rank}")
    if seq > config.max_positions:
        raise ValueError(f"seq ({seq}) must not exceed max_positions ({config.max_positions})")
    return torch.randint(0, config.vocab, (batch, seq), generator=generator, dtype=torch.int64)


def dynamic_axes(input_rank: int) -> Dict[int, str]:
    return {0: "batch", 1: "seq"}


def init_parameters(model: nn.Module) -> None:
    """Draws every parameter from torch's global RNG so that each one matters numerically.

    Not the families' training init: norm weights are 1 + N(0, 0.1^2) rather than ones and every
    bias is N(0, 0.1^2) rather than zero, so a graph that dropped or misplaced one would not match
    PyTorch; projections are N(0, 1/in) so attention is far from uniform; embeddings are
    N(0, 1/hidden), so that logits stay O(1) whether or not the head is tied to the embedding.
    Buffers are untouched.
    """
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, RMSNormLike)):
            with torch.no_grad():
                module.weight.normal_(1.0, 0.1)
                if getattr(module, "bias", None) is not None:
                    module.bias.normal_(0.0, 0.1)
        elif isinstance(module, nn.Embedding):
            with torch.no_grad():
                module.weight.normal_(0.0, 1.0 / math.sqrt(module.weight.shape[1]))
        elif isinstance(module, (nn.Linear, Conv1D)):
            w = module.weight
            fan_in = w.shape[1] if isinstance(module, nn.Linear) else w.shape[0]
            with torch.no_grad():
                w.normal_(0.0, 1.0 / math.sqrt(fan_in))
                if module.bias is not None:
                    module.bias.normal_(0.0, 0.1)


class RMSNormLike(nn.Module):
    """Marker base of norms with a `weight` (and maybe `bias`) that init_parameters perturbs."""


class Conv1D(nn.Module):
    """HuggingFace's GPT-2 ``Conv1D``: a linear layer with its weight stored as [in, out].

    ``forward`` flattens to 2-D and calls ``torch.addmm``, which exports as ``Gemm`` between two
    ``Reshape``s whose shapes are computed from the input's ``Shape`` (as real GPT-2 exports do).
    """

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


# --- command line (shared by every transformer arch) -------------------------------------------

def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


_ADDED = "_speedloader_transformer_arguments"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The size options of every transformer arch (added once, whichever arch asks first)."""
    if getattr(parser, _ADDED, False):
        return
    setattr(parser, _ADDED, True)
    g = parser.add_argument_group(
        "transformer options (--arch llama, gpt2, opt)",
        "--hidden is the model width (one integer). Input 'input_ids' int64 [batch, seq] "
        "(ids < vocab), output 'logits' float32 [batch, seq, vocab].")
    g.add_argument("--layers", type=_positive_int, metavar="N",
                   help="number of decoder layers (required)")
    g.add_argument("--heads", type=_positive_int, metavar="N",
                   help="attention heads; must divide --hidden (required)")
    g.add_argument("--kv-heads", type=_positive_int, metavar="N",
                   help="key/value heads, must divide --heads; fewer than --heads is "
                        "grouped-query attention, llama only (default: --heads)")
    g.add_argument("--ffn", type=_positive_int, metavar="N",
                   help="MLP inner width (default: 4 x --hidden)")
    g.add_argument("--vocab", type=_positive_int, metavar="N", help="vocabulary size (required)")
    g.add_argument("--max-positions", type=_positive_int, metavar="N", default=None,
                   help="longest sequence (rotary cache / position table size); --seq must not "
                        "exceed it (default: 128)")
    g.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, default=None,
                   help="use the token embedding as the output projection (lm_head) "
                        "(default: untied for llama, tied for gpt2 and opt)")


def common_config_kwargs(args: argparse.Namespace, parser: argparse.ArgumentParser,
                         arch: str) -> Dict[str, Any]:
    """The DecoderConfig fields from the shared options; reports missing ones via parser.error."""
    missing = [opt for opt, v in (("--layers", args.layers), ("--hidden", args.hidden),
                                  ("--heads", args.heads), ("--vocab", args.vocab)) if v is None]
    if missing:
        parser.error(f"--arch {arch} requires {', '.join(missing)}")
    for opt, v in (("--in-features", getattr(args, "in_features", None)),
                   ("--out-features", getattr(args, "out_features", None)),
                   ("--no-bias", None if getattr(args, "bias", True) else False)):
        if v is not None:
            parser.error(f"{opt} does not apply to --arch {arch}")
    if len(args.hidden) != 1:
        parser.error(f"argument --hidden: --arch {arch} takes one width, got "
                     f"{','.join(map(str, args.hidden))}")
    kw: Dict[str, Any] = dict(layers=args.layers, hidden=args.hidden[0], heads=args.heads,
                              vocab=args.vocab, kv_heads=args.kv_heads, ffn=args.ffn,
                              tie_embeddings=args.tie_embeddings)
    if args.max_positions is not None:
        kw["max_positions"] = args.max_positions
    return kw
