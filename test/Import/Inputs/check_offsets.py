"""Reads sl-opt's IR on stdin and checks that every `sl.param ... from FILE at OFFSET` points at
exactly the initializer's values in FILE (the model given as argv[1] is the reference)."""
import re
import sys

import numpy as np
import onnx
import onnx.numpy_helper

model = onnx.load(sys.argv[1])
expected = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
pattern = re.compile(r'sl\.param "([^"]+)" from "([^"]+)" at (\d+) : tensor<([0-9x]+)xf32>')
found = 0
for name, path, offset, shape in pattern.findall(sys.stdin.read()):
    dims = [int(d) for d in shape.split("x")]
    with open(path, "rb") as f:
        f.seek(int(offset))
        data = np.frombuffer(f.read(4 * int(np.prod(dims))), dtype="<f4").reshape(dims)
    if not np.array_equal(data, expected[name]):
        sys.exit(f"parameter {name}: bytes at {path}:{offset} are {data}, expected {expected[name]}")
    found += 1
if found != len(expected):
    sys.exit(f"found {found} parameters, expected {len(expected)}")
print(f"{found} parameters at the right offsets")
