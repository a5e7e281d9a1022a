"""Model builders, keyed by architecture name.

Each architecture registers an :class:`Arch`: its config dataclass, a builder, how to make an
example input, the names of the graph's input and output, and the command-line options
:mod:`speedloader.export` offers for it. Adding an architecture means adding a module here that
calls :func:`register` and importing it at the bottom of this file.

Registered: ``mlp`` (mlp.py), ``llama`` (llama.py), ``gpt2`` and ``opt`` (gpt2.py); the decoder
families share transformer.py. EXPORTS.md records what torch.onnx.export writes for each.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch


@dataclass(frozen=True)
class Arch:
    """Everything the exporter needs to know about one architecture."""

    name: str
    # The config dataclass type.
    config_cls: type
    # config -> torch.nn.Module (parameters initialised from torch's global RNG).
    build: Callable[[Any], torch.nn.Module]
    # (config, batch, seq, input_rank, generator) -> example input tensor.
    make_input: Callable[[Any, int, int, int, torch.Generator], torch.Tensor]
    # input_rank -> {axis: name} of the symbolic dimensions of input `x` and output `y`.
    dynamic_axes: Callable[[int], Dict[int, str]]
    # The input ranks this architecture can be exported with.
    input_ranks: Tuple[int, ...]
    # Adds this architecture's options (as an argument group) to the export CLI.
    add_arguments: Callable[[argparse.ArgumentParser], None]
    # (args, parser) -> config; reports bad or missing options through parser.error.
    config_from_args: Callable[[argparse.Namespace, argparse.ArgumentParser], Any]
    # One line for --help.
    description: str = ""
    # Names of the graph's one input and one output (also the reference files' stems).
    input_name: str = "x"
    output_name: str = "y"
    # The lowest ONNX opset the exporter accepts for it (None: whatever torch supports).
    min_opset: Optional[int] = None


_REGISTRY: Dict[str, Arch] = {}


def register(arch: Arch) -> Arch:
    if arch.name in _REGISTRY:
        raise ValueError(f"architecture {arch.name!r} is already registered")
    _REGISTRY[arch.name] = arch
    return arch


def get_arch(name: str) -> Arch:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown architecture {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def arch_names() -> List[str]:
    return sorted(_REGISTRY)


# Named sizes of real models: name -> (arch, the config's keyword arguments). Weights are never
# part of a preset; export one with random weights, or --weightless (speedloader.export).
_PRESETS: Dict[str, Tuple[str, Dict[str, Any]]] = {}


def register_preset(name: str, arch: str, **config: Any) -> None:
    if name in _PRESETS:
        raise ValueError(f"preset {name!r} is already registered")
    _PRESETS[name] = (arch, dict(config))


def preset_names() -> List[str]:
    return sorted(_PRESETS)


def get_preset(name: str, **overrides: Any) -> Tuple[str, Any]:
    """(arch, config) of preset `name`, with `overrides` (e.g. max_positions) replacing fields."""
    try:
        arch, kw = _PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(preset_names())}") from None
    return arch, get_arch(arch).config_cls(**{**kw, **overrides})


def preset_fields(name: str) -> Dict[str, Any]:
    """The config fields preset `name` sets."""
    get_preset(name)  # the error for an unknown name
    return dict(_PRESETS[name][1])


def build_model(arch: str, config: Any, seed: Optional[int] = None) -> torch.nn.Module:
    """Builds `arch` from `config` in eval mode; with `seed`, its parameters are reproducible."""
    a = get_arch(arch)
    if not isinstance(config, a.config_cls):
        raise TypeError(f"{arch} expects a {a.config_cls.__name__}, got {type(config).__name__}")
    if seed is not None:
        torch.manual_seed(seed)
    return a.build(config).eval()


# Options more than one architecture uses, each with its own meaning and checks.
ACTIVATION_CHOICES = ("relu", "silu", "gelu", "gelu-tanh")


def parse_widths(text: str) -> List[int]:
    """'64,64' -> [64, 64]; '' -> [] (the --hidden option)."""
    text = text.strip()
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            v = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated positive integers such as 64,64, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"hidden widths must be positive, got {text!r}")
        out.append(v)
    return out


def add_shared_arguments(parser: argparse.ArgumentParser) -> None:
    """--hidden and --activation: every architecture has them, with its own meaning."""
    g = parser.add_argument_group("options of several architectures")
    g.add_argument("--hidden", type=parse_widths, metavar="W[,W...]",
                   help="mlp: comma-separated hidden widths, e.g. 64,64, '' for none; llama, "
                        "gpt2, opt: the model width, one integer (required)")
    g.add_argument("--activation", choices=ACTIVATION_CHOICES, default=None,
                   help="mlp: relu or silu between Linear layers (default: relu); gpt2, opt: "
                        "MLP activation, gelu (exact, erf), gelu-tanh (GPT-2's gelu_new) or relu "
                        "(default: gelu-tanh for gpt2, relu for opt); llama: SwiGLU, silu only")


# Architectures register themselves on import.
from . import mlp  # noqa: E402,F401
from . import llama  # noqa: E402,F401
from . import gpt2  # noqa: E402,F401
