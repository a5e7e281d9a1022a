"""Build a model and export it to ONNX for sl-opt.

Command line (with PYTHONPATH=python, using Debian's /usr/bin/python3)::

    /usr/bin/python3 -m speedloader.export --arch mlp --in-features 32 --hidden 64,64 \\
        --out-features 16 --activation relu --seed 0 --out mlp.onnx [--save-reference DIR]

    /usr/bin/python3 -m speedloader.export --arch llama --layers 2 --hidden 64 --heads 4 \\
        --kv-heads 2 --ffn 128 --vocab 256 --max-positions 128 [--rope half|interleaved] \\
        [--tie-embeddings] --seed 0 --out tiny.onnx [--no-constant-folding] [--opset 14..17] \\
        [--save-reference DIR --batch B --seq S]

    /usr/bin/python3 -m speedloader.export --arch gpt2|opt ... [--activation gelu|gelu-tanh|relu] \\
        [--fused-qkv|--no-fused-qkv] [--no-tie-embeddings] ...

mlp: the graph has one input ``x`` and one output ``y``. Axis 0 of both is symbolic and named
``batch``; with ``--input-rank 3`` axis 1 is symbolic too and named ``seq``. Reference files:
``DIR/x.npy``, ``DIR/y.npy`` (float32).

llama, gpt2, opt: input ``input_ids`` (int64 [batch, seq]), output ``logits`` (float32
[batch, seq, vocab]), axes 0 and 1 symbolic (``batch``, ``seq``). Reference files:
``DIR/input_ids.npy`` (random ids < vocab, int64) and ``DIR/logits.npy`` (float32).
What torch.onnx.export writes for them is recorded in models/EXPORTS.md.

What torch.onnx.export (torch 1.13, opset 14) writes for an MLP, which sl-opt must accept:

* 2-D input, bias: ``Gemm(x, W, b)`` with ``transB=1`` per Linear; initializers keep the PyTorch
  names (``layers.0.weight``, ``layers.0.bias``, ...), with or without constant folding.
* 3-D input, bias, constant folding (the default): ``MatMul(x, Wt)`` + ``Add(., b)``; the weights
  are pre-transposed into new initializers named ``onnx::MatMul_<N>``; biases keep their names.
* 3-D input, ``--no-constant-folding``: ``Transpose(W, perm=[1,0])`` -> ``MatMul`` -> ``Add``;
  every initializer keeps its PyTorch name.
* ``--no-bias``: no Gemm at all (also for 2-D input): ``MatMul`` with a folded ``onnx::MatMul_<N>``
  weight, or ``Transpose`` + ``MatMul`` without constant folding.
* silu is exported as ``Sigmoid`` + ``Mul``; relu as ``Relu``.

Training should use ``--no-constant-folding`` so that checkpoints and gradients refer to the
PyTorch parameter names (and a tied weight stays one initializer used twice).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch

from .models import add_shared_arguments, arch_names, build_model, get_arch

DEFAULT_OPSET = 14
DEFAULT_BATCH = 4
DEFAULT_SEQ = 8
INPUT_NAME = "x"
OUTPUT_NAME = "y"

try:  # torch's own supported range (7..17 on torch 1.13)
    from torch.onnx import _constants as _onnx_constants

    MIN_OPSET = max(9, int(_onnx_constants.ONNX_MIN_OPSET))  # dynamic axes need opset >= 9
    MAX_OPSET = int(_onnx_constants.ONNX_MAX_OPSET)
except Exception:  # pragma: no cover - other torch versions
    MIN_OPSET, MAX_OPSET = 9, 17


@dataclass
class ExportResult:
    onnx_path: Path
    model: torch.nn.Module
    # The example input the graph was traced with (and the reference input): float32 for mlp,
    # int64 token ids for the transformers.
    x: np.ndarray
    # PyTorch's output for `x`, float32.
    y: np.ndarray
    # Where <input_name>.npy / <output_name>.npy were written, if they were.
    reference_dir: Optional[Path] = None
    # The graph's input and output names (x / y for mlp, input_ids / logits for transformers).
    input_name: str = INPUT_NAME
    output_name: str = OUTPUT_NAME

    @property
    def input_file(self) -> Optional[Path]:
        return None if self.reference_dir is None else self.reference_dir / f"{self.input_name}.npy"

    @property
    def output_file(self) -> Optional[Path]:
        return None if self.reference_dir is None else \
            self.reference_dir / f"{self.output_name}.npy"


def input_seed(seed: int) -> int:
    """The seed of the reference input; distinct from the parameter seed's stream."""
    return (seed + 0x5EED) % (2**63)


def reference_input(arch: str, config: Any, *, seed: int, input_rank: int, batch: int,
                    seq: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(input_seed(seed))
    return get_arch(arch).make_input(config, batch, seq, input_rank, gen)


def export_model(arch: str, config: Any, out: os.PathLike, *, seed: int = 0,
                 opset: int = DEFAULT_OPSET, input_rank: int = 2, constant_folding: bool = True,
                 batch: int = DEFAULT_BATCH, seq: int = DEFAULT_SEQ,
                 reference_dir: Optional[os.PathLike] = None) -> ExportResult:
    """Builds `arch` from `config` with parameters from `seed` and exports it to `out`.

    The graph is traced with a random input of shape [batch, ...] (also drawn from `seed`); with
    `reference_dir`, that input and PyTorch's output for it are saved there as <input>.npy and
    <output>.npy (x.npy and y.npy for mlp, input_ids.npy and logits.npy for the transformers).
    """
    a = get_arch(arch)
    if input_rank not in a.input_ranks:
        raise ValueError(f"{arch} supports input ranks {list(a.input_ranks)}, got {input_rank}")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset must be in [{MIN_OPSET}, {MAX_OPSET}], got {opset}")
    if a.min_opset is not None and opset < a.min_opset:
        raise ValueError(f"{arch} needs opset >= {a.min_opset}, got {opset}")
    if batch <= 0 or seq <= 0:
        raise ValueError(f"batch and seq must be positive, got batch={batch} seq={seq}")

    model = build_model(arch, config, seed=seed)
    x = reference_input(arch, config, seed=seed, input_rank=input_rank, batch=batch, seq=seq)
    with torch.no_grad():
        y = model(x)

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    axes = a.dynamic_axes(input_rank)
    with warnings.catch_warnings():
        # The decoders build tensors with torch.tensor(...) as HF's code does (finfo.min for the
        # mask clamp, sqrt(head_dim)); the tracer warns that they become constants, which they
        # are. The tests evaluate every exported graph at several (batch, seq) to be sure.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # GPT-2's `torch.tensor(value.size(-1) ** 0.5)` copies a traced size (HF does the same).
        warnings.filterwarnings("ignore", "To copy construct from a tensor", UserWarning)
        torch.onnx.export(
            model, (x,), str(out),
            input_names=[a.input_name], output_names=[a.output_name],
            dynamic_axes={a.input_name: dict(axes), a.output_name: dict(axes)},
            opset_version=opset, do_constant_folding=constant_folding, export_params=True)
    _check(out)

    x_np = np.ascontiguousarray(x.detach().numpy())
    if x_np.dtype != np.int64:
        x_np = x_np.astype(np.float32, copy=False)
    y_np = np.ascontiguousarray(y.detach().numpy(), dtype=np.float32)
    res = ExportResult(onnx_path=out, model=model, x=x_np, y=y_np, input_name=a.input_name,
                       output_name=a.output_name)
    if reference_dir is not None:
        res.reference_dir = Path(reference_dir)
        res.reference_dir.mkdir(parents=True, exist_ok=True)
        np.save(res.input_file, x_np)
        np.save(res.output_file, y_np)
    return res


def _check(path: Path) -> None:
    try:
        import onnx
    except ImportError:  # the check is a bonus; torch.onnx.export itself does not need onnx
        return
    onnx.checker.check_model(str(path))


def graph_summary(path: os.PathLike) -> Dict[str, Any]:
    """Op types (in node order), initializer names, and input/output names with their dims."""
    import onnx

    m = onnx.load(str(path))
    g = m.graph

    def dims(v):
        return [d.dim_param if d.dim_param else d.dim_value
                for d in v.type.tensor_type.shape.dim]

    return {
        "opset": max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0),
        "op_types": [n.op_type for n in g.node],
        "initializers": [i.name for i in g.initializer],
        "inputs": {v.name: dims(v) for v in g.input},
        "outputs": {v.name: dims(v) for v in g.output},
    }


def _format_summary(path: Path, s: Dict[str, Any]) -> str:
    counts = collections.Counter(s["op_types"])
    ops = ", ".join(f"{op} x{n}" for op, n in counts.items())
    io = "; ".join(f"{k}{v}" for k, v in {**s["inputs"], **s["outputs"]}.items())
    return (f"wrote {path}: opset {s['opset']}, {len(s['op_types'])} nodes ({ops}), "
            f"{len(s['initializers'])} initializers; {io}")


# --- command line -------------------------------------------------------------------------------

def _int_in(lo: int, hi: Optional[int] = None):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            want = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"expected an integer {want}, got {text!r}")
        return v
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m speedloader.export",
        description="Build a model with PyTorch and export it to ONNX for sl-opt. mlp: input "
                    "'x', output 'y', symbolic axis 0 'batch' (and axis 1 'seq' with --input-rank "
                    "3). llama, gpt2, opt: input 'input_ids' (int64 [batch, seq]), output 'logits' "
                    "(float32 [batch, seq, vocab]), symbolic axes 'batch' and 'seq'.",
        epilog="Architectures: " + "; ".join(
            f"{n}: {get_arch(n).description}" for n in arch_names()))
    p.add_argument("--arch", required=True, choices=arch_names(), help="model architecture")
    p.add_argument("--out", required=True, type=Path, metavar="FILE.onnx",
                   help="where to write the ONNX model (parent directories are created)")
    p.add_argument("--seed", type=_int_in(0, 2**63 - 1), default=0,
                   help="seed of the parameters and of the reference input (default: 0)")
    p.add_argument("--opset", type=_int_in(MIN_OPSET, MAX_OPSET), default=DEFAULT_OPSET,
                   help=f"ONNX opset, {MIN_OPSET}..{MAX_OPSET} (default: {DEFAULT_OPSET})")
    p.add_argument("--input-rank", type=int, choices=(2, 3), default=2,
                   help="mlp only: 2: x is [batch, in] (Linear exports as Gemm); 3: x is "
                        "[batch, seq, in] (Linear exports as MatMul + Add) (default: 2; the "
                        "transformers' input_ids is always [batch, seq])")
    p.add_argument("--no-constant-folding", dest="constant_folding", action="store_false",
                   help="export with do_constant_folding=False: initializers keep their PyTorch "
                        "names and weight transposes stay in the graph (default: fold)")
    p.add_argument("--save-reference", type=Path, metavar="DIR",
                   help="also write the random input and PyTorch's output for it: mlp: DIR/x.npy "
                        "and DIR/y.npy (float32); llama, gpt2, opt: DIR/input_ids.npy (ids < "
                        "vocab, int64) and DIR/logits.npy (float32)")
    p.add_argument("--batch", type=_int_in(1), default=None,
                   help=f"batch of the reference/trace input (default: {DEFAULT_BATCH})")
    p.add_argument("--seq", type=_int_in(1), default=None,
                   help=f"seq of the reference/trace input: llama, gpt2, opt (at most "
                        f"--max-positions), and mlp with --input-rank 3 (default: {DEFAULT_SEQ})")
    add_shared_arguments(p)
    # Architectures of one family share their options' function: add each once.
    for add in dict.fromkeys(get_arch(name).add_arguments for name in arch_names()):
        add(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    arch = get_arch(args.arch)
    if args.input_rank not in arch.input_ranks:
        parser.error(f"--arch {args.arch} supports --input-rank "
                     f"{', '.join(map(str, arch.input_ranks))}, got {args.input_rank}")
    if args.seq is not None and "seq" not in arch.dynamic_axes(args.input_rank).values():
        parser.error("--seq only applies to --input-rank 3")
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a directory; give a file name such as model.onnx")
    if args.save_reference is not None and args.save_reference.exists() \
            and not args.save_reference.is_dir():
        parser.error(f"--save-reference {args.save_reference} exists and is not a directory")
    try:
        config = arch.config_from_args(args, parser)
    except ValueError as e:
        parser.error(str(e))
    if arch.min_opset is not None and args.opset < arch.min_opset:
        parser.error(f"argument --opset: --arch {args.arch} needs an opset in "
                     f"[{arch.min_opset}, {MAX_OPSET}], got {args.opset}")
    seq = args.seq if args.seq is not None else DEFAULT_SEQ
    max_positions = getattr(config, "max_positions", None)
    if max_positions is not None and seq > max_positions:
        what = f"--seq {seq}" if args.seq is not None else f"the default --seq {seq}"
        parser.error(f"{what} exceeds --max-positions {max_positions}")

    try:
        res = export_model(
            args.arch, config, args.out, seed=args.seed, opset=args.opset,
            input_rank=args.input_rank, constant_folding=args.constant_folding,
            batch=args.batch if args.batch is not None else DEFAULT_BATCH,
            seq=seq,
            reference_dir=args.save_reference)
    except OSError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1

    try:
        print(_format_summary(res.onnx_path, graph_summary(res.onnx_path)))
    except ImportError:
        print(f"wrote {res.onnx_path}")
    if res.reference_dir is not None:
        print(f"wrote {res.input_file} {list(res.x.shape)} {res.x.dtype} and "
              f"{res.output_file} {list(res.y.shape)} {res.y.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
