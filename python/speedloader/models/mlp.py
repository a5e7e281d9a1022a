"""A plain multi-layer perceptron: Linear -> act -> ... -> Linear.

Parameters are named ``layers.<i>.weight`` / ``layers.<i>.bias`` (i = 0 for the first Linear), which
is what torch.onnx.export keeps as initializer names where it does not fold them (see export.py).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Dict, List

import torch
from torch import nn

from . import Arch, register

ACTIVATIONS = ("relu", "silu")


@dataclass
class MLPConfig:
    in_features: int
    out_features: int
    hidden: List[int] = field(default_factory=list)
    activation: str = "relu"
    bias: bool = True

    def __post_init__(self) -> None:
        self.hidden = list(self.hidden)
        for what, v in (("in_features", self.in_features), ("out_features", self.out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{what} must be a positive integer, got {v!r}")
        for v in self.hidden:
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"hidden widths must be positive integers, got {self.hidden!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")


class MLP(nn.Module):
    def __init__(self, config: MLPConfig) -> None:
        super().__init__()
        self.config = config
        widths = [config.in_features, *config.hidden, config.out_features]
        self.layers = nn.ModuleList(
            nn.Linear(a, b, bias=config.bias) for a, b in zip(widths[:-1], widths[1:]))
        self.act = nn.ReLU() if config.activation == "relu" else nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i != last:
                x = self.act(x)
        return x


def _make_input(config: MLPConfig, batch: int, seq: int, input_rank: int,
                generator: torch.Generator) -> torch.Tensor:
    shape = (batch, config.in_features) if input_rank == 2 else (batch, seq, config.in_features)
    return torch.randn(*shape, generator=generator, dtype=torch.float32)


def _dynamic_axes(input_rank: int) -> Dict[int, str]:
    return {0: "batch"} if input_rank == 2 else {0: "batch", 1: "seq"}


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    # --hidden (widths) and --activation are shared options (models.add_shared_arguments).
    g = parser.add_argument_group("mlp options (--arch mlp)")
    g.add_argument("--in-features", type=_positive_int, metavar="N",
                   help="width of the input's last axis (required)")
    g.add_argument("--out-features", type=_positive_int, metavar="N",
                   help="width of the output's last axis (required)")
    g.add_argument("--no-bias", dest="bias", action="store_false",
                   help="Linear layers without bias (default: with bias)")


def _config_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> MLPConfig:
    missing = [opt for opt, v in (("--in-features", args.in_features), ("--hidden", args.hidden),
                                  ("--out-features", args.out_features)) if v is None]
    if missing:
        parser.error(f"--arch mlp requires {', '.join(missing)}")
    activation = "relu" if args.activation is None else args.activation
    if activation not in ACTIVATIONS:
        parser.error(f"argument --activation: invalid choice: {activation!r} for --arch mlp "
                     f"(choose from {', '.join(repr(a) for a in ACTIVATIONS)})")
    # The decoders' options, if this parser has them (export.build_parser adds every arch's).
    for opt in ("--layers", "--heads", "--kv-heads", "--ffn", "--vocab", "--max-positions",
                "--rope", "--tie-embeddings", "--fused-qkv"):
        if getattr(args, opt[2:].replace("-", "_"), None) is not None:
            parser.error(f"{opt} does not apply to --arch mlp")
    return MLPConfig(in_features=args.in_features, hidden=args.hidden,
                     out_features=args.out_features, activation=activation, bias=args.bias)


register(Arch(
    name="mlp",
    config_cls=MLPConfig,
    build=MLP,
    make_input=_make_input,
    dynamic_axes=_dynamic_axes,
    input_ranks=(2, 3),
    add_arguments=_add_arguments,
    config_from_args=_config_from_args,
    description="Linear/activation stack; input [batch, in] (rank 2) or [batch, seq, in] (rank 3)",
))
