"""Bad input to every reader of the real tools, run as a user would run them.

One tiny language model (built with onnx.helper: an embedding, two linear layers, a head; no
torch) is compiled once for training and once for inference. Each test then breaks one input (a
schedule, a parameter file, a checkpoint, a token file, an .npy input, an output path, the memory
free) and checks that sl-run or sl-opt exits with status 1 and the message that names the file
and the problem, never a crash, and that no output file is left behind or clobbered: every run
that fails is given --save, --report, --trace or --output paths, one of them an existing good file
that must keep its bytes.

docs/hardening.md lists every error of the readers and the test that covers it; the cases here
are those that need the tools end to end (the importer's are in test/Import/bad-input.test).
"""

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
VOCAB, HIDDEN, BATCH, SEQ = 8, 4, 2, 3
# What an existing output file holds before a failing run, and must hold after it.
GOOD = b"good output, must survive\n"


def _tool(var):
    value = os.environ.get(var)
    if not value:
        pytest.skip(f"{var} is not set: point it at the built binary (ctest does)")
    assert os.path.isfile(value) and os.access(value, os.X_OK), f"{var}={value!r}"
    return value


def run(*cmd, env=None):
    full_env = dict(os.environ)
    for key in ("SL_TEST_HOST_MEMORY_AVAILABLE", "SL_TEST_DEVICE_MEMORY_AVAILABLE"):
        full_env.pop(key, None)
    full_env.update(env or {})
    return subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=full_env)


def refused(proc, *fragments):
    """The run failed cleanly (status 1, no signal) with an error that holds every fragment."""
    described = (f"command: {' '.join(proc.args)}\nexit {proc.returncode}\n"
                 f"{proc.stdout}{proc.stderr}")
    assert proc.returncode == 1, described
    for fragment in fragments:
        assert fragment in proc.stderr, f"missing {fragment!r}\n{described}"
    for crash in ("terminate called", "Assertion", "Segmentation", "Stack dump", "Traceback"):
        assert crash not in proc.stderr, described


def lm_model(embed=None):
    rng = np.random.default_rng(0)
    weights = {
        "embed": rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32),
        "layers.0.w": rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32),
        "layers.1.w": rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32),
        "head": rng.standard_normal((HIDDEN, VOCAB)).astype(np.float32),
    }
    if embed is not None:
        weights["embed"] = embed
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["h0"], name="/embed/Gather"),
             helper.make_node("MatMul", ["h0", "layers.0.w"], ["h1"], name="/layers.0/MatMul"),
             helper.make_node("MatMul", ["h1", "layers.1.w"], ["h2"], name="/layers.1/MatMul"),
             helper.make_node("MatMul", ["h2", "head"], ["logits"], name="/head/MatMul")]
    graph = helper.make_graph(
        nodes, "lm",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])],
        [numpy_helper.from_array(w, name) for name, w in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), weights


class Tiny:
    """The compiled model and good inputs, shared by every test of the module (read-only)."""

    def __init__(self, root):
        self.root = root
        self.sl_opt = _tool("SL_OPT")
        self.sl_run = _tool("SL_RUN")
        self.model, self.weights = lm_model()
        onnx.save(self.model, root / "lm.onnx")
        self.train = self.compile(root / "lm.onnx", "train.slsched",
                                  f"--sl-train=batch={BATCH} seq={SEQ}")
        self.infer = self.compile(root / "lm.onnx", "infer.slsched",
                                  f"--sl-infer=batch={BATCH} seq={SEQ}")
        self.tokens = root / "tokens.bin"
        (np.arange(100) % VOCAB).astype("<u2").tofile(self.tokens)
        self.ids = root / "ids.npy"
        np.save(self.ids, (np.arange(BATCH * SEQ) % VOCAB).reshape(BATCH, SEQ).astype(np.int64))
        self.checkpoint = root / "good.safetensors"
        assert run(self.sl_run, self.train, "--data", self.tokens, "--steps", 1, "--save",
                   self.checkpoint).returncode == 0
        # The schedule contract as Python classes, to break schedules field by field.
        subprocess.run(["protoc", f"-I{REPO / 'ir' / 'schedule'}", f"--python_out={root}",
                        "schedule.proto"], check=True)
        spec = importlib.util.spec_from_file_location("schedule_pb2", root / "schedule_pb2.py")
        self.pb = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.pb)

    def compile(self, model, name, pipeline):
        out = self.root / name
        proc = run(self.sl_opt, model, pipeline, "-o", out)
        assert proc.returncode == 0, proc.stderr
        return out

    def schedule(self, path):
        s = self.pb.Schedule()
        s.ParseFromString(Path(path).read_bytes())
        return s

    def write_schedule(self, schedule, name):
        """Writes a schedule beside lm.onnx, whose parameters it points at by relative path."""
        path = self.root / name
        path.write_bytes(schedule.SerializeToString())
        return path

    def parameter_bytes(self):
        return sum(4 * int(np.prod(p.shape)) for p in self.schedule(self.train).parameters)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return Tiny(tmp_path_factory.mktemp("bad_input"))


class Outputs:
    """Output paths for a run that must fail: one existing good file, the others absent."""

    def __init__(self, parent, existing, *absent):
        # A directory of its own, so that a test may make several failing runs.
        self.dir = Path(tempfile.mkdtemp(prefix="out", dir=parent))
        self.existing = self.dir / existing
        self.existing.write_bytes(GOOD)
        self.absent = [self.dir / name for name in absent]

    def check_untouched(self):
        assert self.existing.read_bytes() == GOOD
        # No partial file, no temporary left beside them.
        assert sorted(p.name for p in self.dir.iterdir()) == [self.existing.name]


def train_outputs(tmp_path):
    out = Outputs(tmp_path, "c.safetensors", "report.json", "trace.json")
    return out, ["--save", out.existing, "--report", out.absent[0], "--trace", out.absent[1]]


def infer_outputs(tmp_path):
    out = Outputs(tmp_path, "y.npy", "report.json", "trace.json")
    return out, ["--output", out.existing, "--report", out.absent[0], "--trace", out.absent[1]]


def train_fails(tiny, tmp_path, schedule=None, data=None, extra=(), env=None):
    out, flags = train_outputs(tmp_path)
    proc = run(tiny.sl_run, schedule or tiny.train, "--data", data or tiny.tokens, "--steps", 3,
               *extra, *flags, env=env)
    out.check_untouched()
    return proc


def infer_fails(tiny, tmp_path, schedule=None, ids=None, env=None):
    out, flags = infer_outputs(tmp_path)
    proc = run(tiny.sl_run, schedule or tiny.infer, "--input", ids or tiny.ids, *flags, env=env)
    out.check_untouched()
    return proc


# --- schedules ------------------------------------------------------------------------------------

def test_truncated_schedule(tiny, tmp_path):
    data = tiny.train.read_bytes()
    cut = tmp_path / "cut.slsched"
    cut.write_bytes(data[:len(data) // 2])
    refused(train_fails(tiny, tmp_path, schedule=cut),
            f"{cut}: truncated or corrupt schedule (protobuf parse failed)")


def test_schedule_without_its_end_marker(tiny, tmp_path):
    s = tiny.schedule(tiny.train)
    s.ClearField("end_magic")
    path = tiny.write_schedule(s, "no_end.slsched")
    refused(train_fails(tiny, tmp_path, schedule=path),
            f"{path}: truncated schedule (the end marker is missing)")


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 a zip", b"\x0dSLSX...."],
                         ids=["empty", "zip", "near-magic"])
def test_wrong_magic(tiny, tmp_path, content):
    path = tmp_path / "bad.slsched"
    path.write_bytes(content)
    refused(infer_fails(tiny, tmp_path, schedule=path),
            f"{path}: not a SpeedLoader schedule (bad magic)")


def test_onnx_model_given_as_schedule(tiny, tmp_path):
    refused(infer_fails(tiny, tmp_path, schedule=tiny.root / "lm.onnx"),
            "lm.onnx: not a SpeedLoader schedule (bad magic)")


def test_wrong_version(tiny, tmp_path):
    s = tiny.schedule(tiny.train)
    current = s.version
    s.version = 99
    path = tiny.write_schedule(s, "v99.slsched")
    refused(train_fails(tiny, tmp_path, schedule=path),
            f"{path}: schedule version 99 is not supported (this runtime supports versions 4 to "
            f"{current})")


def test_schedule_that_is_missing_or_a_directory(tiny, tmp_path):
    refused(infer_fails(tiny, tmp_path, schedule=tmp_path / "absent.slsched"),
            f"{tmp_path / 'absent.slsched'}: cannot open (No such file or directory)")
    refused(infer_fails(tiny, tmp_path, schedule=tmp_path),
            f"{tmp_path}: cannot read (Is a directory)")


@pytest.mark.parametrize("offset", ["arena", 2**64 - 64], ids=["past-the-end", "wrapping"])
def test_offset_out_of_bounds(tiny, tmp_path, offset):
    s = tiny.schedule(tiny.infer)
    b = next(b for b in s.buffers if b.space == tiny.pb.DEVICE and b.bytes > 0)
    b.offset = s.device_arena_bytes if offset == "arena" else offset
    path = tiny.write_schedule(s, "offset.slsched")
    refused(infer_fails(tiny, tmp_path, schedule=path),
            f"{path}: buffer {b.id} '{b.name}' (offset {b.offset}, {b.bytes} bytes) does not fit "
            f"in the device arena (device_arena_bytes {s.device_arena_bytes})")


def test_overlapping_buffers_without_ordering(tiny, tmp_path):
    """A compute kernel that no longer waits for the copy that fills its operand: the copy (on
    the host-to-device stream) and the kernel touch the same bytes in no fixed order."""
    s = tiny.schedule(tiny.infer)
    index, k = next((i, k) for i, k in enumerate(s.kernels)
                    if k.op != tiny.pb.COPY and len(k.wait_events) > 0)
    del k.wait_events[:]
    path = tiny.write_schedule(s, "race.slsched")
    refused(infer_fails(tiny, tmp_path, schedule=path),
            f"{path}: ", f"kernel {index} '{k.name}'",
            "with no event ordering them")


def test_result_overlapping_its_operand(tiny, tmp_path):
    s = tiny.schedule(tiny.infer)
    index, k = next((i, k) for i, k in enumerate(s.kernels) if k.op == tiny.pb.MATMUL)
    operand, result = s.buffers[k.operands[0]], s.buffers[k.results[0]]
    # Half a row past the operand's start: a partial overlap, never allowed.
    result.offset = operand.offset + 8
    path = tiny.write_schedule(s, "overlap.slsched")
    refused(infer_fails(tiny, tmp_path, schedule=path),
            f"{path}: ", f"kernel {index} '{k.name}' (MATMUL): result buffer {result.id}",
            f"overlaps operand buffer {operand.id}")


# --- parameter files ------------------------------------------------------------------------------

def test_missing_parameter_file(tiny, tmp_path):
    s = tiny.schedule(tiny.train)
    for p in s.parameters:
        p.file = "absent.onnx"
    path = tiny.write_schedule(s, "absent_params.slsched")
    refused(train_fails(tiny, tmp_path, schedule=path),
            f"{path}: parameter 'embed': file '{tiny.root / 'absent.onnx'}' does not exist")
    (tmp_path / "lm.onnx").mkdir()
    path = tmp_path / "dir_params.slsched"
    s.parameters[0].file = "lm.onnx"
    path.write_bytes(s.SerializeToString())
    refused(train_fails(tiny, tmp_path, schedule=path),
            f"{path}: parameter 'embed': file '{tmp_path / 'lm.onnx'}' is not a regular file")


def test_parameter_file_shorter_than_the_schedule_says(tiny, tmp_path):
    shutil.copy(tiny.root / "lm.onnx", tmp_path / "lm.onnx")
    s = tiny.schedule(tiny.train)
    size = (tmp_path / "lm.onnx").stat().st_size
    last = max(s.parameters, key=lambda p: p.file_offset)
    with open(tmp_path / "lm.onnx", "r+b") as f:
        f.truncate(last.file_offset + 4)
    path = tmp_path / "train.slsched"
    path.write_bytes(s.SerializeToString())
    refused(train_fails(tiny, tmp_path, schedule=path),
            f"{path}: parameter '{last.name}' reads {last.bytes} bytes at offset "
            f"{last.file_offset} of '{tmp_path / 'lm.onnx'}', which has only "
            f"{last.file_offset + 4} bytes")
    assert size > last.file_offset + 4


def test_parameter_offset_past_the_file(tiny, tmp_path):
    s = tiny.schedule(tiny.infer)
    s.parameters[0].file_offset = 2**64 - 4
    path = tiny.write_schedule(s, "param_offset.slsched")
    refused(infer_fails(tiny, tmp_path, schedule=path),
            f"parameter '{s.parameters[0].name}' reads {s.parameters[0].bytes} bytes at offset "
            f"{2**64 - 4} of ")


def model_with_embed(tiny, directory, value):
    """lm.onnx with embed[2, 1] set to `value`, compiled for training and inference in
    `directory`."""
    embed = tiny.weights["embed"].copy()
    embed[2, 1] = value
    model, _ = lm_model(embed)
    onnx.save(model, directory / "lm.onnx")
    train = run(tiny.sl_opt, directory / "lm.onnx", f"--sl-train=batch={BATCH} seq={SEQ}", "-o",
                directory / "train.slsched")
    infer = run(tiny.sl_opt, directory / "lm.onnx", f"--sl-infer=batch={BATCH} seq={SEQ}", "-o",
                directory / "infer.slsched")
    assert train.returncode == 0 and infer.returncode == 0, train.stderr + infer.stderr
    offset = next(p.file_offset for p in tiny.schedule(directory / "train.slsched").parameters
                  if p.name == "embed")
    return directory / "train.slsched", directory / "infer.slsched", offset


def test_nan_in_weights_is_refused_at_load(tiny, tmp_path):
    """No model holds NaN on purpose; it would only show up steps later as a NaN loss."""
    train, infer, offset = model_with_embed(tiny, tmp_path, np.nan)
    message = (f"{tmp_path / 'lm.onnx'}: parameter 'embed' holds NaN at element 9 of its f32 "
               f"[8, 4] (read from offset {offset}): the model file is corrupt")
    refused(train_fails(tiny, tmp_path, schedule=train), message)
    refused(infer_fails(tiny, tmp_path, schedule=infer), message)


def test_infinite_weight_cannot_be_trained_but_can_run(tiny, tmp_path):
    train, infer, _ = model_with_embed(tiny, tmp_path, -np.inf)
    refused(train_fails(tiny, tmp_path, schedule=train),
            f"{tmp_path / 'lm.onnx'}: parameter 'embed' holds -inf at element 9 of its f32 [8, 4]: "
            "a trained parameter must be finite")
    # Inference takes it (a mask may be -inf).
    assert run(tiny.sl_run, infer, "--input", tiny.ids).returncode == 0


# --- checkpoints (--resume) -----------------------------------------------------------------------

def read_checkpoint(tiny):
    raw = tiny.checkpoint.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def write_checkpoint(path, header, data):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
    return path


def resume_fails(tiny, tmp_path, checkpoint, *fragments):
    refused(train_fails(tiny, tmp_path, extra=["--resume", checkpoint]), *fragments)


def test_truncated_checkpoint(tiny, tmp_path):
    raw = tiny.checkpoint.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(raw[:100])
    resume_fails(tiny, tmp_path, cut, f"{cut}: the header length",
                 "runs past the end of the file (100 bytes): the file is truncated or not a "
                 "safetensors file")
    cut.write_bytes(raw[:-4])
    resume_fails(tiny, tmp_path, cut, f"{cut}: tensor '", "run past the end of the data",
                 "the file is truncated")


def test_checkpoint_with_bad_header_json(tiny, tmp_path):
    raw = bytearray(tiny.checkpoint.read_bytes())
    raw[8 + 1] = ord("!")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(raw))
    resume_fails(tiny, tmp_path, bad, f"{bad}: the header is not valid JSON")


def test_checkpoint_with_wrong_dtype_or_shape(tiny, tmp_path):
    header, data = read_checkpoint(tiny)
    # As f64 [16]: the same bytes, so only the dtype differs.
    header["head"]["dtype"] = "F64"
    header["head"]["shape"] = [16]
    path = write_checkpoint(tmp_path / "dtype.safetensors", header, data)
    resume_fails(tiny, tmp_path, path,
                 f"{path}: the checkpoint does not match this model: tensor 'head' is f64 [16], "
                 "but parameter 'head' of this model is f32 [4, 8]")
    header, data = read_checkpoint(tiny)
    header["embed"]["shape"] = [4, 8]
    path = write_checkpoint(tmp_path / "shape.safetensors", header, data)
    resume_fails(tiny, tmp_path, path,
                 "tensor 'embed' is f32 [4, 8], but parameter 'embed' of this model is f32 [8, 4]")


def test_checkpoint_missing_a_parameter(tiny, tmp_path):
    header, data = read_checkpoint(tiny)
    begin, end = header.pop("head.adam_v")["data_offsets"]
    del data[begin:end]
    for info in header.values():
        if "data_offsets" in info and info["data_offsets"][0] >= end:
            info["data_offsets"] = [o - (end - begin) for o in info["data_offsets"]]
    path = write_checkpoint(tmp_path / "missing.safetensors", header, data)
    resume_fails(tiny, tmp_path, path,
                 f"{path}: the checkpoint does not match this model: it has no tensor "
                 "'head.adam_v' (the AdamW second moment of parameter 'head', f32 [4, 8])")


@pytest.mark.parametrize("tensor,value,what", [
    ("embed", np.nan, "the master weights of parameter 'embed') holds NaN at element 3"),
    ("layers.1.w.adam_m", np.inf, "the AdamW first moment of parameter 'layers.1.w') holds inf "
                                  "at element 3"),
], ids=["nan-weight", "inf-moment"])
def test_checkpoint_with_non_finite_values(tiny, tmp_path, tensor, value, what):
    header, data = read_checkpoint(tiny)
    begin = header[tensor]["data_offsets"][0]
    data[begin + 12:begin + 16] = struct.pack("<f", value)
    path = write_checkpoint(tmp_path / "nan.safetensors", header, data)
    resume_fails(tiny, tmp_path, path,
                 f"{path}: tensor '{tensor}' ({what}: the checkpoint is corrupt")


def test_weights_file_that_is_not_a_checkpoint(tiny, tmp_path):
    header, data = read_checkpoint(tiny)
    del header["__metadata__"]
    path = write_checkpoint(tmp_path / "plain.safetensors", header, data)
    resume_fails(tiny, tmp_path, path,
                 f"{path}: not a SpeedLoader training checkpoint (its metadata has no "
                 "'speedloader.checkpoint')")
    resume_fails(tiny, tmp_path, tmp_path / "absent.safetensors",
                 f"{tmp_path / 'absent.safetensors'}: cannot open safetensors file (No such file "
                 "or directory)")


# --- token files (--data) -------------------------------------------------------------------------

def test_empty_or_truncated_token_file(tiny, tmp_path):
    data = tmp_path / "tokens.bin"
    data.write_bytes(b"")
    refused(train_fails(tiny, tmp_path, data=data), f"{data}: the token file is empty")
    data.write_bytes(tiny.tokens.read_bytes()[:41])
    refused(train_fails(tiny, tmp_path, data=data),
            f"{data}: the token file has 41 bytes, not a multiple of the 2-byte uint16 token "
            "(wrong --data-dtype?)")
    refused(train_fails(tiny, tmp_path, data=tmp_path / "absent.bin"),
            f"{tmp_path / 'absent.bin'}: cannot open token file (No such file or directory)")


def test_too_few_tokens_for_one_batch(tiny, tmp_path):
    data = tmp_path / "tokens.bin"
    np.arange(BATCH * SEQ, dtype="<u2").tofile(data)
    refused(train_fails(tiny, tmp_path, data=data),
            f"{data}: the token file is too small: a step of 2 sequences of 3 tokens reads 7 "
            "tokens (2*3+1), the file has 6")


def test_id_outside_the_vocabulary(tiny, tmp_path):
    """Without --vocab the model's own (its logits' last dimension) is checked, so the token's
    place in the file is named, whichever kernel would read it."""
    data = tmp_path / "tokens.bin"
    ids = np.arange(40) % VOCAB
    ids[9] = 300
    ids.astype("<u2").tofile(data)
    proc = train_fails(tiny, tmp_path, data=data)
    refused(proc, f"sl-run: error: step 2: {data}: token 9 of the file (read by step 2) is 300, "
                  "past the vocabulary of 8 ids (0..7)")
    assert "step 1/3" in proc.stdout
    refused(train_fails(tiny, tmp_path, extra=["--vocab", 9]),
            "the vocabulary size 9 is larger than the model's, 8 (the last dimension of the logits "
            "its loss reads)")


def test_token_file_of_the_wrong_dtype(tiny, tmp_path):
    """uint16 ids read as uint32 pair up into ids far past the vocabulary. (uint32 ids below 2^16
    read as uint16 are indistinguishable from real ones: every other id is 0. The format has no
    header to tell.)"""
    refused(train_fails(tiny, tmp_path, extra=["--data-dtype", "uint32"]),
            f"{tiny.tokens}: token 0 of the file (read by step 1) is 65536, past the vocabulary "
            "of 8 ids")


# --- .npy inputs (inference) ----------------------------------------------------------------------

@pytest.mark.parametrize("array,message", [
    (np.zeros((BATCH, SEQ), np.float32), "input 'input_ids' is f32 [2, 3], but the schedule "
                                         "expects i64 [2, 3]"),
    (np.zeros((SEQ, BATCH), np.int64), "input 'input_ids' is i64 [3, 2], but the schedule "
                                       "expects i64 [2, 3]"),
    (np.array([[1, 2, 3], [4, 5, 9]], np.int64),
     "input 'input_ids' holds 9 at [1, 2]: kernel 5 '/embed/Gather' (GATHER), which indexes axis "
     "0 of [8, 4] with it, takes -8..7"),
], ids=["dtype", "shape", "id-outside-vocabulary"])
def test_bad_npy_input(tiny, tmp_path, array, message):
    path = tmp_path / "ids.npy"
    np.save(path, array)
    refused(infer_fails(tiny, tmp_path, ids=path), f"sl-run: error: {path}: {message}")


def test_file_that_is_not_npy(tiny, tmp_path):
    path = tmp_path / "ids.npy"
    path.write_bytes(tiny.tokens.read_bytes())
    refused(infer_fails(tiny, tmp_path, ids=path), f"{path}: not a .npy file (bad magic)")
    path.write_bytes(tiny.ids.read_bytes()[:-8])
    refused(infer_fails(tiny, tmp_path, ids=path),
            f"{path}: a i64 [2, 3] array needs 48 bytes of data but the file has 40 (truncated)")


# --- output paths ---------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--save", "--report", "--trace", "--export-onnx"])
def test_unwritable_train_output_is_refused_before_training(tiny, tmp_path, flag):
    target = tmp_path / "no" / "such" / "dir" / "out"
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, flag, target)
    refused(proc, f"sl-run: error: {flag} {target}: cannot write (No such file or directory)")
    assert "step 1" not in proc.stdout
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, flag, tmp_path)
    refused(proc, f"sl-run: error: {flag} {tmp_path}: cannot write (it is a directory)")


def test_unwritable_inference_output_is_refused_before_running(tiny, tmp_path):
    target = tmp_path / "absent" / "y.npy"
    out, flags = infer_outputs(tmp_path)
    proc = run(tiny.sl_run, tiny.infer, "--input", tiny.ids, "--report", out.absent[0],
               "--output", target)
    refused(proc, f"sl-run: error: --output {target}: cannot write (No such file or directory)")
    assert not out.absent[0].exists()


def test_nan_loss_stops_training_and_keeps_the_last_checkpoint(tiny, tmp_path):
    """A finite but huge embedding row overflows to a NaN loss on the first step whose inputs
    hold that token: training stops naming the step; the checkpoint saved before stays as it was
    and nothing else is written."""
    embed = tiny.weights["embed"].copy()
    embed[5, :] = 3e38
    model, _ = lm_model(embed)
    onnx.save(model, tmp_path / "lm.onnx")
    sched = tmp_path / "train.slsched"
    assert run(tiny.sl_opt, tmp_path / "lm.onnx", f"--sl-train=batch={BATCH} seq={SEQ}", "-o",
               sched).returncode == 0
    data = tmp_path / "tokens.bin"
    # Steps read 6 tokens each (and one more as the last label): token 5 first appears in step 3's
    # inputs.
    ids = np.array([1, 2, 3, 4, 0] * 3 + [5] + [1, 2, 3, 4, 0] * 2)
    ids[14] = 5
    ids.astype("<u2").tofile(data)
    out = tmp_path / "out"
    out.mkdir()
    ckpt = out / "c.safetensors"
    assert run(tiny.sl_run, sched, "--data", data, "--steps", 1, "--save", ckpt).returncode == 0
    good = ckpt.read_bytes()
    proc = run(tiny.sl_run, sched, "--data", data, "--steps", 4, "--resume", ckpt, "--save", ckpt,
               "--report", out / "r.json", "--trace", out / "t.json")
    refused(proc, "sl-run: error: step 3: the loss is NaN; training stopped before this step's "
                  "update (nothing was saved: --save, --report and --trace are written only after "
                  "the last step)")
    assert "step 2/5" in proc.stdout and "step 3/5" not in proc.stdout
    assert ckpt.read_bytes() == good
    assert sorted(p.name for p in out.iterdir()) == ["c.safetensors"]


# --- memory ---------------------------------------------------------------------------------------

def test_run_that_does_not_fit_in_memory_is_refused_before_it_starts(tiny, tmp_path):
    """On the CPU backend the arena is host memory too. The need is what the plan predicted
    (arena, pool, AdamW state) plus the checkpoint a --save copies and encodes; one byte less
    than it is refused with both numbers, exactly it runs."""
    s = tiny.schedule(tiny.train)
    state = 3 * tiny.parameter_bytes()
    assert s.plan.predicted_device_bytes + s.plan.predicted_host_bytes == \
        s.device_arena_bytes + s.host_pool_bytes + state
    need = s.device_arena_bytes + s.host_pool_bytes + state + 2 * state
    proc = train_fails(tiny, tmp_path, env={"SL_TEST_HOST_MEMORY_AVAILABLE": str(need - 1)})
    refused(proc, f"sl-run: error: {tiny.train}: the run needs ",
            f"({need} bytes) of host memory (host pool ", "device arena (host memory on this "
            "backend) ", "AdamW state (master weights and two moments) ", "checkpoint being saved ",
            f"({need - 1} bytes) is available (SL_TEST_HOST_MEMORY_AVAILABLE)")
    assert "step 1" not in proc.stdout
    ok = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--save",
             tmp_path / "c.safetensors", env={"SL_TEST_HOST_MEMORY_AVAILABLE": str(need)})
    assert ok.returncode == 0, ok.stderr


def test_arena_larger_than_the_free_device_memory(tiny, tmp_path):
    arena = tiny.schedule(tiny.infer).device_arena_bytes
    env = {"SL_TEST_DEVICE_MEMORY_AVAILABLE": str(arena - 1)}
    refused(infer_fails(tiny, tmp_path, env=env),
            f"{tiny.infer}: the device arena needs ", f"({arena} bytes) of device memory, but only",
            f"({arena - 1} bytes) is available (SL_TEST_DEVICE_MEMORY_AVAILABLE)")
    env = {"SL_TEST_DEVICE_MEMORY_AVAILABLE": str(arena)}
    assert run(tiny.sl_run, tiny.infer, "--input", tiny.ids, env=env).returncode == 0


# --- the compiler ---------------------------------------------------------------------------------

def test_model_without_input_ids_is_refused_for_training(tiny, tmp_path):
    model, _ = lm_model()
    model.graph.input[0].name = "tokens"
    model.graph.node[0].input[1] = "tokens"
    onnx.save(model, tmp_path / "tokens.onnx")
    out = tmp_path / "train.slsched"
    refused(run(tiny.sl_opt, tmp_path / "tokens.onnx", "--sl-train=batch=2 seq=3", "-o", out),
            f"{tmp_path / 'tokens.onnx'}: sl-append-loss: @forward has no input named "
            "'input_ids' (its inputs: 'tokens')")
    assert not out.exists()


def plan_need(tiny, options, kind):
    """What sl-plan says `options` need of `kind` memory, from its error for a 1-byte budget."""
    proc = run(tiny.sl_opt, tiny.root / "lm.onnx", f"--sl-train=seq={SEQ} {options} "
               f"{kind}-memory=1", "-o", "/dev/null")
    refused(proc, f" of {kind} memory, more than the budget of 1 B (1 bytes)")
    return int(proc.stderr.split(" bytes) of ")[0].rsplit("(", 1)[1])


@pytest.mark.parametrize("options,kind", [
    ("batch=2 sub-batch-size=1", "device"),
    ("", "device"),
    ("batch=2 num-sub-batches=2", "host"),
    ("batch=2", "host"),
], ids=["device-fixed", "device-chosen", "host-fixed", "host-chosen"])
def test_plan_budget_boundary_is_exact(tiny, tmp_path, options, kind):
    """A budget one byte below the need is an error with both numbers; exactly the need compiles,
    and the schedule's memory fits in it."""
    need = plan_need(tiny, options, kind)
    out = tmp_path / "plan.slsched"
    proc = run(tiny.sl_opt, tiny.root / "lm.onnx",
               f"--sl-train=seq={SEQ} {options} {kind}-memory={need - 1}", "-o", out)
    refused(proc, "needs ", f"({need} bytes) of {kind} memory, more than the budget of ",
            f"({need - 1} bytes)")
    assert not out.exists()
    proc = run(tiny.sl_opt, tiny.root / "lm.onnx",
               f"--sl-train=seq={SEQ} {options} {kind}-memory={need}", "-o", out)
    assert proc.returncode == 0, proc.stderr
    s = tiny.schedule(out)
    if kind == "device":
        assert s.device_arena_bytes <= need
    else:
        assert s.host_pool_bytes + 3 * tiny.parameter_bytes() <= need


def test_shape_bound_past_any_memory_is_refused_for_training(tiny, tmp_path):
    out = tmp_path / "huge.slsched"
    refused(run(tiny.sl_opt, tiny.root / "lm.onnx", f"--sl-train=batch={2**62} seq=2", "-o", out),
            "is too large (2^63 bytes or more)")
    assert not out.exists()
