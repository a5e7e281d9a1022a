"""Training across ranks: `mpirun -np W sl-run` on the CPU backend (MPI plugin).

A tiny LLaMA (dimensions that make the shards need padding) is compiled for W ranks with a batch of
B = 2 sequences per rank in N = 2 sub-batches, and for one rank with W * B sequences in W * N
sub-batches of the same size. Five AdamW steps on the same tokens must give the same losses and,
once the sharded checkpoint is consolidated, the same weights, to fp32 reduction order: rank r
trains on sequences [r B, (r + 1) B) of each step's W B, and the reduce-scatter sums the ranks'
gradients, each seeded with 1/(N W).

Also measured: collective bytes per step (SpeedLoader ~3P, canonical ~3NP), each rank's AdamW
state (1/W of the one-rank run's), bit-identical resume from a sharded checkpoint,
consolidation into one checkpoint and ONNX, and the faults: a killed rank and a stalled one end
the job with a message naming the rank and the collective, leaving no checkpoint behind.

4 ranks run oversubscribed on the CI machine's 2 cores (mpirun --oversubscribe).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from speedloader.models.llama import LlamaConfig
from test_e2e_training import read_safetensors

# hidden 18 (3 heads of 6) and ffn 26: norms of 18 elements, so parameters need the shards'
# 4-element alignment and the shards need padding to a multiple of 4 W.
CONFIG = LlamaConfig(layers=3, hidden=18, heads=3, kv_heads=1, ffn=26, vocab=30, max_positions=8)
PER_RANK, N, SEQ, STEPS, LR = 2, 2, 8, 5, 1e-3
MPIRUN = shutil.which("mpirun")
TIMEOUT_S = 180


def _mpi_plugin():
    sl_run = os.environ.get("SL_RUN")
    if not sl_run:
        return None
    plugin = Path(sl_run).resolve().parent.parent / "lib" / "libslrt_mpi.so"
    return plugin if plugin.exists() else None


pytestmark = [
    pytest.mark.skipif(MPIRUN is None, reason="mpirun is not installed (scripts/install-deps.sh)"),
    pytest.mark.skipif(os.environ.get("SL_RUN") is not None and _mpi_plugin() is None,
                       reason="sl-run was built without SL_ENABLE_MPI (no lib/libslrt_mpi.so)"),
]


def mpirun(world):
    return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(world)]


def run(cmd, timeout=TIMEOUT_S):
    return subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


class Job:
    """Compiles and runs configurations once per module."""

    def __init__(self, tools, tmp):
        self.tools, self.tmp = tools, tmp
        export_model("llama", CONFIG, tmp / "model.onnx", seed=0, constant_folding=False,
                     batch=1, seq=SEQ)
        rng = np.random.default_rng(5)
        rng.integers(0, CONFIG.vocab, size=4 * PER_RANK * SEQ * STEPS + 1,
                     dtype=np.uint16).astype("<u2").tofile(tmp / "tokens.bin")
        self.results = {}

    def schedule(self, world, mode="speedloader"):
        """A schedule for `world` ranks of PER_RANK sequences, or (world=1) for one rank with as
        many sequences as `ranks` would have together: see reference()."""
        path = self.tmp / f"{mode}-w{world}.slsched"
        if not path.exists():
            options = f"batch={PER_RANK} seq={SEQ} num-sub-batches={N} live-blocks=1 mode={mode}"
            check_ok(run([self.tools.sl_opt, self.tmp / "model.onnx",
                          f"--sl-train={options} world={world}", "-o", path]))
        return path

    def reference_schedule(self, ranks):
        path = self.tmp / f"one-rank-for-{ranks}.slsched"
        if not path.exists():
            batch = PER_RANK * ranks
            check_ok(run([self.tools.sl_opt, self.tmp / "model.onnx",
                          f"--sl-train=batch={batch} seq={SEQ} num-sub-batches={N * ranks} "
                          "live-blocks=1", "-o", path]))
        return path

    def train(self, world, mode="speedloader"):
        """(losses, consolidated weights, report) of STEPS steps on `world` ranks."""
        key = (world, mode)
        if key not in self.results:
            name = f"{mode}-w{world}"
            sched = self.schedule(world, mode)
            report, index = self.tmp / f"{name}.json", self.tmp / f"{name}.ckpt"
            proc = run(mpirun(world) + [self.tools.sl_run, sched, "--data",
                                        self.tmp / "tokens.bin", "--steps", STEPS, "--lr", LR,
                                        "--report", report, "--save", index])
            check_ok(proc)
            whole = self.tmp / f"{name}.safetensors"
            check_ok(run([self.tools.sl_run, sched, "--consolidate", index, "--save", whole]))
            with open(report) as f:
                rep = json.load(f)
            self.results[key] = (rep["train"]["losses"], read_safetensors(whole), rep)
        return self.results[key]

    def reference(self, ranks):
        """The same steps on one rank with `ranks` times the batch."""
        key = ("one rank", ranks)
        if key not in self.results:
            sched = self.reference_schedule(ranks)
            report, ckpt = self.tmp / f"ref{ranks}.json", self.tmp / f"ref{ranks}.safetensors"
            check_ok(run([self.tools.sl_run, sched, "--data", self.tmp / "tokens.bin", "--steps",
                          STEPS, "--lr", LR, "--report", report, "--save", ckpt]))
            with open(report) as f:
                rep = json.load(f)
            self.results[key] = (rep["train"]["losses"], read_safetensors(ckpt), rep)
        return self.results[key]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    sl_opt, sl_run = os.environ.get("SL_OPT"), os.environ.get("SL_RUN")
    if not sl_opt or not sl_run:
        pytest.skip("SL_OPT and SL_RUN must point at the built tools (ctest sets them)")
    from sl_helpers import SLTools
    return Job(SLTools(sl_opt, sl_run), tmp_path_factory.mktemp("distributed"))


def assert_same_training(got, want):
    losses, weights, _ = got
    want_losses, want_weights, _ = want
    np.testing.assert_allclose(losses, want_losses, rtol=2e-6)
    assert weights.keys() == want_weights.keys()
    for name in want_weights:
        # As in test_subbatch_schedule.py: sums in another order can move a weight whose gradient
        # is near zero by a visible fraction of lr in AdamW's first steps; bound that at 1% of lr.
        np.testing.assert_allclose(weights[name], want_weights[name], rtol=1e-4, atol=LR * 1e-2,
                                   err_msg=name)


@pytest.mark.parametrize("world,mode", [(2, "speedloader"), (4, "speedloader"), (2, "canonical")])
def test_ranks_train_as_one_rank_with_w_times_the_batch(job, world, mode):
    got = job.train(world, mode)
    rep = got[2]
    assert rep["world"] == world and rep["train"]["world"] == world
    assert rep["train"]["tokens_per_step"] == world * PER_RANK * SEQ
    assert_same_training(got, job.reference(world))


def test_clipping_uses_the_norm_over_every_rank(job):
    """With --max-grad-norm the optimizer steps after the run, scaled by the global norm, which
    the ranks sum from their shards' parts."""
    tmp, tools = job.tmp, job.tools
    clip = ["--steps", STEPS, "--lr", LR, "--max-grad-norm", 0.3]
    check_ok(run(mpirun(2) + [tools.sl_run, job.schedule(2), "--data", tmp / "tokens.bin", *clip,
                              "--report", tmp / "clip2.json", "--save", tmp / "clip2.ckpt"]))
    check_ok(run([tools.sl_run, job.schedule(2), "--consolidate", tmp / "clip2.ckpt", "--save",
                  tmp / "clip2.safetensors"]))
    check_ok(run([tools.sl_run, job.reference_schedule(2), "--data", tmp / "tokens.bin", *clip,
                  "--report", tmp / "clip1.json", "--save", tmp / "clip1.safetensors"]))
    reports = []
    for name in ["clip2", "clip1"]:
        with open(tmp / f"{name}.json") as f:
            reports.append(json.load(f)["train"])
    assert not reports[0]["optimizer_overlapped"]
    np.testing.assert_allclose(reports[0]["grad_norms"], reports[1]["grad_norms"], rtol=1e-6)
    assert max(reports[1]["grad_norms"]) > 0.3  # the clipping bites
    assert_same_training((reports[0]["losses"], read_safetensors(tmp / "clip2.safetensors"), None),
                         (reports[1]["losses"], read_safetensors(tmp / "clip1.safetensors"), None))


def test_collective_bytes_per_step(job):
    """SpeedLoader gathers each group once per pass and reduce-scatters it once per step (~3P);
    canonical does both per sub-batch (~3NP). Each collective counts the whole vector it gathers
    or reduces; P is the model's parameter bytes."""
    _, _, sl = job.train(2, "speedloader")
    _, _, canon = job.train(2, "canonical")
    p = sl["plan"]["parameter_bytes"]
    sl_bytes = sl["train"]["bytes_collective"]
    canon_bytes = canon["train"]["bytes_collective"]
    assert len(set(sl_bytes)) == 1 and len(set(canon_bytes)) == 1, (sl_bytes, canon_bytes)
    # Less than 3P by the passes that skip a gather (the epilogue's forward is its backward, the
    # prologue's backward reads no embedding), more by the shards' padding.
    assert 2.6 * p <= sl_bytes[0] <= 3.1 * p, f"SpeedLoader moved {sl_bytes[0]} bytes, P = {p}"
    assert 2.6 * N * p <= canon_bytes[0] <= 3.1 * N * p, (
        f"canonical moved {canon_bytes[0]} bytes, N P = {N * p}")
    assert canon_bytes[0] == N * sl_bytes[0]
    # Every rank moved the same.
    assert {r["bytes_collective_last_step"] for r in sl["ranks"]} == {sl_bytes[0]}


@pytest.mark.parametrize("world", [2, 4])
def test_each_rank_holds_a_wth_of_the_adamw_state(job, world):
    _, _, rep = job.train(world)
    _, _, one = job.reference(world)
    whole = one["train"]["optimizer_state_bytes"]
    p = one["plan"]["parameter_bytes"]
    assert whole == 3 * p  # fp32 master weights and two moments
    ranks = rep["ranks"]
    assert [r["rank"] for r in ranks] == list(range(world))
    for r in ranks:
        # 1/W of the flattened shards: the model's parameters plus their padding.
        assert whole / world <= r["optimizer_state_bytes"] <= 1.05 * whole / world, r


def test_resume_continues_bit_identically(job):
    tmp, tools = job.tmp, job.tools
    job.train(2)  # the straight run: 5 steps
    sched = job.schedule(2)
    first = run(mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", 3,
                             "--lr", LR, "--save", tmp / "three.ckpt"])
    check_ok(first)
    rest = run(mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", 2,
                            "--lr", LR, "--resume", tmp / "three.ckpt", "--save",
                            tmp / "five.ckpt", "--report", tmp / "five.json"])
    check_ok(rest)
    # Each rank's part of the state after step 5 is the straight run's, bit for bit.
    for rank in range(2):
        part = f"step5.rank{rank}-of-2.safetensors"
        a = read_safetensors(tmp / f"five.ckpt.{part}")
        b = read_safetensors(tmp / f"speedloader-w2.ckpt.{part}")
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].tobytes() == b[name].tobytes(), f"rank {rank} {name}"
    with open(tmp / "five.json") as f:
        losses = json.load(f)["train"]["losses"]
    assert losses == job.train(2)[0][3:]

    # A run of one rank continues from the consolidated checkpoint.
    check_ok(run([tools.sl_run, sched, "--consolidate", tmp / "three.ckpt", "--save",
                  tmp / "three.safetensors"]))
    one = run([tools.sl_run, job.reference_schedule(2), "--data", tmp / "tokens.bin", "--steps", 2,
               "--lr", LR, "--resume", tmp / "three.safetensors", "--report",
               tmp / "one-rank-rest.json"])
    check_ok(one)
    with open(tmp / "one-rank-rest.json") as f:
        np.testing.assert_allclose(json.load(f)["train"]["losses"], losses, rtol=2e-6)

    # Another world cannot resume it, and says why.
    other = run(mpirun(4) + [tools.sl_run, job.schedule(4), "--data", tmp / "tokens.bin",
                             "--steps", 1, "--resume", tmp / "three.ckpt"])
    assert other.returncode != 0
    assert "the checkpoint is sharded over 2 ranks, this run has 4" in other.stderr, describe(other)


def test_consolidated_onnx_is_the_trained_model(job):
    tmp, tools = job.tmp, job.tools
    job.train(2)
    sched = job.schedule(2)
    check_ok(run([tools.sl_run, sched, "--consolidate", tmp / "speedloader-w2.ckpt",
                  "--export-onnx", tmp / "consolidated.onnx"]))
    direct = run(mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", STEPS,
                              "--lr", LR, "--export-onnx", tmp / "direct.onnx"])
    check_ok(direct)
    assert (tmp / "consolidated.onnx").read_bytes() == (tmp / "direct.onnx").read_bytes()
    # Consolidation writes; it does not train, and needs to be told what to write.
    wrong = run([tools.sl_run, sched, "--consolidate", tmp / "speedloader-w2.ckpt", "--save",
                 tmp / "x.safetensors", "--steps", 1])
    assert wrong.returncode == 1
    assert "--consolidate takes only --save and --export-onnx (it does not train), not --steps" \
        in wrong.stderr, describe(wrong)
    nothing = run([tools.sl_run, sched, "--consolidate", tmp / "speedloader-w2.ckpt"])
    assert nothing.returncode == 1 and "give --save FILE and/or --export-onnx FILE" in \
        nothing.stderr, describe(nothing)
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(tmp / "consolidated.onnx"))
    weights = job.train(2)[1]
    for init in model.graph.initializer:
        if init.name in weights:
            np.testing.assert_array_equal(numpy_helper.to_array(init), weights[init.name])


def test_world_mismatches_are_refused(job):
    tools, tmp = job.tools, job.tmp
    alone = run([tools.sl_run, job.schedule(2), "--data", tmp / "tokens.bin", "--steps", 1])
    assert alone.returncode == 1
    assert "the schedule is for 2 ranks (compiled with world=2), but this is a run of one rank; " \
           "launch it with mpirun -np 2" in alone.stderr, describe(alone)
    many = run(mpirun(2) + [tools.sl_run, job.reference_schedule(2), "--data", tmp / "tokens.bin",
                            "--steps", 1])
    assert many.returncode != 0
    assert "the schedule is for one rank, but the job has 2 ranks" in many.stderr, describe(many)


def rank_pid(sched, rank, deadline):
    """The pid of the sl-run process of `rank` running `sched`."""
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if (any(arg.endswith(b"sl-run") for arg in cmdline[:1]) and str(sched).encode() in cmdline
                    and f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ):
                return int(entry.name)
        time.sleep(0.05)
    raise AssertionError(f"no rank {rank} of {sched} found")


def start_and_wait_for_step(job, world, timeout_s, save, step=3):
    """Starts a long training job; returns (process, pid of rank 1) once rank 0 reported `step`."""
    sched = job.schedule(world)
    proc = subprocess.Popen(
        [str(c) for c in mpirun(world) + [job.tools.sl_run, sched, "--data",
                                          job.tmp / "tokens.bin", "--steps", 10 ** 6,
                                          "--collective-timeout", timeout_s, "--save", save]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        if line.startswith(f"step {step}/"):
            break
        assert time.monotonic() < deadline, "the job did not reach step 3"
    return proc, rank_pid(sched, 1, deadline)


def finish(proc, limit_s):
    """Waits at most `limit_s` seconds for the job; returns (seconds, stderr)."""
    start = time.monotonic()
    try:
        _, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the job did not end within {limit_s} s")
    return time.monotonic() - start, err


def test_a_killed_rank_ends_the_job(job):
    save = job.tmp / "killed.ckpt"
    proc, pid = start_and_wait_for_step(job, 2, 5, save)
    os.kill(pid, signal.SIGKILL)
    seconds, err = finish(proc, 30)
    assert proc.returncode != 0
    # mpirun names the rank that died; the survivor names the collective it was in.
    assert "rank 1" in err and "signal 9" in err, err
    assert re.search(r"sl-run: error: rank 0 of 2: terminated (during|while computing, after) "
                     r"(kernel \d+ '.+' \((ALL_GATHER|REDUCE_SCATTER)\)|step \d+: )", err), err
    assert not save.exists() and not list(job.tmp.glob("killed.ckpt*"))


def test_a_stalled_rank_times_out(job):
    save = job.tmp / "stalled.ckpt"
    proc, pid = start_and_wait_for_step(job, 2, 2, save)
    os.kill(pid, signal.SIGSTOP)
    try:
        seconds, err = finish(proc, 30)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode != 0
    # Rank 0 waits 2 s in its next collective, then says which one and ends the job.
    # (Most often a kernel's collective; the step's sum of the loss over the ranks is one too.)
    assert re.search(r"sl-run: error: rank 0 of 2: .*(\((ALL_GATHER|REDUCE_SCATTER)\)|the loss and "
                     r"gradient norm) did not complete within 2 s \(--collective-timeout\): another "
                     r"rank has died, stopped or fallen behind", err), err
    assert not save.exists()
