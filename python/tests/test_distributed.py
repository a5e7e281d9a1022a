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


def suffix(precision):
    """Names of f32 files are as other tests spell them; other precisions add theirs."""
    return "" if precision == "f32" else f"-{precision}"


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

    def schedule(self, world, mode="speedloader", precision="f32"):
        """A schedule for `world` ranks of PER_RANK sequences, or (world=1) for one rank with as
        many sequences as `ranks` would have together: see reference()."""
        path = self.tmp / f"{mode}-w{world}{suffix(precision)}.slsched"
        if not path.exists():
            options = (f"batch={PER_RANK} seq={SEQ} num-sub-batches={N} live-blocks=1 mode={mode} "
                       f"precision={precision}")
            check_ok(run([self.tools.sl_opt, self.tmp / "model.onnx",
                          f"--sl-train={options} world={world}", "-o", path]))
        return path

    def reference_schedule(self, ranks, precision="f32"):
        path = self.tmp / f"one-rank-for-{ranks}{suffix(precision)}.slsched"
        if not path.exists():
            batch = PER_RANK * ranks
            check_ok(run([self.tools.sl_opt, self.tmp / "model.onnx",
                          f"--sl-train=batch={batch} seq={SEQ} num-sub-batches={N * ranks} "
                          f"live-blocks=1 precision={precision}", "-o", path]))
        return path

    def train(self, world, mode="speedloader", precision="f32"):
        """(losses, consolidated weights, report) of STEPS steps on `world` ranks."""
        key = (world, mode, precision)
        if key not in self.results:
            name = f"{mode}-w{world}{suffix(precision)}"
            sched = self.schedule(world, mode, precision)
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

    def reference(self, ranks, precision="f32"):
        """The same steps on one rank with `ranks` times the batch."""
        key = ("one rank", ranks, precision)
        if key not in self.results:
            sched = self.reference_schedule(ranks, precision)
            report = self.tmp / f"ref{ranks}{suffix(precision)}.json"
            ckpt = self.tmp / f"ref{ranks}{suffix(precision)}.safetensors"
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


def parts_of(index):
    """The part files a sharded checkpoint's index names."""
    with open(index) as f:
        return [Path(index).parent / name for name in json.load(f)["files"]]


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


def test_bf16_ranks_train_as_one_bf16_rank(job):
    """precision=bf16 across ranks: each shard keeps the f32 masters (the model file's f32
    values), the all-gathered group is cast to bf16 on the device, gradients are reduce-scattered
    in f32. The weights each rank computes with are the one-rank run's (its bf16 copies of the
    same masters, rounded the same way), so the losses agree with the one-rank bf16 run's up to
    the order of the f32 gradient sums, and the consolidated masters likewise."""
    got = job.train(2, "speedloader", "bf16")
    want = job.reference(2, "bf16")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-2)
    assert got[1].keys() == want[1].keys()
    for name in want[1]:
        assert got[1][name].dtype == np.float32, name  # the f32 masters, not bf16 copies
        np.testing.assert_allclose(got[1][name], want[1][name], rtol=1e-3, atol=LR * 0.1,
                                   err_msg=name)
    # Not the f32 run: bf16 really computed.
    assert not np.allclose(got[0], job.train(2)[0], rtol=1e-6)


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
        a = read_safetensors(parts_of(tmp / "five.ckpt")[rank])
        b = read_safetensors(parts_of(tmp / "speedloader-w2.ckpt")[rank])
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


def test_checkpoints_of_another_world_are_refused_naming_both(job):
    """A checkpoint of one rank given to two, and a 2-rank index given to one: a message that says
    what the file is and both world sizes, not a JSON parse error."""
    tools, tmp = job.tools, job.tmp
    job.reference(2)  # ref2.safetensors: a checkpoint of one rank of the same model
    job.train(2)  # speedloader-w2.ckpt: the index of a 2-rank checkpoint
    two = run(mpirun(2) + [tools.sl_run, job.schedule(2), "--data", tmp / "tokens.bin",
                           "--steps", 1, "--resume", tmp / "ref2.safetensors"])
    assert two.returncode != 0
    assert (f"{tmp / 'ref2.safetensors'}: this is the checkpoint of a run of one rank (world 1), "
            "not the index of a sharded checkpoint, and this run has 2 ranks (world 2): resume it "
            "with a run of one rank") in two.stderr, describe(two)
    one = run([tools.sl_run, job.reference_schedule(2), "--data", tmp / "tokens.bin", "--steps", 1,
               "--resume", tmp / "speedloader-w2.ckpt"])
    assert one.returncode == 1
    assert (f"{tmp / 'speedloader-w2.ckpt'}: this is the index of a checkpoint sharded over 2 ranks "
            "(world 2), and this run has one rank (world 1): resume with 2 ranks, or consolidate "
            "it") in one.stderr, describe(one)
    part = run([tools.sl_run, job.schedule(2), "--consolidate",
                parts_of(tmp / "speedloader-w2.ckpt")[1], "--save", tmp / "never.safetensors"])
    assert part.returncode == 1
    assert "this is rank 1's part of a checkpoint sharded over 2 ranks, not its index" in \
        part.stderr, describe(part)
    assert not (tmp / "never.safetensors").exists()


# Ranks that are given different things stop before their first step, each naming the rank that
# differs and the setting. Launched as one program per rank (mpirun's "A : B"), rank 1 with the
# change; the bytes of the schedule and the models count, not their paths.
def disagreeing_rank(job, case):
    tmp, tools = job.tmp, job.tools
    base = {"schedule": job.schedule(2), "--data": tmp / "tokens.bin", "--steps": 2, "--lr": LR}
    changed = dict(base)
    if case == "schedule":
        path = tmp / "w2-one-sub-batch.slsched"
        if not path.exists():
            check_ok(run([tools.sl_opt, tmp / "model.onnx", f"--sl-train=batch={PER_RANK} "
                          f"seq={SEQ} num-sub-batches=1 live-blocks=1 world=2", "-o", path]))
        changed["schedule"] = path
    elif case == "model":
        # The same architecture with other weights, compiled beside them: a schedule of the same
        # bytes whose parameters read another file.
        other = tmp / "other-model"
        if not other.exists():
            other.mkdir()
            export_model("llama", CONFIG, other / "model.onnx", seed=1, constant_folding=False,
                         batch=1, seq=SEQ)
            check_ok(run([tools.sl_opt, other / "model.onnx", f"--sl-train=batch={PER_RANK} "
                          f"seq={SEQ} num-sub-batches={N} live-blocks=1 mode=speedloader world=2",
                          "-o", other / "train.slsched"]))
        changed["schedule"] = other / "train.slsched"
    elif case == "data":
        tokens = (tmp / "tokens.bin").read_bytes()
        other = tmp / "other-tokens.bin"
        other.write_bytes(tokens[2:] + tokens[:2])  # the same size, shifted by one token
        changed["--data"] = other
    elif case == "--lr":
        changed["--lr"] = 2 * LR
    elif case == "--steps":
        changed["--steps"] = 3
    elif case == "--resume":
        job.train(2)
        changed["--resume"] = tmp / "speedloader-w2.ckpt"
    elif case == "--save":
        base["--save"], changed["--save"] = tmp / "disagree-a.ckpt", tmp / "disagree-b.ckpt"
    return base, changed


@pytest.mark.parametrize("case,expected", [
    ("schedule", r"\n  schedule: rank 1 has .*w2-one-sub-batch\.slsched: \d+ bytes, fnv1a64 "
                 r"[0-9a-f]{16}, rank 0 has .*speedloader-w2\.slsched: \d+ bytes"),
    ("model", r"\n  model files: rank 1 has .*other-model/model\.onnx: \d+ bytes, sampled fnv1a64 "
              r"[0-9a-f]{16}, rank 0 has .*/model\.onnx: \d+ bytes"),
    ("data", r"\n  --data: rank 1 has .*other-tokens\.bin: \d+ bytes, sampled fnv1a64 [0-9a-f]{16}, "
             r"rank 0 has .*tokens\.bin"),
    ("--lr", r"\n  --lr: rank 1 has 0\.002, rank 0 has 0\.001"),
    ("--steps", r"\n  --steps: rank 1 has 3, rank 0 has 2"),
    ("--resume", r"\n  --resume: rank 1 has .*speedloader-w2\.ckpt: \d+ bytes, sampled fnv1a64 "
                 r"[0-9a-f]{16}, rank 0 has \(none\)"),
    ("--save", r"\n  --save: rank 1 has .*disagree-b\.ckpt, rank 0 has .*disagree-a\.ckpt"),
])
def test_ranks_that_disagree_stop_naming_the_rank_and_the_setting(job, case, expected):
    base, changed = disagreeing_rank(job, case)

    def program(options):
        args = [job.tools.sl_run, options["schedule"]]
        for flag, value in options.items():
            if flag != "schedule":
                args += [flag, value]
        return args

    start = time.monotonic()
    proc = run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "1", *program(base), ":",
                "-np", "1", *program(changed)], timeout=60)
    assert proc.returncode != 0, describe(proc)
    assert re.search(r"sl-run: error: rank [01] of 2: the ranks disagree \(every rank must run the "
                     r"same schedule, model, data and settings\):\n  ", proc.stderr), describe(proc)
    assert re.search(expected, proc.stderr), describe(proc)
    # Before any step: nothing trained, nothing saved.
    assert not re.search(r"^step \d", proc.stdout, re.M), describe(proc)
    assert not list(job.tmp.glob("disagree-*"))
    assert time.monotonic() - start < 60


def snapshot(directory, prefix):
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name.startswith(prefix)}


def test_a_failed_resave_keeps_the_previous_checkpoint_and_a_good_one_replaces_it(job):
    """Two jobs save the same sharded path at the same step; in the second, rank 1 cannot write its
    part (the SL_TEST_FAIL_CHECKPOINT_PART hook). The first checkpoint stays byte for byte, and
    resumes as before; a third job's save replaces it and leaves no part of it behind."""
    tmp, tools = job.tmp, job.tools
    sched = job.schedule(2)
    index = tmp / "resave.ckpt"
    train3 = mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", 3, "--lr",
                          LR, "--save", index]
    check_ok(run(train3))
    before = snapshot(tmp, "resave.ckpt")
    assert len(before) == 3  # the index and two parts

    env = dict(os.environ, SL_TEST_FAIL_CHECKPOINT_PART="1")
    failed = subprocess.run([str(c) for c in train3], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S, env=env)
    assert failed.returncode != 0
    assert (f"the checkpoint {index} was not written: rank(s) 1 could not write their part"
            in failed.stderr), describe(failed)
    assert "and every file it names are as they were" in failed.stderr, describe(failed)
    assert snapshot(tmp, "resave.ckpt") == before

    # The old checkpoint resumes: the last two of five steps, as the straight run's.
    rest = run(mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", 2,
                            "--lr", LR, "--resume", index, "--report", tmp / "resave-rest.json"])
    check_ok(rest)
    with open(tmp / "resave-rest.json") as f:
        assert json.load(f)["train"]["losses"] == job.train(2)[0][3:]

    # A save that succeeds replaces it: a new index, new parts, none of the old ones left.
    old_parts = json.loads(before["resave.ckpt"])["files"]
    check_ok(run(train3))
    after = snapshot(tmp, "resave.ckpt")
    new_parts = [p.name for p in parts_of(index)]
    assert set(new_parts).isdisjoint(old_parts)
    assert set(after) == {"resave.ckpt", *new_parts}
    # The same three steps again: each rank's part holds the same bytes under its new name.
    for old, new in zip(old_parts, new_parts):
        assert after[new] == before[old], (old, new)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_save_killed_mid_write_keeps_the_previous_checkpoint_and_leaves_nothing_growing(job, sig):
    """Both ranks are killed while writing their parts (the SL_TEST_STALL_WRITES hook stops every
    write after 64 bytes). Twice: the previous index and its parts stay byte for byte and resume;
    SIGTERM's handler removes the temporaries at once, kill -9's stay until the next save that
    completes, which sweeps them and the killed saves' parts, leaving the index and its parts."""
    tmp, tools = job.tmp, job.tools
    sched = job.schedule(2)
    name = f"killed-{sig.name}.ckpt"
    index = tmp / name
    train = mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", 3, "--lr",
                         LR, "--save", index]
    check_ok(run(train))
    before = snapshot(tmp, name)

    def temporaries():
        return sorted(p.name for p in tmp.iterdir()
                      if p.name.startswith(f".{name}.step") and ".sl-tmp." in p.name)

    for attempt in range(2):
        env = dict(os.environ, SL_TEST_STALL_WRITES="64")
        proc = subprocess.Popen([str(c) for c in train], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while len(temporaries()) < 2 * (attempt + 1 if sig == signal.SIGKILL else 1):
                assert proc.poll() is None, "the job ended before its save stalled"
                assert time.monotonic() < deadline, "the save never stalled"
                time.sleep(0.05)
            for rank in range(2):
                os.kill(rank_pid(sched, rank, deadline), sig)
            proc.wait(timeout=TIMEOUT_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode != 0
        assert snapshot(tmp, name) == before, f"attempt {attempt}"
        assert len(temporaries()) == (2 * (attempt + 1) if sig == signal.SIGKILL else 0)

    # The previous checkpoint resumes.
    check_ok(run(mpirun(2) + [tools.sl_run, sched, "--data", tmp / "tokens.bin", "--steps", 1,
                              "--lr", LR, "--resume", index]))
    # The next save that completes sweeps whatever the killed ones left.
    check_ok(run(train))
    assert temporaries() == []
    assert set(snapshot(tmp, name)) == {name, *(p.name for p in parts_of(index))}
    assert not any(p.name.startswith(f".{name}") for p in tmp.iterdir())


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
