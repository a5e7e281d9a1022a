"""Model builders, keyed by architecture name.

Each architecture registers an :class:`Arch`: its config dataclass, a builder, how to make an
example input, and the command-line options :mod:`speedloader.export` offers for it. Adding an
architecture (llama, gpt2, ...) means adding a module here that calls :func:`register` and importing
it at the bottom of this file.
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


def build_model(arch: str, config: Any, seed: Optional[int] = None) -> torch.nn.Module:
    """Builds `arch` from `config` in eval mode; with `seed`, its parameters are reproducible."""
    a = get_arch(arch)
    if not isinstance(config, a.config_cls):
        raise TypeError(f"{arch} expects a {a.config_cls.__name__}, got {type(config).__name__}")
    if seed is not None:
        torch.manual_seed(seed)
    return a.build(config).eval()


# Architectures register themselves on import.
from . import mlp  # noqa: E402,F401
