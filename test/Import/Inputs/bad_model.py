"""Writes binary ONNX models that sl-opt must refuse, each as DIR/KIND/model.onnx.

Every model is y = x @ w with w a float [4, 4] initializer; each KIND breaks one thing:
  huge-initializer            w's dims are [2^62, 4] (no data: only the shape is wrong)
  not-onnx                    a text file
  empty                       no bytes at all
and, with w in weights.bin beside the model:
  external-truncated          the file cut to half of w
  external-negative-offset    offset "-8"
  external-past-end           offset 2^63
  external-huge-length        length 2^64-1 at offset 4
  external-absolute           location "/etc/passwd"
  external-parent             location "../weights.bin"
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(huge=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    if huge:
        del w.dims[:]
        w.dims.extend([2**62, 4])
        w.raw_data = b""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


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
kinds = {
    "huge-initializer": lambda d: onnx.save(model(huge=True), os.path.join(d, "model.onnx")),
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
