"""A tiny NumPy interpreter for the ONNX ops our exporters emit.

It exists so the tests can show, without sl-opt or sl-run, that an exported graph computes what
PyTorch computed (neither onnxruntime nor onnx.reference is available on Debian bookworm). It
supports only the ops listed in `_OPS` and refuses anything else by name; it is a test oracle, not
a runtime.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Union

import numpy as np

if TYPE_CHECKING:
    import onnx


def _attrs(node) -> Dict[str, object]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


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


_OPS: Dict[str, Callable[[List[np.ndarray], Mapping[str, object]], List[np.ndarray]]] = {
    "Gemm": _gemm,
    "MatMul": lambda i, a: [np.matmul(i[0], i[1])],
    "Add": lambda i, a: [i[0] + i[1]],
    "Sub": lambda i, a: [i[0] - i[1]],
    "Mul": lambda i, a: [i[0] * i[1]],
    "Div": lambda i, a: [i[0] / i[1]],
    "Relu": lambda i, a: [np.maximum(i[0], np.zeros((), i[0].dtype))],
    "Sigmoid": lambda i, a: [_sigmoid(i[0])],
    "Transpose": lambda i, a: [np.transpose(i[0], a.get("perm"))],
    "Identity": lambda i, a: [i[0]],
}


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
    for node in g.node:
        if node.domain not in ("", "ai.onnx"):
            raise NotImplementedError(f"op {node.domain}::{node.op_type} is not supported")
        if node.op_type == "Constant":
            outs = [numpy_helper.to_array(_attrs(node)["value"])]
        else:
            fn = _OPS.get(node.op_type)
            if fn is None:
                raise NotImplementedError(f"op {node.op_type} ({node.name}) is not supported")
            ins = [env[n] if n else None for n in node.input]
            outs = fn(ins, _attrs(node))
        for name, val in zip(node.output, outs):
            env[name] = val
    return {v.name: env[v.name] for v in g.output}
