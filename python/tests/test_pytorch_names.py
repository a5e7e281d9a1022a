"""speedloader.pytorch_names: which folded weights map back to a PyTorch name, and which do not.

The whole path (an Optimum export trained by sl-run, its checkpoint renamed and compared with
PyTorch's trained weights) is in test_hf_optimum.py; these are the rules on small graphs.
"""

import json
import struct

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from speedloader.pytorch_names import folded_weights, main, rename_checkpoint


def graph(nodes, inits):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)]
    tensors = [numpy_helper.from_array(np.zeros(shape, np.float32), name)
               for name, shape in inits.items()]
    return helper.make_graph(nodes, "g", inputs, outputs, tensors)


def matmul(name, a, b, out):
    return helper.make_node("MatMul", [a, b], [out], name=name)


def test_mapped_and_kept_with_reasons():
    g = graph([
        matmul("/model/layers.0/q_proj/MatMul", "x", "onnx::MatMul_1", "q"),
        matmul("/model/layers.0/o_proj/MatMul", "q", "onnx::MatMul_2", "o"),
        matmul("/model/layers.1/o_proj/MatMul", "o", "onnx::MatMul_2", "o2"),  # two scopes
        helper.make_node("Add", ["o2", "onnx::Add_3"], ["a"], name="/model/Add"),
        matmul("MatMul_7", "a", "onnx::MatMul_4", "m"),  # no module scope
        matmul("/lm_head/MatMul", "m", "onnx::MatMul_5", "y1"),
        matmul("/head/MatMul", "y1", "onnx::MatMul_6", "y2"),  # head.weight exists
        helper.make_node("Add", ["y2", "head.weight"], ["y"], name="/Add"),
    ], {"onnx::MatMul_1": [4, 8], "onnx::MatMul_2": [8, 8], "onnx::Add_3": [2, 8],
        "onnx::MatMul_4": [8, 8], "onnx::MatMul_5": [8, 3], "onnx::MatMul_6": [3, 3],
        "head.weight": [2, 3]})
    mapped, kept = folded_weights(g)
    assert {k: (v.pytorch_name, v.onnx_shape) for k, v in mapped.items()} == {
        "onnx::MatMul_1": ("model.layers.0.q_proj.weight", (4, 8)),
        "onnx::MatMul_5": ("lm_head.weight", (8, 3))}
    assert "2 module scopes" in kept["onnx::MatMul_2"]
    assert "not read only as the weight of MatMul" in kept["onnx::Add_3"]
    assert "no module scope" in kept["onnx::MatMul_4"]
    assert "already an initializer" in kept["onnx::MatMul_6"]


def test_two_folded_weights_claiming_one_name_are_both_kept():
    g = graph([matmul("/proj/MatMul", "x", "onnx::MatMul_1", "a"),
               matmul("/proj/MatMul_1", "a", "onnx::MatMul_2", "b")],
              {"onnx::MatMul_1": [4, 4], "onnx::MatMul_2": [4, 4]})
    mapped, kept = folded_weights(g)
    assert mapped == {}
    assert all("claimed by 2" in why for why in kept.values()) and len(kept) == 2


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             np.float32).reshape(v["shape"]) for k, v in header.items()}


@pytest.fixture
def model(tmp_path):
    g = graph([matmul("/model/q_proj/MatMul", "x", "onnx::MatMul_1", "y")],
              {"onnx::MatMul_1": [4, 3]})
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(g), str(path))
    return path


def test_checkpoint_renamed_and_transposed_with_its_moments(tmp_path, model):
    rng = np.random.default_rng(0)
    w, m, v, b = (rng.standard_normal(s).astype(np.float32) for s in ([4, 3],) * 3 + ([5],))
    write_safetensors(tmp_path / "ckpt.safetensors", {
        "onnx::MatMul_1": w, "onnx::MatMul_1.adam_m": m, "onnx::MatMul_1.adam_v": v,
        "other.bias": b})
    renamed = rename_checkpoint(model, tmp_path / "ckpt.safetensors", tmp_path / "out.safetensors")
    assert renamed == {"onnx::MatMul_1": "model.q_proj.weight",
                       "onnx::MatMul_1.adam_m": "model.q_proj.weight.adam_m",
                       "onnx::MatMul_1.adam_v": "model.q_proj.weight.adam_v"}
    out = read_safetensors(tmp_path / "out.safetensors")
    assert sorted(out) == ["model.q_proj.weight", "model.q_proj.weight.adam_m",
                           "model.q_proj.weight.adam_v", "other.bias"]
    np.testing.assert_array_equal(out["model.q_proj.weight"], w.T)
    np.testing.assert_array_equal(out["model.q_proj.weight.adam_v"], v.T)
    np.testing.assert_array_equal(out["other.bias"], b)


def test_errors_name_the_problem(tmp_path, model, capsys):
    write_safetensors(tmp_path / "wrong.safetensors", {"onnx::MatMul_1": np.zeros((3, 4))})
    assert main([str(model), "--checkpoint", str(tmp_path / "wrong.safetensors"),
                 "--out", str(tmp_path / "out.safetensors")]) == 1
    assert "'onnx::MatMul_1' is [3, 4]; the graph's onnx::MatMul_1 is [4, 3]" in \
        capsys.readouterr().err
    assert not (tmp_path / "out.safetensors").exists()
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    assert main([str(tmp_path / "bad.onnx")]) == 1
    assert "not an ONNX model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(model), "--checkpoint", str(tmp_path / "wrong.safetensors")])
    assert main([str(model)]) == 0
    assert "onnx::MatMul_1 -> model.q_proj.weight (transposed)" in capsys.readouterr().out
