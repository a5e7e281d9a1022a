"""Writes binary ONNX models with Loop and sequence operators for loop.test (ONNX text cannot
spell sequence types in onnx 1.12, so these are built with onnx.helper):

  loop_models.py NAME PATH
    repeat              x [batch, 2] with each column repeated twice, the way torch.onnx writes
                        repeat_interleave (SplitToSequence, a Loop over SequenceAt/SequenceInsert,
                        ConcatFromSequence), with the loop's scan output; the same over a constant
                        table; and a loop without a trip count that its condition stops.
    trip-count-input    a Loop whose trip count is a graph input.
    condition-from-data a Loop whose body computes its condition from x's values.
    split-dynamic       SplitToSequence along the dynamic batch dimension.
    sequence-as-tensor  a sequence read by Relu.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT_SEQ = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value)))


def scalar(name, elem):
    return helper.make_tensor_value_info(name, elem, [])


def repeat_body(pieces, prefix, scan):
    """(i, c, acc) -> (c, acc + [Tile(pieces[i], [1, 2])]) and, if `scan`, that tile."""
    nodes = [
        helper.make_node("SequenceAt", [pieces, f"{prefix}i"], [f"{prefix}piece"]),
        const(f"{prefix}reps", np.array([1, 2], dtype=np.int64)),
        helper.make_node("Tile", [f"{prefix}piece", f"{prefix}reps"], [f"{prefix}rep"]),
        helper.make_node("SequenceInsert", [f"{prefix}acc", f"{prefix}rep"], [f"{prefix}acc2"]),
        helper.make_node("Identity", [f"{prefix}c"], [f"{prefix}c2"]),
    ]
    inputs = [scalar(f"{prefix}i", TensorProto.INT64), scalar(f"{prefix}c", TensorProto.BOOL),
              helper.make_value_info(f"{prefix}acc", FLOAT_SEQ)]
    outputs = [scalar(f"{prefix}c2", TensorProto.BOOL),
               helper.make_value_info(f"{prefix}acc2", FLOAT_SEQ)]
    if scan:
        outputs.append(helper.make_tensor_value_info(f"{prefix}rep", TensorProto.FLOAT, None))
    return helper.make_graph(nodes, f"{prefix}body", inputs, outputs)


def x_input():
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])


def out(name, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, None)


def repeat():
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["pieces"], axis=1),
        helper.make_node("SequenceLength", ["pieces"], ["n"]),
        const("yes", np.array(True)),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "yes", "empty"], ["out", "stacked"], name="repeat",
                         body=repeat_body("pieces", "", scan=True)),
        helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=1),
        # The same over a constant, with a trip count and no condition: folds while importing.
        const("t", np.array([[1, 2, 3]], dtype=np.float32)),
        const("three", np.array(3, dtype=np.int64)),
        helper.make_node("SplitToSequence", ["t"], ["tpieces"], axis=1),
        helper.make_node("SequenceEmpty", [], ["tempty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["three", "", "tempty"], ["tout"], name="table",
                         body=repeat_body("tpieces", "t", scan=False)),
        helper.make_node("ConcatFromSequence", ["tout"], ["table"], axis=1),
    ]
    # No trip count: the condition the body computes (i < 2) stops it after three iterations,
    # each adding 1 to the carried count.
    count_body = helper.make_graph(
        [const("one", np.array(1, dtype=np.int64)), const("two", np.array(2, dtype=np.int64)),
         helper.make_node("Add", ["v", "one"], ["v2"]),
         helper.make_node("Less", ["k", "two"], ["more"])],
        "count_body",
        [scalar("k", TensorProto.INT64), scalar("kc", TensorProto.BOOL),
         scalar("v", TensorProto.INT64)],
        [scalar("more", TensorProto.BOOL), scalar("v2", TensorProto.INT64)])
    nodes += [const("zero", np.array(0, dtype=np.int64)),
              helper.make_node("Loop", ["", "yes", "zero"], ["count"], name="count",
                               body=count_body)]
    return helper.make_graph(nodes, "g", [x_input()],
                             [out("y"), out("stacked"), out("table"),
                              out("count", TensorProto.INT64)])


def trip_count_input():
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["pieces"], axis=1),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "", "empty"], ["out"], name="runtime_count",
                         body=repeat_body("pieces", "", scan=False)),
        helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=1),
    ]
    return helper.make_graph(nodes, "g", [x_input(), scalar("n", TensorProto.INT64)], [out("y")])


def condition_from_data():
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["v"], ["total"], keepdims=0),
         const("zero", np.array(0, dtype=np.float32)),
         helper.make_node("Less", ["total", "zero"], ["negative"]),
         helper.make_node("Neg", ["v"], ["v2"])],
        "body",
        [scalar("i", TensorProto.INT64), scalar("c", TensorProto.BOOL),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, ["batch", 2])],
        [scalar("negative", TensorProto.BOOL),
         helper.make_tensor_value_info("v2", TensorProto.FLOAT, ["batch", 2])])
    nodes = [const("four", np.array(4, dtype=np.int64)),
             helper.make_node("Loop", ["four", "", "x"], ["y"], name="data_condition",
                              body=body)]
    return helper.make_graph(nodes, "g", [x_input()], [out("y")])


def split_dynamic():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, name="rows"),
             helper.make_node("ConcatFromSequence", ["rows"], ["y"], axis=0)]
    return helper.make_graph(nodes, "g", [x_input()], [out("y")])


def sequence_as_tensor():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["pieces"], axis=1),
             helper.make_node("Relu", ["pieces"], ["y"], name="relu")]
    return helper.make_graph(nodes, "g", [x_input()], [out("y")])


MODELS = {"repeat": repeat, "trip-count-input": trip_count_input,
          "condition-from-data": condition_from_data, "split-dynamic": split_dynamic,
          "sequence-as-tensor": sequence_as_tensor}

if __name__ == "__main__":
    graph = MODELS[sys.argv[1]]()
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[2])
