"""Writes binary ONNX models that sl-opt must refuse, each as DIR/KIND/model.onnx.

Most models are y = x @ w with w a float [4, 4] initializer (a parameter); each KIND breaks one
thing (what ONNX text cannot express; errors.test has the rest):
  huge-initializer            w's dims are [2^62, 4] (no data: only the shape is wrong)
  negative-initializer-dim    w's dims are [-4, 4]
  not-onnx                    a text file
  empty                       no bytes at all
  no-graph                    a model with an opset but no graph
  input-without-shape         x has no shape
  input-negative-dim          x is float [-2, 4]
  input-not-a-tensor          x is a sequence of tensors
and, with w in weights.bin beside the model:
  external-truncated          the file cut to half of w
  external-negative-offset    offset "-8"
  external-past-end           offset 2^63
  external-huge-length        length 2^64-1 at offset 4
  external-short-length       length 32 (w needs 64)
  external-absolute           location "/etc/passwd"
  external-parent             location "../weights.bin"
and y = x + c with c an int64 initializer (a constant, not a parameter):
  constant-external           c in an external file
  constant-negative-dim       c's dims are [-2]
  constant-too-large          c's dims are [2^20, 2^20] (no data)
  constant-raw-size           c is int64 [2] with 7 bytes of raw_data
  constant-value-count        c is int64 [2] with 3 values in int64_data
  constant-string             c is a string tensor
and:
  missing-input               y = Add(x, ""): a required input left out
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(w_dims=None, x=None):
    x = x or helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    if w_dims:
        del w.dims[:]
        w.dims.extend(w_dims)
        w.raw_data = b""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def constant_model(directory, edit):
    """y = x + c, x and c int64 [2]; `edit` changes c."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [2])
    c = numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "c")
    edit(c)
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "g", [x], [y], [c])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]),
              os.path.join(directory, "model.onnx"))


def dims(tensor, new_dims):
    del tensor.dims[:]
    tensor.dims.extend(new_dims)
    tensor.raw_data = b""


def typed(tensor, values):
    tensor.raw_data = b""
    tensor.int64_data.extend(values)


def external_constant(tensor):
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "c.bin"
    tensor.raw_data = b""


def no_graph(directory):
    bare = onnx.ModelProto()
    bare.ir_version = 8
    bare.opset_import.add().version = 14
    with open(os.path.join(directory, "model.onnx"), "wb") as f:
        f.write(bare.SerializeToString())


def save(directory, m):
    onnx.save(m, os.path.join(directory, "model.onnx"))


def external(directory, edit):
    path = os.path.join(directory, "model.onnx")
    onnx.save_model(model(), path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    saved = onnx.load(path, load_external_data=False)
    w = saved.graph.initializer[0]

    def entry(key, value):
        for e in w.external_data:
            if e.key == key:
                e.value = value
                return
        e = w.external_data.add()
        e.key, e.value = key, value

    edit(entry, os.path.join(directory, "weights.bin"))
    onnx.save(saved, path)


def truncate(entry, weights):
    with open(weights, "r+b") as f:
        f.truncate(32)


root = sys.argv[1]
x_without_shape = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
x_sequence = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2, 4])
kinds = {
    "huge-initializer": lambda d: save(d, model(w_dims=[2**62, 4])),
    "negative-initializer-dim": lambda d: save(d, model(w_dims=[-4, 4])),
    "no-graph": no_graph,
    "input-without-shape": lambda d: save(d, model(x=x_without_shape)),
    "input-negative-dim": lambda d: save(
        d, model(x=helper.make_tensor_value_info("x", TensorProto.FLOAT, [-2, 4]))),
    "input-not-a-tensor": lambda d: save(d, model(x=x_sequence)),
    "external-short-length": lambda d: external(d, lambda e, _: e("length", "32")),
    "constant-external": lambda d: constant_model(d, external_constant),
    "constant-negative-dim": lambda d: constant_model(d, lambda c: dims(c, [-2])),
    "constant-too-large": lambda d: constant_model(d, lambda c: dims(c, [2**20, 2**20])),
    "constant-raw-size": lambda d: constant_model(
        d, lambda c: setattr(c, "raw_data", b"\0" * 7)),
    "constant-value-count": lambda d: constant_model(d, lambda c: typed(c, [1, 2, 3])),
    "constant-string": lambda d: constant_model(
        d, lambda c: c.CopyFrom(helper.make_tensor("c", TensorProto.STRING, [2], [b"a", b"b"]))),
    "missing-input": lambda d: save(d, helper.make_model(
        helper.make_graph([helper.make_node("Add", ["x", ""], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 14)])),
    "not-onnx": lambda d: open(os.path.join(d, "model.onnx"), "w").write("not a model\n"),
    "empty": lambda d: open(os.path.join(d, "model.onnx"), "w").close(),
    "external-truncated": lambda d: external(d, truncate),
    "external-negative-offset": lambda d: external(d, lambda e, _: e("offset", "-8")),
    "external-past-end": lambda d: external(d, lambda e, _: e("offset", str(2**63))),
    "external-huge-length": lambda d: external(
        d, lambda e, _: (e("offset", "4"), e("length", str(2**64 - 1)))),
    "external-absolute": lambda d: external(d, lambda e, _: e("location", "/etc/passwd")),
    "external-parent": lambda d: external(d, lambda e, _: e("location", "../weights.bin")),
}
for kind, write in kinds.items():
    directory = os.path.join(root, kind)
    os.makedirs(directory, exist_ok=True)
    write(directory)
