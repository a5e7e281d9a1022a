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

    # A named size (models/llama.py PRESETS), any size, without its weights (below):
    /usr/bin/python3 -m speedloader.export --preset llama-30b --max-positions 544 --weightless \\
        --out big/model.onnx

    # A Hugging Face save_pretrained directory (hf.py; needs transformers):
    .venv/bin/python -m speedloader.export --hf DIR --out model.onnx [--train] [--weightless] \
        [--weights CHECKPOINT.safetensors]

``--external-data``: the weights go to one file beside the model (``FILE.onnx.data``, ONNX external
data) instead of inside it: needed past protobuf's 2 GB, where torch 1.13 would otherwise write one
file per initializer.

``--weightless``: the graph of a model of any size without ever holding its weights (peak memory
is that of the largest single weight, for the trace). Every initializer is ONNX external data in
one file ``FILE.onnx.data`` that is created sparse: the right size, all zeros, no disk blocks.
The graph is the one ``--no-constant-folding`` writes for the same config (the same nodes, names
and initializer shapes), so sl-opt compiles it as it would the real model; run it with
``sl-run --random-weights SEED`` (or read its zeros). Only ``--no-constant-folding`` graphs can be
written this way (folding needs the weights' values), so ``--weightless`` implies it.

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
import contextlib
import dataclasses
import mmap
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from .models import add_shared_arguments, arch_names, build_model, get_arch, get_preset, \
    preset_fields, preset_names

DEFAULT_OPSET = 14
DEFAULT_BATCH = 4
DEFAULT_SEQ = 8
# Each weight of a --weightless export starts at a multiple of this in its data file.
EXTERNAL_DATA_ALIGNMENT = 4096
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
                 reference_dir: Optional[os.PathLike] = None,
                 external_data: bool = False) -> ExportResult:
    """Builds `arch` from `config` with parameters from `seed` and exports it to `out`.

    With `external_data`, every initializer's bytes go to one file `out` + ".data" beside it.

    The graph is traced with a random input of shape [batch, ...] (also drawn from `seed`); with
    `reference_dir`, that input and PyTorch's output for it are saved there as <input>.npy and
    <output>.npy (x.npy and y.npy for mlp, input_ids.npy and logits.npy for the transformers).
    """
    a = _check_export_args(arch, opset, input_rank, batch, seq)
    model = build_model(arch, config, seed=seed)
    x = reference_input(arch, config, seed=seed, input_rank=input_rank, batch=batch, seq=seq)
    with torch.no_grad():
        y = model(x)

    out = Path(out)
    _torch_export(a, model, x, out, input_rank=input_rank, opset=opset,
                  constant_folding=constant_folding, export_params=True)
    if external_data:
        _move_to_external_data(out)
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


def _check_export_args(arch: str, opset: int, input_rank: int, batch: int, seq: int):
    a = get_arch(arch)
    if input_rank not in a.input_ranks:
        raise ValueError(f"{arch} supports input ranks {list(a.input_ranks)}, got {input_rank}")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset must be in [{MIN_OPSET}, {MAX_OPSET}], got {opset}")
    if a.min_opset is not None and opset < a.min_opset:
        raise ValueError(f"{arch} needs opset >= {a.min_opset}, got {opset}")
    if batch <= 0 or seq <= 0:
        raise ValueError(f"batch and seq must be positive, got batch={batch} seq={seq}")
    return a


def _torch_export(a, model: torch.nn.Module, x: torch.Tensor, out: Path, *, input_rank: int,
                  opset: int, constant_folding: bool, export_params: bool) -> None:
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
            opset_version=opset, do_constant_folding=constant_folding,
            export_params=export_params)


def data_file_of(onnx_path: os.PathLike) -> Path:
    """Where --external-data and --weightless put the weights: FILE.onnx.data beside FILE.onnx."""
    p = Path(onnx_path)
    return p.with_name(p.name + ".data")


def _move_to_external_data(out: Path) -> None:
    """Rewrites `out` with every initializer's bytes in one file data_file_of(out)."""
    import onnx

    m = onnx.load(str(out))  # also reads the per-tensor files torch writes past 2 GB
    old = {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
    data = data_file_of(out)
    if data.exists():
        data.unlink()  # save_model appends to an existing file
    onnx.save_model(m, str(out), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=0)
    for name in old - {data.name}:
        (out.parent / name).unlink(missing_ok=True)


class _EmptyOnMeta(TorchFunctionMode):
    """Puts every torch.empty on the meta device: how nn.Linear, nn.Embedding and nn.LayerNorm
    allocate their weights, and what no builder uses for a buffer (the rotary tables, masks)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.empty:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


class _NoCopiesOf(TorchFunctionMode):
    """Makes `x.clone()` of the given tensors a view. torch.onnx.export (torch 1.13) clones every
    parameter before tracing (jit/_trace.py, ONNXTracedModule), which would write out each
    placeholder weight in full: all of a 30B model's weights. The clones are never used."""

    def __init__(self, tensors) -> None:
        super().__init__()
        self.ids = {id(t) for t in tensors}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.clone and args and id(args[0]) in self.ids:
            return args[0].view(args[0].shape)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _shape_inference_without_values():
    """torch.onnx.export's shape inference (torch 1.13) is given the parameters' values and
    copies each into a TensorProto (seconds per GB); without constant folding it needs only their
    types and shapes, which the graph's inputs carry. Gives it none for the duration."""
    c = torch._C
    name = "_jit_pass_onnx_graph_shape_type_inference"
    original = getattr(c, name)
    setattr(c, name, lambda graph, params_dict, opset: original(graph, {}, opset))
    try:
        yield
    finally:
        setattr(c, name, original)


def build_weightless(arch: str, config: Any) -> torch.nn.Module:
    """`arch` built from `config` with parameters that take no memory (make_weightless). Buffers
    are real, as build_model makes them. For tracing, not for numbers."""
    with _EmptyOnMeta():
        model = build_model(arch, config, seed=0)
    return make_weightless(model)


def _zero_page_tensor(shape: torch.Size, dtype: torch.dtype, first: float) -> torch.Tensor:
    """A contiguous tensor of zeros but for its first element, `first`, in private anonymous
    memory: pages that are only read map the kernel's shared zero page and count in no resident
    set, so tracing a matrix product over it (which a stride-0 view would copy into a contiguous
    matrix first: 0.5 GB for a 32000 x 4096 head) reads it in place. Only the first page is
    ever written."""
    count = 1
    for d in shape:
        count *= int(d)
    if count == 0:
        return torch.zeros(shape, dtype=dtype)
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    # frombuffer keeps `memory` alive as long as the tensor (or a view of it) is.
    t = torch.frombuffer(memory, dtype=dtype, count=count).view(shape)
    t.view(-1)[0] = first
    return t


def make_weightless(model: torch.nn.Module) -> torch.nn.Module:
    """Replaces every parameter of `model` (built with its weights on the meta device, or
    anywhere) by a placeholder that takes no memory (_zero_page_tensor), whose first element
    differs from every other placeholder's (torch.onnx.export merges initializers it finds
    equal); returns `model`."""
    seen: Dict[int, torch.nn.Parameter] = {}  # a tied weight stays one parameter
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            if id(p) not in seen:
                value = _zero_page_tensor(p.shape, p.dtype, (len(seen) + 1) * 1e-6)
                seen[id(p)] = torch.nn.Parameter(value, requires_grad=False)
            module._parameters[name] = seen[id(p)]
    return model


@dataclass
class WeightlessExport:
    onnx_path: Path
    data_path: Path
    # Bytes of the weights the data file stands for (its size, less the alignment padding).
    parameter_bytes: int
    parameters: int


def export_weightless(arch: str, config: Any, out: os.PathLike, *, opset: int = DEFAULT_OPSET,
                      batch: int = DEFAULT_BATCH, seq: int = DEFAULT_SEQ) -> WeightlessExport:
    """Exports `arch` at `config` without its weights: the graph that export_model(...,
    constant_folding=False) writes, whose initializers are external data in one sparse file
    data_file_of(out) of zeros (each weight at a multiple of EXTERNAL_DATA_ALIGNMENT)."""
    a = _check_export_args(arch, opset, 2, batch, seq)
    model = build_weightless(arch, config)
    x = reference_input(arch, config, seed=0, input_rank=2, batch=batch, seq=seq)
    out = Path(out)
    with _NoCopiesOf(model.parameters()), _shape_inference_without_values():
        _torch_export(a, model, x, out, input_rank=2, opset=opset, constant_folding=False,
                      export_params=False)

    total, params = attach_external_data(out, model)
    _check(out)
    return WeightlessExport(onnx_path=out, data_path=data_file_of(out), parameter_bytes=total,
                            parameters=params)


# (parameter name, its tied aliases, the open data file) -> writes the weight at the file's
# position; see attach_external_data.
WeightWriter = Callable[[str, List[str], Any], None]


def attach_external_data(out: Path, model: torch.nn.Module,
                         write: Optional[WeightWriter] = None,
                         graph: Optional[Path] = None) -> Tuple[int, int]:
    """Turns the parameters that torch.onnx.export(..., export_params=False) left as graph inputs
    of `out` back into initializers, float32 external data in one file data_file_of(out), each
    at a multiple of EXTERNAL_DATA_ALIGNMENT. Without `write` the file is sparse (zeros, no disk
    blocks); with it, write(name, aliases, f) writes each weight's bytes at f's position, one
    weight at a time. The file is written under a temporary name and renamed once complete.
    With `graph`, torch's graph is read from there (a temporary, removed) and `out` is written
    only at the end, after the data file: a failure leaves a previous `out` and its data as they
    were. Returns (weight bytes, number of parameters)."""
    import onnx

    params = dict(model.named_parameters())
    aliases: Dict[str, List[str]] = collections.defaultdict(list)
    name_of = {id(p): name for name, p in params.items()}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for local, p in module._parameters.items():
            if p is not None:
                aliases[name_of[id(p)]].append(f"{module_name}.{local}" if module_name else local)
    # Persistent buffers (GPT-2's causal mask) are graph inputs too without export_params: they
    # are small and real, so they go back inline, as the normal export writes them.
    buffers = {k: v for k, v in model.state_dict().items() if k not in params}
    # the graph torch wrote: no weights
    m = onnx.load(str(graph or out), load_external_data=False)
    g = m.graph
    data = data_file_of(out)
    tmp = data.with_name(data.name + ".tmp")
    inputs = list(g.input)
    del g.input[:]
    try:
        offset, total = _write_initializers(g, inputs, params, buffers, aliases, data, tmp, write)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    missing = set(params) - {t.name for t in g.initializer}
    if missing:
        tmp.unlink()
        raise RuntimeError(f"torch.onnx.export left out parameters {sorted(missing)}")
    if graph is None:
        onnx.save(m, str(out))
        tmp.replace(data)
    else:
        onnx.save(m, str(graph))
        tmp.replace(data)
        graph.replace(out)
    return total, len(params)


def _write_initializers(g, inputs, params, buffers, aliases, data: Path, tmp: Path,
                        write: Optional[WeightWriter]) -> Tuple[int, int]:
    import onnx
    import onnx.numpy_helper

    offset = total = 0
    with open(tmp, "wb") as f:
        for v in inputs:
            p = params.get(v.name)
            if p is None and v.name in buffers:
                g.initializer.append(onnx.numpy_helper.from_array(buffers[v.name].numpy(),
                                                                  v.name))
                continue
            if p is None:
                g.input.append(v)
                continue
            if p.dtype != torch.float32:
                raise ValueError(f"{v.name}: weights are written as float32, not {p.dtype}")
            length = p.numel() * p.element_size()
            t = onnx.TensorProto(name=v.name, data_type=onnx.TensorProto.FLOAT,
                                 dims=list(p.shape), data_location=onnx.TensorProto.EXTERNAL)
            for key, value in (("location", data.name), ("offset", offset), ("length", length)):
                entry = t.external_data.add()
                entry.key, entry.value = key, str(value)
            g.initializer.append(t)
            if write is not None:
                f.seek(offset)
                write(v.name, aliases[v.name], f)
                if f.tell() != offset + length:
                    raise RuntimeError(f"{v.name}: {f.tell() - offset} bytes written for a "
                                       f"weight of {length}")
            total += length
            offset += -(-length // EXTERNAL_DATA_ALIGNMENT) * EXTERNAL_DATA_ALIGNMENT
        f.truncate(offset)  # what no weight wrote stays sparse
    return offset, total


def _check(path: Path) -> None:
    try:
        import onnx
    except ImportError:  # the check is a bonus; torch.onnx.export itself does not need onnx
        return
    onnx.checker.check_model(str(path))


def graph_summary(path: os.PathLike) -> Dict[str, Any]:
    """Op types (in node order), initializer names, and input/output names with their dims.

    Reads the graph only: external data is never loaded (a --weightless 7B model's data file is
    27 GB of zeros, which onnx.load would read into memory)."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
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
    p.add_argument("--arch", choices=arch_names(),
                   help="model architecture (required unless --preset or --hf gives it)")
    p.add_argument("--hf", type=Path, metavar="DIR",
                   help="export a Hugging Face save_pretrained directory instead (config.json "
                        "and safetensors or pytorch_model.bin weights; needs transformers): "
                        "input 'input_ids', output 'logits', opset 17, no constant folding, "
                        "weights as float32 external data in FILE.onnx.data, read and written "
                        "one tensor at a time. Takes --out, --train, --weights, --weightless "
                        "and --opset only")
    p.add_argument("--train", action="store_true",
                   help="--hf: export for sl-opt --sl-train: train mode with "
                        "TrainingMode.PRESERVE, every dropout probability set to 0 (default: "
                        "eval mode, for --sl-infer and --sl-generate)")
    p.add_argument("--weights", type=Path, metavar="FILE",
                   help="--hf: read the weights from FILE (safetensors, such as sl-run's --save "
                        "checkpoint, whose Adam moments are ignored; or a shard index) instead "
                        "of the directory's")
    p.add_argument("--preset", choices=preset_names(),
                   help="a real model's sizes (its arch and every size option; options given "
                        "too replace the preset's, e.g. --max-positions): " + "; ".join(
                       f"{n}: " + " ".join(f"{k}={v}" for k, v in preset_fields(n).items())
                       for n in preset_names()))
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
    p.add_argument("--external-data", action="store_true",
                   help="write the weights to one file FILE.onnx.data beside the model (ONNX "
                        "external data) instead of into it; needed past 2 GB of weights")
    p.add_argument("--weightless", action="store_true",
                   help="export the graph without ever holding the weights (any size): every "
                        "initializer is external data in FILE.onnx.data, created sparse and all "
                        "zeros; the graph is --no-constant-folding's. For sl-run "
                        "--random-weights. Transformers only; no --save-reference")
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
    if args.hf is not None:
        return _main_hf(parser, args, argv)
    for flag, given in (("--train", args.train), ("--weights", args.weights is not None)):
        if given:
            parser.error(f"{flag} goes with --hf")
    if args.preset is not None:
        preset_arch, _ = get_preset(args.preset)
        if args.arch not in (None, preset_arch):
            parser.error(f"--preset {args.preset} is a {preset_arch} model, not --arch {args.arch}")
        args.arch = preset_arch
        for field, value in preset_fields(args.preset).items():
            if field == "hidden":
                value = [value]
            if getattr(args, field, None) is None:
                setattr(args, field, value)
    if args.arch is None:
        parser.error("give --arch or --preset")
    arch = get_arch(args.arch)
    if args.weightless and args.arch == "mlp":
        parser.error("--weightless applies to the transformers (llama, gpt2, opt)")
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
        if args.preset is not None:  # the fields no option sets (rms_norm_eps)
            config = dataclasses.replace(config, **{
                k: v for k, v in preset_fields(args.preset).items() if not hasattr(args, k)})
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

    if args.weightless:
        for flag, given in (("--save-reference", args.save_reference is not None),
                            ("--external-data", args.external_data)):
            if given:
                parser.error(f"--weightless writes no weights: {flag} does not go with it")
        try:
            w = export_weightless(args.arch, config, args.out, opset=args.opset,
                                  batch=args.batch if args.batch is not None else DEFAULT_BATCH,
                                  seq=seq)
        except OSError as e:
            print(f"{parser.prog}: error: {e}", file=sys.stderr)
            return 1
        print(_format_summary(w.onnx_path, graph_summary(w.onnx_path)))
        print(f"wrote {w.data_path}: sparse, {w.data_path.stat().st_size} bytes of zeros for "
              f"{w.parameters} weights ({w.parameter_bytes / 1e9:.3f} GB of float32)")
        return 0

    try:
        res = export_model(
            args.arch, config, args.out, seed=args.seed, opset=args.opset,
            input_rank=args.input_rank, constant_folding=args.constant_folding,
            batch=args.batch if args.batch is not None else DEFAULT_BATCH,
            seq=seq,
            reference_dir=args.save_reference, external_data=args.external_data)
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


def _main_hf(parser: argparse.ArgumentParser, args: argparse.Namespace,
             argv: Optional[Sequence[str]]) -> int:
    given = set(a.split("=")[0] for a in (sys.argv[1:] if argv is None else argv)
                if a.startswith("--"))
    allowed = {"--hf", "--out", "--train", "--weights", "--weightless", "--opset"}
    others = sorted(given - allowed)
    if others:
        parser.error(f"--hf takes the model from the directory: {', '.join(others)} does not "
                     f"go with it (it takes {', '.join(sorted(allowed - {'--hf'}))})")
    if args.weightless and args.weights is not None:
        parser.error("--weightless reads no weights: --weights does not go with it")
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a directory; give a file name such as model.onnx")
    from .hf import HFDirectoryError, HF_OPSET, export_hf

    opset = args.opset if "--opset" in given else HF_OPSET

    def log(msg: str) -> None:
        print(f"{parser.prog}: {msg}", file=sys.stderr)

    try:
        r = export_hf(args.hf, args.out, train=args.train, weightless=args.weightless,
                      weights=args.weights, opset=opset, log=log)
    except (HFDirectoryError, OSError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    print(_format_summary(r.onnx_path, graph_summary(r.onnx_path)))
    what = "sparse, zeros" if r.weightless else "float32 weights"
    print(f"wrote {r.data_path}: {what}, {r.data_path.stat().st_size} bytes for {r.parameters} "
          f"weights ({r.parameter_bytes / 1e9:.3f} GB) of the {r.model_type} model in {args.hf}")
    if r.unused:
        shown = ", ".join(r.unused[:5]) + (", ..." if len(r.unused) > 5 else "")
        log(f"note: {len(r.unused)} stored tensors no parameter reads: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
