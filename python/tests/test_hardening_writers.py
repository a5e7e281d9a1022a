"""Writers that never lose data, through the real tools (docs/hardening.md, "Writers").

Every output of sl-opt and sl-run goes through one writer (slrt::AtomicWriter): a unique temporary
beside the target, created with O_EXCL, written and checked to the last fsync and close, renamed
over the target with the target's mode. These tests break it the ways a user or a machine can: a
full disk (a 2 MiB tmpfs, as root), a kill -9 or SIGTERM in the middle of a save, symlinks at the
names temporaries used to have, and outputs that are the run's own inputs.

The tiny model and its schedules come from test_bad_input.py's helpers.
"""

import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest

from test_bad_input import BATCH, SEQ, Tiny, refused, run

GOOD = b"good output, must survive\n"
STALL = "SL_TEST_STALL_WRITES: stalled writing "
TEMPORARY = re.compile(r"^\.(?P<target>.+)\.sl-tmp\.[0-9a-f]{8}-(?P<pid>\d+)\.[0-9a-f]{16}$")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return Tiny(tmp_path_factory.mktemp("writers"))


def names(directory):
    return sorted(p.name for p in Path(directory).iterdir())


def temporaries(directory):
    return [n for n in names(directory) if TEMPORARY.match(n)]


# --- temporaries: unique names, never a fixed one -------------------------------------------------

def test_symlinks_at_the_old_fixed_temporary_names_are_not_followed(tiny, tmp_path):
    """sl-opt used OUT.tmp (opened with truncation: it followed a symlink there and overwrote its
    target) and the runtime OUT.tmp.XXXXXX; symlinks and files at those names stay as they are."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"victim")
    for name in ("infer.slsched.tmp", "model.mlir.tmp", "c.safetensors.tmp",
                 "c.safetensors.tmp.XXXXXX"):
        (tmp_path / name).symlink_to(victim)
    (tmp_path / "r.json.tmp").write_bytes(b"plain")
    assert run(tiny.sl_opt, tiny.root / "lm.onnx", f"--sl-infer=batch={BATCH} seq={SEQ}", "-o",
               tmp_path / "infer.slsched").returncode == 0
    assert run(tiny.sl_opt, tiny.root / "lm.onnx", "-o", tmp_path / "model.mlir").returncode == 0
    assert run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--save",
               tmp_path / "c.safetensors", "--report", tmp_path / "r.json").returncode == 0
    assert victim.read_bytes() == b"victim"
    assert (tmp_path / "r.json.tmp").read_bytes() == b"plain"
    assert all((tmp_path / n).is_symlink() for n in ("infer.slsched.tmp", "model.mlir.tmp",
                                                     "c.safetensors.tmp",
                                                     "c.safetensors.tmp.XXXXXX"))
    assert temporaries(tmp_path) == []


def stalled_save(tiny, directory, ckpt, *, after_bytes=64):
    """Starts a training run that resumes from and saves `ckpt`, and returns it stopped in the
    middle of writing the checkpoint (SL_TEST_STALL_WRITES), with its temporary's name."""
    env = dict(os.environ, SL_TEST_STALL_WRITES=str(after_bytes))
    proc = subprocess.Popen([str(c) for c in (tiny.sl_run, tiny.train, "--data", tiny.tokens,
                                               "--steps", 2, "--resume", ckpt, "--save", ckpt)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stderr.readline()
    assert line.startswith(STALL), line + proc.stderr.read()
    temporary = Path(line[len(STALL):].split(" after ")[0])
    assert temporary.parent == Path(directory) and TEMPORARY.match(temporary.name), line
    assert temporary.stat().st_size == after_bytes
    return proc, temporary


def resumes(tiny, ckpt):
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume", ckpt)
    return proc.returncode == 0 and "step 2/2" in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_in_the_middle_of_a_save_removes_the_temporary(tiny, tmp_path, sig):
    ckpt = tmp_path / "c.safetensors"
    shutil.copy(tiny.checkpoint, ckpt)
    old = ckpt.read_bytes()
    proc, temporary = stalled_save(tiny, tmp_path, ckpt)
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig
    assert names(tmp_path) == ["c.safetensors"]
    assert ckpt.read_bytes() == old and resumes(tiny, ckpt)


def test_kill_9_in_the_middle_of_a_save_leaves_no_growing_temporaries(tiny, tmp_path):
    """kill -9 cannot be caught: its temporary stays, but the next write of the same target
    removes it (its pid is gone), so two killed runs leave one, and a save none."""
    ckpt = tmp_path / "c.safetensors"
    shutil.copy(tiny.checkpoint, ckpt)
    old = ckpt.read_bytes()
    seen = []
    for _ in range(2):
        proc, temporary = stalled_save(tiny, tmp_path, ckpt)
        proc.kill()
        assert proc.wait(timeout=30) == -signal.SIGKILL
        seen.append(temporary.name)
        assert temporaries(tmp_path) == [temporary.name]
        assert ckpt.read_bytes() == old and resumes(tiny, ckpt)
    assert seen[0] != seen[1]
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume", ckpt,
               "--save", ckpt)
    assert proc.returncode == 0, proc.stderr
    assert names(tmp_path) == ["c.safetensors"] and ckpt.read_bytes() != old


def test_a_resave_keeps_the_checkpoint_mode(tiny, tmp_path):
    ckpt = tmp_path / "c.safetensors"
    shutil.copy(tiny.checkpoint, ckpt)
    ckpt.chmod(0o600)
    assert run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume", ckpt,
               "--save", ckpt).returncode == 0
    assert stat.S_IMODE(ckpt.stat().st_mode) == 0o600
    sched = tmp_path / "infer.slsched"
    sched.write_bytes(b"old")
    sched.chmod(0o640)
    assert run(tiny.sl_opt, tiny.root / "lm.onnx", f"--sl-infer=batch={BATCH} seq={SEQ}", "-o",
               sched).returncode == 0
    assert stat.S_IMODE(sched.stat().st_mode) == 0o640


# --- a full disk ----------------------------------------------------------------------------------

class FullDisk:
    """A 2 MiB tmpfs, mounted for the test and filled up after its existing outputs are written."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.mounted = proc.returncode == 0
        self.why = proc.stdout.strip()

    def existing(self, name):
        path = self.path / name
        path.write_bytes(GOOD)
        return path

    def fill(self):
        fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for size in (1 << 16, 1 << 12, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as e:
                    assert e.errno == 28, e  # ENOSPC
        finally:
            os.close(fd)

    def unmount(self):
        if self.mounted:
            subprocess.run(["umount", str(self.path)], check=True)


@pytest.fixture
def full_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = FullDisk(tmp_path / "full")
    if not disk.mounted:
        pytest.skip(f"cannot mount a tmpfs here: {disk.why}")
    yield disk
    disk.unmount()


def test_a_full_disk_keeps_every_existing_output(tiny, tmp_path, full_disk):
    """Every writer fails with ENOSPC on a full file system; each target keeps its bytes and no
    temporary or partial file is left."""
    gen = generate_schedule(tiny)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"tokens": [1, 2]}\n{"tokens": [3]}\n')
    ok_ckpt = tmp_path / "saved.safetensors"
    cases = {
        "model.mlir": [tiny.sl_opt, tiny.root / "lm.onnx", "-o"],
        "model.slsched": [tiny.sl_opt, tiny.root / "lm.onnx", f"--sl-infer=batch={BATCH} seq={SEQ}",
                          "-o"],
        "y.npy": [tiny.sl_run, tiny.infer, "--input", tiny.ids, "--output"],
        "report.json": [tiny.sl_run, tiny.infer, "--input", tiny.ids, "--report"],
        "trace.json": [tiny.sl_run, tiny.infer, "--input", tiny.ids, "--trace"],
        "c.safetensors": [tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--save"],
        # The checkpoint is saved elsewhere first: the message must say so.
        "trained.onnx": [tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--save",
                         ok_ckpt, "--export-onnx"],
        "generated.jsonl": [tiny.sl_run, gen, "--prompts", prompts, "--output"],
    }
    targets = {name: full_disk.existing(name) for name in cases}
    full_disk.fill()
    procs = {}
    for name, cmd in cases.items():
        procs[name] = run(*cmd, targets[name])
        refused(procs[name], f"{targets[name]}: cannot write (No space left on device)")
        assert targets[name].read_bytes() == GOOD, name
        assert names(full_disk.path) == sorted([*cases, "filler"]), name
    refused(procs["trained.onnx"], f"training finished and the checkpoint {ok_ckpt} was saved "
                                   "before the export failed")
    assert resumes(tiny, ok_ckpt)


def generate_schedule(tiny):
    """A one-layer LLaMA (the tiny model has no attention to cache) compiled for generation."""
    from speedloader.export import export_model
    from speedloader.models.llama import LlamaConfig

    out = tiny.root / "gen.slsched"
    if not out.exists():
        config = LlamaConfig(layers=1, hidden=16, heads=2, ffn=32, vocab=16, max_positions=8)
        export_model("llama", config, tiny.root / "llama.onnx", constant_folding=False, batch=2,
                     seq=4)
        proc = run(tiny.sl_opt, tiny.root / "llama.onnx",
                   "--sl-generate=batch=2 max-prompt-len=4 max-new-tokens=2", "-o", out)
        assert proc.returncode == 0, proc.stderr
    return out


# --- outputs that are inputs ----------------------------------------------------------------------

def refused_before_any_work(proc, *fragments):
    refused(proc, *fragments)
    assert "step 1" not in proc.stdout


def test_outputs_that_are_inputs_are_refused_before_any_work(tiny, tmp_path):
    model = tiny.root / "lm.onnx"
    before = {p: p.read_bytes() for p in (model, tiny.tokens, tiny.ids, tiny.train,
                                          tiny.checkpoint)}
    train = [tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1]
    (tmp_path / "tokens-link").symlink_to(tiny.tokens)
    os.link(tiny.ids, tmp_path / "ids-hardlink.npy")
    cases = [
        (train + ["--save", model],
         f"--save {model} is the same file as the model file {model} (an input of this run): "
         "writing it would destroy the input; write the output elsewhere"),
        (train + ["--export-onnx", model], f"--export-onnx {model} is the same file as the model "
                                           f"file {model}"),
        (train + ["--report", tiny.tokens], f"--report {tiny.tokens} is the same file as --data "
                                            f"{tiny.tokens}"),
        (train + ["--trace", tmp_path / "tokens-link"],
         f"--trace {tmp_path / 'tokens-link'} is the same file as --data {tiny.tokens}"),
        (train + ["--report", tiny.train], f"--report {tiny.train} is the same file as the "
                                           f"schedule {tiny.train}"),
        (train + ["--resume", tiny.checkpoint, "--report", tiny.checkpoint],
         f"--report {tiny.checkpoint} is the same file as --resume {tiny.checkpoint}"),
        (train + ["--save", tmp_path / "x", "--report", tmp_path / "x"],
         f"--report {tmp_path / 'x'} is the same file as --save {tmp_path / 'x'} (another output "
         "of this run): give each output its own file"),
        ([tiny.sl_run, tiny.infer, "--input", tiny.ids, "--output", tmp_path / "ids-hardlink.npy"],
         f"--output {tmp_path / 'ids-hardlink.npy'} is the same file as --input {tiny.ids}"),
        ([tiny.sl_run, tiny.infer, "--input", tiny.ids, "--output", tmp_path / "y.npy", "--trace",
          tmp_path / "sub" / ".." / "y.npy"],
         f"--output {tmp_path / 'y.npy'} is the same file as --trace "
         f"{tmp_path / 'sub' / '..' / 'y.npy'} (another output of this run)"),
        ([tiny.sl_opt, model, "-o", model], f"-o {model} is the same file as the input {model}"),
    ]
    (tmp_path / "sub").mkdir()
    for cmd, message in cases:
        refused_before_any_work(run(*cmd), message)
    for path, data in before.items():
        assert path.read_bytes() == data, path
    assert sorted(names(tmp_path)) == ["ids-hardlink.npy", "sub", "tokens-link"]


def test_resume_and_save_may_name_one_checkpoint(tiny, tmp_path):
    """The checkpoint is read whole before the first step and replaced atomically after the last."""
    ckpt = tmp_path / "c.safetensors"
    shutil.copy(tiny.checkpoint, ckpt)
    proc = run(tiny.sl_run, tiny.train, "--data", tiny.tokens, "--steps", 1, "--resume", ckpt,
               "--save", ckpt)
    assert proc.returncode == 0, proc.stderr
    assert "step 2/2" in proc.stdout and ckpt.read_bytes() != tiny.checkpoint.read_bytes()


def test_stall_hook_that_is_not_a_byte_count_is_an_error(tiny, tmp_path):
    proc = run(tiny.sl_run, tiny.infer, "--input", tiny.ids, "--report", tmp_path / "r.json",
               env={"SL_TEST_STALL_WRITES": "soon"})
    refused(proc, f"{tmp_path / 'r.json'}: cannot write (SL_TEST_STALL_WRITES is not a byte count)")
    assert names(tmp_path) == []


def test_generation_output_onto_its_prompts_is_refused(tiny, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"tokens": [1, 2]}\n')
    proc = run(tiny.sl_run, generate_schedule(tiny), "--prompts", prompts, "--output", prompts)
    refused(proc, f"--output {prompts} is the same file as --prompts {prompts} (an input of this "
                  "run)")
    assert "batch 1/" not in proc.stderr
    assert prompts.read_text() == '{"tokens": [1, 2]}\n' and names(tmp_path) == ["prompts.jsonl"]
