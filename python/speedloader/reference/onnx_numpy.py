"""A tiny NumPy interpreter for the ONNX ops our exporters emit.

It exists so the tests can show, without sl-opt or sl-run, that an exported graph computes what
PyTorch computed (neither onnxruntime nor onnx.reference is available on Debian bookworm). It
supports only the ops listed in `_OPS` (plus ``Constant`` and ``If``) and refuses anything else by
name; it is a test oracle, not a runtime. It covers what torch.onnx.export (torch 1.13, opsets 13
to 17) writes for the mlp, llama, gpt2 and opt architectures (see models/EXPORTS.md), with the
semantics of the ONNX operator specification for the forms that appear there: the opset-13+
forms of Squeeze, Unsqueeze, Split and ReduceSum (axes as inputs), ReduceMean with an ``axes``
attribute (or, from opset 18, input), integer Div truncating toward zero.

Arithmetic happens in the tensors' own dtypes (float32 stays float32), so the result is what an
fp32 implementation of the graph computes, up to summation order.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

if TYPE_CHECKING:
    import onnx


def _attrs(node) -> Dict[str, object]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _np_dtype(onnx_type: int) -> np.dtype:
    from onnx import mapping

    return np.dtype(mapping.TENSOR_TYPE_TO_NP_TYPE[int(onnx_type)])


def _ints(a: Optional[np.ndarray]) -> List[int]:
    return [] if a is None else [int(v) for v in np.asarray(a).reshape(-1)]


def _norm_axes(axes: Sequence[int], rank: int) -> List[int]:
    out = []
    for ax in axes:
        if not -rank <= ax < rank:
            raise ValueError(f"axis {ax} out of range for rank {rank}")
        out.append(ax % rank)
    return out


# --- elementwise and linear algebra ---------------------------------------------------------------

def _gemm(ins: List[np.ndarray], at: Mapping[str, object]) -> List[np.ndarray]:
    a, b = ins[0], ins[1]
    if at.get("transA", 0):
        a = a.T
    if at.get("transB", 0):
        b = b.T
    y = np.float32(at.get("alpha", 1.0)) * (a @ b)
    if len(ins) > 2 and ins[2] is not None:
        y = y + np.float32(at.get("beta", 1.0)) * ins[2]
    return [y]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


def _div(ins, at):
    a, b = ins
    if np.issubdtype(a.dtype, np.integer):
        # ONNX (like C) truncates integer division toward zero.
        q = np.abs(a) // np.abs(b)
        return [(np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))]
    return [a / b]


def _pow(ins, at):
    x, y = ins
    return [np.power(x, y.astype(x.dtype) if np.issubdtype(x.dtype, np.floating) else y)
            .astype(x.dtype)]


_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_op(ins, at):
    x = ins[0]
    return [_erf(x.astype(np.float64)).astype(x.dtype)]


def _variadic(fn):
    def op(ins, at):
        out = ins[0]
        for x in ins[1:]:
            out = fn(out, x)
        return [out]
    return op


def _softmax(ins, at):
    x = ins[0]
    axis = int(at.get("axis", -1))
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return [(e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)]


def _layer_norm(ins, at):
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    axis = int(at.get("axis", -1)) % x.ndim
    eps = np.float32(at.get("epsilon", 1e-5))
    axes = tuple(range(axis, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv_std = (1.0 / np.sqrt(var + eps)).astype(x.dtype)
    y = d * inv_std * scale
    if bias is not None:
        y = y + bias
    return [y.astype(x.dtype), mean, inv_std]


def _reduce(fn):
    def op(ins, at):
        x = ins[0]
        axes = at.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = _ints(ins[1])
        keep = bool(at.get("keepdims", 1))
        if not axes:
            if at.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.ndim))
        return [fn(x, axis=tuple(_norm_axes(axes, x.ndim)), keepdims=keep).astype(x.dtype)]
    return op


# --- shapes and indexing --------------------------------------------------------------------------

def _shape(ins, at):
    shape = np.array(ins[0].shape, dtype=np.int64)
    start = int(at.get("start", 0))
    end = at.get("end")
    return [shape[start:] if end is None else shape[start:int(end)]]


def _reshape(ins, at):
    x, shape = ins[0], _ints(ins[1])
    if not at.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [np.reshape(x, shape)]


def _unsqueeze(ins, at):
    x = ins[0]
    axes = _ints(ins[1]) if len(ins) > 1 else list(at["axes"])
    rank = x.ndim + len(axes)
    shape = list(x.shape)
    for ax in sorted(_norm_axes(axes, rank)):
        shape.insert(ax, 1)
    return [np.reshape(x, shape)]


def _squeeze(ins, at):
    x = ins[0]
    axes = _ints(ins[1]) if len(ins) > 1 and ins[1] is not None else at.get("axes")
    if axes is None:
        return [np.squeeze(x)]
    axes = _norm_axes(list(axes), x.ndim)
    for ax in axes:
        if x.shape[ax] != 1:
            raise ValueError(f"Squeeze: axis {ax} of shape {list(x.shape)} is not 1")
    return [np.squeeze(x, axis=tuple(axes))]


def _concat(ins, at):
    return [np.concatenate([np.asarray(i) for i in ins], axis=int(at["axis"]))]


def _gather(ins, at):
    data, idx = ins
    axis = int(at.get("axis", 0)) % data.ndim
    idx = np.asarray(idx).astype(np.int64)
    n = data.shape[axis]
    if np.any(idx < -n) or np.any(idx >= n):
        raise IndexError(f"Gather: index out of range [{-n}, {n}) on axis {axis}")
    return [np.take(data, idx, axis=axis)]


def _slice(ins, at):
    x = ins[0]
    starts, ends = _ints(ins[1]), _ints(ins[2])
    axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for ax, s, e, st in zip(_norm_axes(axes, x.ndim), starts, ends, steps):
        if st == 0:
            raise ValueError("Slice: step 0")
        # Python slicing clamps the way ONNX specifies (INT64_MAX / INT64_MIN ends included).
        index[ax] = slice(s, e, st)
    return [x[tuple(index)]]


def _split(ins, at):
    x = ins[0]
    axis = int(at.get("axis", 0)) % x.ndim
    if len(ins) > 1 and ins[1] is not None:
        sizes = _ints(ins[1])
    elif "split" in at:
        sizes = list(at["split"])
    else:
        n = int(at.get("num_outputs", 0)) or int(at["_n_outputs"])
        chunk = -(-x.shape[axis] // n)
        sizes = [min(chunk, x.shape[axis] - i * chunk) for i in range(n)]
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"Split: sizes {sizes} do not add up to {x.shape[axis]}")
    return list(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _expand(ins, at):
    x, shape = ins[0], _ints(ins[1])
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))).copy()]


def _constant_of_shape(ins, at):
    from onnx import numpy_helper

    value = at.get("value")
    v = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
    return [np.full(_ints(ins[0]), v, dtype=np.asarray(v).dtype)]


def _range(ins, at):
    start, limit, delta = (np.asarray(i).reshape(()) for i in ins)
    return [np.arange(start, limit, delta, dtype=start.dtype)]


_UNSUPPORTED_CAST = {16: "BFLOAT16", 8: "STRING"}


def _cast(ins, at):
    to = int(at["to"])
    if to in _UNSUPPORTED_CAST:
        raise NotImplementedError(f"Cast to {_UNSUPPORTED_CAST[to]} is not supported")
    return [np.asarray(ins[0]).astype(_np_dtype(to))]


def _trilu(ins, at):
    x = ins[0]
    k = int(np.asarray(ins[1]).reshape(())) if len(ins) > 1 and ins[1] is not None else 0
    return [np.triu(x, k) if at.get("upper", 1) else np.tril(x, k)]


def _where(ins, at):
    c, a, b = ins
    return [np.where(c, a, b).astype(np.result_type(a, b))]


_OPS: Dict[str, Callable[[List[np.ndarray], Mapping[str, object]], List[np.ndarray]]] = {
    # linear algebra, elementwise arithmetic
    "Gemm": _gemm,
    "MatMul": lambda i, a: [np.matmul(i[0], i[1])],
    "Add": lambda i, a: [i[0] + i[1]],
    "Sub": lambda i, a: [i[0] - i[1]],
    "Mul": lambda i, a: [i[0] * i[1]],
    "Div": _div,
    "Pow": _pow,
    "Neg": lambda i, a: [np.negative(i[0])],
    "Sqrt": lambda i, a: [np.sqrt(i[0])],
    "Reciprocal": lambda i, a: [(1 / i[0]).astype(i[0].dtype)],
    "Exp": lambda i, a: [np.exp(i[0])],
    "Tanh": lambda i, a: [np.tanh(i[0])],
    "Erf": _erf_op,
    "Max": _variadic(np.maximum),
    "Min": _variadic(np.minimum),
    # activations, normalisation
    "Relu": lambda i, a: [np.maximum(i[0], np.zeros((), i[0].dtype))],
    "Sigmoid": lambda i, a: [_sigmoid(i[0])],
    "Softmax": _softmax,
    "LayerNormalization": _layer_norm,
    "ReduceMean": _reduce(np.mean),
    "ReduceSum": _reduce(np.sum),
    # comparisons, logic, selection
    "Equal": lambda i, a: [np.equal(i[0], i[1])],
    "Less": lambda i, a: [np.less(i[0], i[1])],
    "Greater": lambda i, a: [np.greater(i[0], i[1])],
    "Not": lambda i, a: [np.logical_not(i[0])],
    "And": lambda i, a: [np.logical_and(i[0], i[1])],
    "Where": _where,
    "Trilu": _trilu,
    # shapes, indexing, data movement
    "Shape": _shape,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Gather": _gather,
    "Slice": _slice,
    "Split": _split,
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Cast": _cast,
    "Transpose": lambda i, a: [np.transpose(i[0], a.get("perm"))],
    "Identity": lambda i, a: [i[0]],
}


def supported_ops() -> List[str]:
    """The op types `run` evaluates (default domain)."""
    return sorted(set(_OPS) | {"Constant", "If"})


def _run_graph(g, env: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    from onnx import numpy_helper

    for node in g.node:
        if node.domain not in ("", "ai.onnx"):
            raise NotImplementedError(f"op {node.domain}::{node.op_type} is not supported")
        at = _attrs(node)
        if node.op_type == "Constant":
            if "value" not in at:
                raise NotImplementedError(f"Constant ({node.name}) without a 'value' attribute")
            outs = [numpy_helper.to_array(at["value"])]
        elif node.op_type == "If":
            cond = bool(np.asarray(env[node.input[0]]).reshape(()))
            branch = at["then_branch" if cond else "else_branch"]
            sub = _run_graph(branch, dict(env))
            outs = [sub[o.name] for o in branch.output]
        else:
            fn = _OPS.get(node.op_type)
            if fn is None:
                raise NotImplementedError(f"op {node.op_type} ({node.name}) is not supported")
            ins = [env[n] if n else None for n in node.input]
            if node.op_type == "Split":
                at["_n_outputs"] = len(node.output)
            outs = fn(ins, at)
        for name, val in zip(node.output, outs):
            if name:
                env[name] = np.asarray(val)
    return env


def run(model: Union[str, os.PathLike, "onnx.ModelProto"],
        feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Evaluates `model` on `feeds` (input name -> array); returns output name -> array."""
    import onnx
    from onnx import numpy_helper

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    g = model.graph
    env: Dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for v in g.input:
        if v.name in env:
            continue
        if v.name not in feeds:
            raise KeyError(f"missing input {v.name!r}")
        env[v.name] = np.asarray(feeds[v.name])
    env = _run_graph(g, env)
    return {v.name: env[v.name] for v in g.output}
