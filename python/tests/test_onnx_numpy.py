"""The NumPy ONNX evaluator (speedloader.reference.onnx_numpy), the oracle of the export tests.

Checked against ONNX's own node tests (Debian's libonnx-testdata, when installed): every one-node
test whose operator the evaluator claims must reproduce ONNX's reference outputs.
"""

import glob
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from speedloader.reference import onnx_numpy

NODE_DIR = Path("/usr/share/libonnx-testdata/data/node")

# Node tests of claimed operators that the evaluator does not reproduce, with the reason.
NOT_SUPPORTED = {
    "test_cast_BFLOAT16_to_FLOAT": "bfloat16 tensors",
    "test_cast_FLOAT_to_BFLOAT16": "bfloat16 tensors",
    "test_cast_FLOAT_to_STRING": "string tensors",
    "test_castlike_BFLOAT16_to_FLOAT_expanded": "bfloat16 tensors",
    "test_castlike_FLOAT_to_BFLOAT16_expanded": "bfloat16 tensors",
    "test_castlike_FLOAT_to_STRING_expanded": "string tensors",
}


def _load_tensors(directory, kind):
    out = []
    for f in sorted(glob.glob(os.path.join(directory, f"{kind}_*.pb"))):
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        out.append(numpy_helper.to_array(t))
    return out


def _node_cases():
    if not NODE_DIR.is_dir():
        return []
    supported = set(onnx_numpy.supported_ops())
    cases = []
    for name in sorted(os.listdir(NODE_DIR)):
        try:
            model = onnx.load(str(NODE_DIR / name / "model.onnx"))
        except Exception:  # a newer IR than this onnx reads
            continue
        if not {n.op_type for n in model.graph.node} <= supported:
            continue
        if any(not i.type.HasField("tensor_type") for i in
               list(model.graph.input) + list(model.graph.output)):
            continue  # sequences, optionals
        marks = [pytest.mark.xfail(reason=NOT_SUPPORTED[name], strict=True)] \
            if name in NOT_SUPPORTED else []
        cases.append(pytest.param(name, id=name, marks=marks))
    return cases


NODE_CASES = _node_cases()


@pytest.mark.skipif(not NODE_CASES, reason=f"no ONNX node tests in {NODE_DIR} (Debian package "
                                           f"libonnx-testdata)")
@pytest.mark.parametrize("name", NODE_CASES or [None])
def test_onnx_node_conformance(name):
    model = onnx.load(str(NODE_DIR / name / "model.onnx"))
    data_sets = sorted(glob.glob(str(NODE_DIR / name / "test_data_set_*")))
    assert data_sets
    for ds in data_sets:
        inputs, expected = _load_tensors(ds, "input"), _load_tensors(ds, "output")
        feeds = {v.name: a for v, a in zip(model.graph.input, inputs)}
        got = onnx_numpy.run(model, feeds)
        for v, want in zip(model.graph.output, expected):
            g = got[v.name]
            assert g.dtype == want.dtype and g.shape == want.shape, \
                (v.name, g.dtype, g.shape, want.dtype, want.shape)
            if want.dtype.kind == "f":
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(g, want)


def test_supported_ops_cover_the_decoders():
    for op in ("Shape", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Expand",
               "Cast", "Range", "ConstantOfShape", "Less", "Equal", "Where", "If", "Pow",
               "ReduceMean", "Sqrt", "Div", "Neg", "Max", "Softmax", "Split", "Tanh", "Erf",
               "LayerNormalization", "Gemm", "MatMul", "Transpose", "Sigmoid", "Relu",
               "Identity", "Constant", "Trilu"):
        assert op in onnx_numpy.supported_ops(), op
# --- edge semantics the decoders rely on ----------------------------------------------------------

def _graph(nodes, inputs, outputs, initializers=(), opset=14):
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, elem=onnx.TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, None)


def test_evaluator_op_semantics():
    I64 = onnx.TensorProto.INT64
    c = lambda name, arr: numpy_helper.from_array(np.asarray(arr), name)  # noqa: E731
    m = _graph(
        [helper.make_node("Div", ["a", "b"], ["div"]),
         helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
         helper.make_node("Split", ["x"], ["s0", "s1"], axis=1),
         helper.make_node("Expand", ["row", "shape"], ["ex"]),
         helper.make_node("Trilu", ["sq"], ["tu"], upper=1),
         helper.make_node("Equal", ["one", "one"], ["eq"]),
         helper.make_node("If", ["eq"], ["if"],
                          then_branch=helper.make_graph(
                              [helper.make_node("Squeeze", ["x3", "ax0"], ["then_out"])],
                              "then", [], [_vi("then_out")]),
                          else_branch=helper.make_graph(
                              [helper.make_node("Identity", ["x3"], ["else_out"])],
                              "else", [], [_vi("else_out")])),
         helper.make_node("Range", ["zero", "five", "one_s"], ["rg"]),
         helper.make_node("ConstantOfShape", ["shape"], ["cs"],
                          value=numpy_helper.from_array(np.array([7], np.int64))),
         helper.make_node("Erf", ["e"], ["erf"]),
         helper.make_node("LayerNormalization", ["x", "w", "bb"], ["ln"], epsilon=1e-5)],
        [_vi("x"), _vi("a", I64), _vi("b", I64)],
        [_vi(n) for n in ("div", "sl", "s0", "s1", "ex", "tu", "if", "rg", "cs", "erf", "ln")],
        [c("st", [-1]), c("en", [-(2**63)]), c("ax", [1]), c("sp", [-2]),
         c("row", np.arange(3, dtype=np.float32)), c("shape", [2, 3]),
         c("sq", np.ones((3, 3), np.float32)), c("one", [1]),
         c("x3", np.ones((1, 2), np.float32)), c("ax0", [0]), c("zero", np.int64(0)),
         c("five", np.int64(5)), c("one_s", np.int64(1)),
         c("e", np.array([-1.0, 0.0, 0.5], np.float32)), c("w", np.full(4, 2, np.float32)),
         c("bb", np.ones(4, np.float32))])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = onnx_numpy.run(m, {"x": x, "a": np.array([7, -7]), "b": np.array([2, 2])})
    np.testing.assert_array_equal(out["div"], [3, -3])  # truncation toward zero
    np.testing.assert_array_equal(out["sl"], x[:, ::-2])
    np.testing.assert_array_equal(out["s0"], x[:, :2])
    np.testing.assert_array_equal(out["s1"], x[:, 2:])
    np.testing.assert_array_equal(out["ex"], [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(out["tu"], np.triu(np.ones((3, 3))))
    np.testing.assert_array_equal(out["if"], [1, 1])
    np.testing.assert_array_equal(out["rg"], np.arange(5))
    assert out["cs"].dtype == np.int64 and out["cs"].tolist() == [[7] * 3] * 2
    np.testing.assert_allclose(out["erf"], [-0.8427008, 0.0, 0.5204999], rtol=1e-6)
    mean = x.mean(-1, keepdims=True)
    want = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * 2 + 1
    np.testing.assert_allclose(out["ln"], want, rtol=1e-5, atol=1e-6)


def test_evaluator_refuses_unknown_ops():
    m = _graph([helper.make_node("Conv", ["x", "x"], ["y"], name="/c/Conv")], [_vi("x")],
               [_vi("y")])
    with pytest.raises(NotImplementedError, match="Conv"):
        onnx_numpy.run(m, {"x": np.ones((1, 1, 2, 2), np.float32)})
