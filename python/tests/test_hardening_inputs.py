"""Inputs that used to reach too far or cost too much, through the real tools (issue 19):

- files outside the model: external data and a schedule's parameter files that resolve (through
  a symbolic link, an absolute path or '..') outside the model's or the schedule's directory;
- unbounded readers: a FIFO or a device given as a schedule, an input, a token file, a
  checkpoint or the prompts; a prompt line of 100 MB; messages that would quote megabytes;
- time conversions that wrap (--collective-timeout 1e10).

Every run has a timeout, so that a reader that blocks again fails the test instead of hanging it.
The compiler's side (wrapping shapes, nested If-branches, linked external data) has lit tests in
test/Import (wrapping-shapes.test, nesting.test, files-outside-the-model.test); docs/hardening.md
lists each message with its test.
"""

import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_bad_input import BATCH, SEQ, VOCAB, _tool, lm_model, refused

# Seconds any one run may take: each finishes in well under one; a reader that blocks on a FIFO
# or reads /dev/zero forever is caught here.
TIMEOUT = 30


def run(*cmd):
    return subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=TIMEOUT)


class Tiny:
    """The bad-input suite's language model, compiled for inference and training, and a trained
    checkpoint (read-only for the tests)."""

    def __init__(self, root):
        self.root = root
        self.sl_opt = _tool("SL_OPT")
        self.sl_run = _tool("SL_RUN")
        model, _ = lm_model()
        onnx.save(model, root / "lm.onnx")
        self.infer = self.compile("infer.slsched", f"--sl-infer=batch={BATCH} seq={SEQ}")
        self.train = self.compile("train.slsched", f"--sl-train=batch={BATCH} seq={SEQ}")
        self.ids = root / "ids.npy"
        np.save(self.ids, (np.arange(BATCH * SEQ) % VOCAB).reshape(BATCH, SEQ).astype(np.int64))
        self.tokens = root / "tokens.bin"
        (np.arange(100) % VOCAB).astype("<u2").tofile(self.tokens)

    def compile(self, name, pipeline, model=None, out=None):
        out = out or self.root / name
        proc = run(self.sl_opt, model or self.root / "lm.onnx", pipeline, "-o", out)
        assert proc.returncode == 0, proc.stderr
        return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return Tiny(tmp_path_factory.mktemp("hardening_inputs"))


REPO = Path(__file__).resolve().parents[2]


def protoc(mode, data):
    """protoc --decode or --encode of a schedule (text <-> binary)."""
    return subprocess.run(["protoc", f"-I{REPO / 'ir' / 'schedule'}",
                           f"--{mode}=sl.schedule.Schedule", "schedule.proto"],
                          input=data, stdout=subprocess.PIPE, check=True).stdout


def parameter_files(schedule):
    """The `file` of every parameter of a schedule."""
    text = protoc("decode", Path(schedule).read_bytes()).decode()
    return {line.split('"')[1] for line in text.splitlines() if line.strip().startswith("file:")}


def with_parameter_file(schedule, file, out):
    """A copy of `schedule` at `out` whose parameters all name `file`."""
    lines = protoc("decode", Path(schedule).read_bytes()).decode().splitlines()
    lines = [f'  file: "{file}"' if line.strip().startswith("file:") else line for line in lines]
    out.write_bytes(protoc("encode", "\n".join(lines).encode()))
    return out


# --- files outside the model ----------------------------------------------------------------------

def external_model(directory, location):
    """y = x @ w with w's bytes in external data at `location`; returns w's bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    data = w.raw_data
    w.raw_data = b""
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    # Serialized directly: onnx.save would write the (empty) data out again.
    (directory / "model.onnx").write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString())
    return data


def test_symlinked_external_data_is_refused(tiny, tmp_path):
    """sl-opt used to follow a link planted in the model's directory and point the schedule at
    any file; sl-run then copied its bytes into its outputs."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.bin"
    secret.write_bytes(bytes(range(64)))
    model_dir = tmp_path / "file"
    external_model(model_dir, "weights.bin")
    (model_dir / "weights.bin").symlink_to(secret)
    out = tmp_path / "out.slsched"
    proc = run(tiny.sl_opt, model_dir / "model.onnx", "--sl-infer=", "-o", out)
    refused(proc, "initializer 'w' has external data location 'weights.bin', which resolves to "
                  f"'{secret}' (through a symbolic link), outside the model's directory "
                  f"'{model_dir}'")
    assert not out.exists()

    model_dir = tmp_path / "dir"
    external_model(model_dir, "linked/secret.bin")
    (model_dir / "linked").symlink_to(outside)
    refused(run(tiny.sl_opt, model_dir / "model.onnx", "--sl-infer=", "-o", out),
            "external data location 'linked/secret.bin', which resolves to "
            f"'{secret}' (through a symbolic link)")


def test_external_data_inside_the_model_directory_is_read(tiny, tmp_path):
    data = external_model(tmp_path / "m", "data/w.bin")
    (tmp_path / "m" / "data").mkdir()
    (tmp_path / "m" / "data" / "w.bin").write_bytes(data)
    sched = tmp_path / "m" / "model.slsched"
    proc = run(tiny.sl_opt, tmp_path / "m" / "model.onnx", "--sl-infer=", "-o", sched)
    assert proc.returncode == 0, proc.stderr
    assert parameter_files(sched) == {"data/w.bin"}
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 4), np.float32))
    proc = run(tiny.sl_run, sched, "--input", x, "--output", tmp_path / "y.npy")
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"),
                               np.ones((2, 4), np.float32) @ np.arange(16).reshape(4, 4))


def test_symlinked_schedule_parameter_path_is_refused(tiny, tmp_path):
    """A schedule beside a link to a model elsewhere: sl-run refuses to follow it, unless told
    that the schedule is trusted."""
    shutil.copy(tiny.infer, tmp_path / "infer.slsched")
    (tmp_path / "lm.onnx").symlink_to(tiny.root / "lm.onnx")
    sched = tmp_path / "infer.slsched"
    proc = run(tiny.sl_run, sched, "--input", tiny.ids)
    refused(proc, f"{sched}: parameter 'embed': file 'lm.onnx' resolves to "
                  f"'{(tiny.root / 'lm.onnx').resolve()}' (through a symbolic link), outside the "
                  f"schedule's directory '{tmp_path.resolve()}'")
    proc = run(tiny.sl_run, sched, "--input", tiny.ids, "--allow-external-paths")
    assert proc.returncode == 0, proc.stderr


def test_absolute_and_parent_parameter_paths_are_refused(tiny, tmp_path):
    """A schedule compiled away from its model names it by absolute path; sl-opt warns, and
    sl-run reads it only with --allow-external-paths (or --random-weights, which opens no file)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sched = elsewhere / "infer.slsched"
    proc = run(tiny.sl_opt, tiny.root / "lm.onnx", f"--sl-infer=batch={BATCH} seq={SEQ}", "-o",
               sched)
    assert proc.returncode == 0, proc.stderr
    model = str(tiny.root / "lm.onnx")
    assert proc.stderr.startswith(f"sl-opt: warning: {model}: parameter file '{model}' is "
                                  "outside the schedule's directory"), proc.stderr
    assert parameter_files(sched) == {model}
    refused(run(tiny.sl_run, sched, "--input", tiny.ids),
            f"{sched}: parameter 'embed': file '{model}' is an absolute path: a schedule reads "
            "parameter files only inside its own directory",
            "--allow-external-paths")
    assert run(tiny.sl_run, sched, "--input", tiny.ids, "--allow-external-paths").returncode == 0
    assert run(tiny.sl_run, sched, "--input", tiny.ids, "--random-weights", "1").returncode == 0

    # '..' is refused the same way.
    sub = tiny.root / "sub"
    sub.mkdir(exist_ok=True)
    up = sub / "up.slsched"
    with_parameter_file(tiny.infer, "../lm.onnx", up)
    refused(run(tiny.sl_run, up, "--input", tiny.ids),
            f"{up}: parameter 'embed': file '../lm.onnx' is a path with '..'")
    assert run(tiny.sl_run, up, "--input", tiny.ids, "--allow-external-paths").returncode == 0


def test_schedule_above_the_model_names_it_relatively(tiny, tmp_path):
    """The other legitimate layout: the schedule in a directory above the model's."""
    (tmp_path / "model").mkdir()
    shutil.copy(tiny.root / "lm.onnx", tmp_path / "model" / "lm.onnx")
    sched = tiny.compile(None, f"--sl-infer=batch={BATCH} seq={SEQ}",
                         model=tmp_path / "model" / "lm.onnx", out=tmp_path / "infer.slsched")
    assert parameter_files(sched) == {"model/lm.onnx"}
    proc = run(tiny.sl_run, sched, "--input", tiny.ids)
    assert proc.returncode == 0, proc.stderr


# --- readers that must not block or read forever --------------------------------------------------

@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_schedule_input_data_or_checkpoint_that_is_a_fifo_or_device(tiny, tmp_path, fifo):
    """Each used to wait for a writer (a FIFO) or read until memory ran out (/dev/zero) and die
    with a bare std::bad_alloc."""
    refused(run(tiny.sl_run, fifo, "--input", tiny.ids),
            f"{fifo}: cannot read it: it is a FIFO (named pipe), not a regular file")
    refused(run(tiny.sl_run, "/dev/zero", "--input", tiny.ids),
            "/dev/zero: cannot read it: it is a character device, not a regular file")
    for source, kind in ((fifo, "a FIFO (named pipe)"), ("/dev/zero", "a character device")):
        refused(run(tiny.sl_run, tiny.infer, "--input", source),
                f"{source}: cannot read it: it is {kind}, not a regular file")
    for source, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
        refused(run(tiny.sl_run, tiny.train, "--data", source, "--steps", 1),
                f"{source}: the token file is not a regular file ({kind})")
        refused(run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume",
                    source),
                f"{source}: the safetensors file is not a regular file ({kind})")


def test_npy_input_far_larger_than_the_input_is_refused_before_reading(tiny, tmp_path):
    big = tmp_path / "big.npy"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # sparse: costs no disk
    expected = BATCH * SEQ * 8
    refused(run(tiny.sl_run, tiny.infer, "--input", big),
            f"{big}: the file is {64 << 20} bytes, more than the limit of "
            f"{2 * expected + (1 << 20)} bytes (twice the input's bytes, and 1 MiB for the header)")


def max_rss_of(*cmd):
    """Runs `cmd` in a child Python that reports the largest resident set (KiB) of its own
    child: the sl-run run alone, not anything else this test process started."""
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE,"
             " text=True)\n"
             "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.stderr.write(p.stderr)\n")
    proc = run(sys.executable, "-c", probe, *cmd)
    code, rss = proc.stdout.split()
    return int(code), int(rss), proc.stderr


@pytest.fixture(scope="module")
def generate(tiny):
    """A generate schedule of a one-block LLaMA (exported by PyTorch: the bad-input model has no
    attention, so nothing to cache)."""
    from speedloader.export import export_model
    from speedloader.models.llama import LlamaConfig

    config = LlamaConfig(layers=1, hidden=16, heads=2, kv_heads=2, ffn=32, vocab=64,
                         max_positions=8)
    export_model("llama", config, tiny.root / "llama.onnx", seed=0, constant_folding=False,
                 batch=2, seq=4)
    return tiny.compile("gen.slsched", "--sl-generate=batch=2 max-prompt-len=4 max-new-tokens=2",
                        model=tiny.root / "llama.onnx")


def test_prompts_that_are_a_fifo_or_a_device(tiny, generate, fifo):
    for source, kind in ((fifo, "a FIFO (named pipe)"), ("/dev/zero", "a character device")):
        refused(run(tiny.sl_run, generate, "--prompts", source),
                f"{source}: cannot read it: it is {kind}, not a regular file")


def test_prompt_line_of_100_mb_is_refused_before_it_costs_gigabytes(tiny, generate, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    with open(prompts, "w") as f:
        f.write('{"tokens": [1, 2]}\n{"tokens": [')
        f.write("1, " * (100_000_000 // 3))
        f.write("1]}\n")
    code, rss_kib, stderr = max_rss_of(tiny.sl_run, generate, "--prompts", prompts)
    assert code == 1, stderr
    assert f"{prompts}:2: the line is " in stderr and "more than the limit of" in stderr, stderr
    # The file itself (100 MB) is read; parsing the line as JSON used to take 2 GB more.
    assert rss_kib < 400 * 1024, f"{rss_kib} KiB"


def test_long_input_is_quoted_briefly(tiny, tmp_path):
    """Messages used to quote 50-100 MB of a bad file; now at most ~200 bytes of it."""
    name = "n" * 1_000_000
    header = {name: {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}
    text = json.dumps(header).encode()
    ckpt = tmp_path / "long.safetensors"
    ckpt.write_bytes(struct.pack("<Q", len(text)) + text + bytes(4))
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume", ckpt)
    refused(proc, f"{ckpt}: tensor '{'n' * 200}... (1000000 bytes)': unsupported dtype 'F99'")
    assert len(proc.stderr) < 1000, len(proc.stderr)

    # A string with a raw newline in it: nlohmann's message quotes the whole string token.
    text = b'{"' + b"k" * 1_000_000 + b'\n"}'
    ckpt.write_bytes(struct.pack("<Q", len(text)) + text)
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume", ckpt)
    refused(proc, f"{ckpt}: the header is not valid JSON (")
    assert len(proc.stderr) < 1000, len(proc.stderr)

    # An .npy header of 1 MB that is not a dict.
    header = b"{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), " + b"x" * 1_000_000
    header += b" " * (-(len(header) + 13) % 64) + b"\n"
    npy = tmp_path / "long.npy"
    npy.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header)
    proc = run(tiny.sl_run, tiny.infer, "--input", npy)
    refused(proc, f"{npy}: bad .npy header")
    assert len(proc.stderr) < 1000, len(proc.stderr)


def test_collective_timeout_that_would_wrap_is_refused(tiny):
    """1e10 s is past int64 nanoseconds: the deadline used to wrap into the past (an immediate
    timeout). Refused on one rank too, so the command line means the same everywhere."""
    refused(run(tiny.sl_run, tiny.infer, "--input", tiny.ids, "--collective-timeout", "1e10"),
            "the collective timeout must be positive and at most 1e+09 s (about 31 years), got "
            "1e+10 s")
    assert run(tiny.sl_run, tiny.infer, "--input", tiny.ids, "--collective-timeout",
               "1e9").returncode == 0
