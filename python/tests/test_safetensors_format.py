"""The runtime's safetensors files against the format itself (runtime/src/checkpoint/safetensors.cc).

Files slrt writes are parsed by an independent reader written here from the format's description,
and files written here by the description (or by the `safetensors` package, when installed) are
read by slrt. slrt is driven through the test-only tool test/unit/safetensors_roundtrip_main.cc,
whose path ctest passes in SL_SAFETENSORS_TOOL; the tests skip when it is unset.
"""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

# safetensors dtype -> numpy; numpy has no bfloat16, so BF16 tensors are compared as raw bytes.
_NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
          "BOOL": "|b1"}
_SAFETENSORS = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64",
                "int32": "I32", "bool": "BOOL"}


def read_safetensors(path):
    """Returns ({name: (dtype, array)} in data order, metadata), checking the layout strictly:
    8-byte little-endian header length, JSON header, contiguous data_offsets that tile the data."""
    raw = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = raw[8 + length:]
    tensors, covered = {}, 0
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        assert set(info) == {"dtype", "shape", "data_offsets"}, name
        begin, end = info["data_offsets"]
        assert begin == covered, f"{name}: data does not start where the previous tensor ends"
        dtype = np.dtype(_NUMPY[info["dtype"]])
        assert end - begin == dtype.itemsize * int(np.prod(info["shape"], dtype=np.int64)), name
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        tensors[name] = (info["dtype"], array)
        covered = end
    assert covered == len(data), "bytes after the last tensor"
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    """Writes {name: (dtype, array)}, listing the header in reverse so that header order and data
    order differ (readers must go by the offsets)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header = dict(reversed(list(header.items())))
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode("utf-8")
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


@pytest.fixture
def tool():
    value = os.environ.get("SL_SAFETENSORS_TOOL")
    if not value:
        pytest.skip("SL_SAFETENSORS_TOOL is not set: point it at the built safetensors_roundtrip "
                    "(ctest does)")
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        pytest.fail(f"SL_SAFETENSORS_TOOL={value!r} is not an executable file")
    return value


def _run(args):
    return subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)


def _sample_arrays():
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((2, 3)).astype(np.float32)
    f32[0, 0] = np.nan
    f32[1, 2] = -0.0
    return {
        "model.embed_tokens.weight": f32,
        "onnx::MatMul_42": rng.standard_normal((3, 4)).astype(np.float32),
        "scale": np.array(2.5, dtype=np.float64),
        "positions": np.array([-1, 0, 2**40, -2**62], dtype=np.int64),
        "counts": rng.integers(-1000, 1000, size=(2, 2, 2), dtype=np.int32),
        "mask": np.array([True, False, True, True, False]),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }


def _save_with_slrt(tool, tmp_path, arrays, metadata):
    args = [tool, "write", tmp_path / "out.safetensors"]
    for key, value in metadata.items():
        args += ["--meta", f"{key}={value}"]
    for i, (name, array) in enumerate(arrays.items()):
        np.save(tmp_path / f"in{i}.npy", array)
        args.append(f"{name}={tmp_path / f'in{i}.npy'}")
    proc = _run(args)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "out.safetensors"


def _load_with_slrt(tool, tmp_path, path):
    out = tmp_path / "read"
    out.mkdir()
    proc = _run([tool, "read", path, out])
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    tensors = {}
    for t in manifest["tensors"]:
        if t["file"].endswith(".npy"):
            array = np.load(t["file"])
        else:
            dtype = {"f16": "<f2", "bf16": "<u2"}[t["dtype"]]
            array = np.fromfile(t["file"], dtype=dtype).reshape(t["shape"])
        assert list(array.shape) == t["shape"], t["name"]
        tensors[t["name"]] = array
    return tensors, manifest["metadata"]


def _assert_same(actual, expected, name):
    assert actual.dtype == expected.dtype, name
    assert actual.shape == expected.shape, name
    assert actual.tobytes() == expected.tobytes(), name


def test_slrt_file_reads_with_an_independent_reader(tool, tmp_path):
    arrays = _sample_arrays()
    metadata = {"speedloader.step": "12", "note": "ünïcode"}
    path = _save_with_slrt(tool, tmp_path, arrays, metadata)

    (length,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert (8 + length) % 8 == 0, "the data should start 8-byte aligned, as the reference writer does"
    tensors, read_metadata = read_safetensors(path)
    assert read_metadata == metadata
    assert list(tensors) == list(arrays), "data order is the order given"
    for name, array in arrays.items():
        dtype, read = tensors[name]
        assert dtype == _SAFETENSORS[array.dtype.name], name
        _assert_same(read, array, name)


def test_spec_file_reads_with_slrt(tool, tmp_path):
    arrays = _sample_arrays()
    specs = {name: (_SAFETENSORS[a.dtype.name], a) for name, a in arrays.items()}
    specs["half"] = ("F16", np.array([1.5, -2.0, 65504.0], dtype=np.float16))
    specs["brain"] = ("BF16", np.array([[0x3f80, 0xc000]], dtype=np.uint16))
    write_safetensors(tmp_path / "spec.safetensors", specs, {"format": "np"})

    tensors, metadata = _load_with_slrt(tool, tmp_path, tmp_path / "spec.safetensors")
    assert metadata == {"format": "np"}
    assert list(tensors) == list(specs), "slrt lists tensors in data order"
    for name, (_, array) in specs.items():
        _assert_same(tensors[name], array, name)


def test_safetensors_package_agrees(tool, tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = _sample_arrays()
    ours = _save_with_slrt(tool, tmp_path, arrays, {"format": "np"})
    for name, array in st.load_file(str(ours)).items():
        _assert_same(array, arrays[name], name)
    st.save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"format": "np"})
    tensors, _ = _load_with_slrt(tool, tmp_path, tmp_path / "theirs.safetensors")
    for name, array in arrays.items():
        _assert_same(tensors[name], array, name)


@pytest.mark.parametrize("cut", [4, 40, -1])
def test_damaged_file_is_a_clear_error(tool, tmp_path, cut):
    path = _save_with_slrt(tool, tmp_path, _sample_arrays(), {})
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(path.read_bytes()[:cut])
    out = tmp_path / "read"
    out.mkdir()
    proc = _run([tool, "read", damaged, out])
    assert proc.returncode == 1
    assert str(damaged) in proc.stderr and "truncated" in proc.stderr, proc.stderr
    assert not any(out.iterdir()), "no partial output"
