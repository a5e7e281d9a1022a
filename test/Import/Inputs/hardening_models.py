"""Writes binary ONNX models for files-outside-the-model.test and nesting.test:

  hardening_models.py external DIR LOCATION
      DIR/model.onnx: y = x @ w, w a float [4, 4] initializer whose external data `location` is
      LOCATION (relative to DIR); w's 64 bytes are written to DIR/data/w.bin, where the test's
      RUN lines move or link them.
  hardening_models.py nested-if DIR DEPTH
      DIR/model.onnx: y = Identity(x) inside DEPTH If nodes, each the then-branch of the one
      around it, every condition a constant true.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def external(directory, location):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    with open(os.path.join(directory, "data", "w.bin"), "wb") as f:
        f.write(w.raw_data)
    w.raw_data = b""
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    # Serialized directly: onnx.save would write the (empty) data out again and change the
    # location's offset and length.
    with open(os.path.join(directory, "model.onnx"), "wb") as f:
        f.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
                .SerializeToString())


def nested_if(directory, depth):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    true = numpy_helper.from_array(np.array(True), "cond")
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "leaf", [], [y])
    body = leaf
    for level in range(depth):
        node = helper.make_node("If", ["cond"], ["y"], name=f"if{level}",
                                then_branch=body, else_branch=leaf)
        body = helper.make_graph([node], f"level{level}", [], [y])
    graph = helper.make_graph(list(body.node), "g", [x], [y], [true])
    # The checker would recurse as deep; the point is what sl-opt says.
    with open(os.path.join(directory, "model.onnx"), "wb") as f:
        f.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
                .SerializeToString())


kind, directory = sys.argv[1], sys.argv[2]
os.makedirs(directory, exist_ok=True)
if kind == "external":
    external(directory, sys.argv[3])
elif kind == "nested-if":
    nested_if(directory, int(sys.argv[3]))
else:
    sys.exit(f"unknown kind {kind}")
