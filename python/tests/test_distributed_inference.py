"""Inference across ranks: `sl-opt --sl-infer="... world=W"` and `mpirun -np W sl-run` (CPU backend,
MPI plugin), ZeRO-Inference style.

Each rank runs batch= sequences of its own, and every group's weights are sharded over the ranks:
a rank keeps 1/W of them in host memory and all-gathers a group before its pass. The input file
holds every rank's rows (rank r's are rows [r B, (r + 1) B)), and rank 0 writes every rank's
outputs in the same order: the command is the one-rank command under mpirun.

Checked against one rank with W times the batch, in both schedule modes, f32 and bf16, for 2 and 4
ranks (oversubscribed on the CI machine's 2 cores); and the refusals: a schedule for 2 ranks run
alone, an input with the wrong number of rows, ranks given different inputs.
"""

import re
import time

import numpy as np
import pytest

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from test_distributed import CONFIG, MPIRUN, SEQ, mpirun, pytestmark, run  # noqa: F401

PER_RANK = 2


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distributed-inference")
    export_model("llama", CONFIG, tmp / "model.onnx", seed=0, constant_folding=False, batch=1,
                 seq=SEQ)
    return tmp


def compile_for(tools, tmp, world, options, batch):
    path = tmp / f"infer-w{world}-b{batch}-{options.replace(' ', '_').replace('=', '-')}.slsched"
    if not path.exists():
        check_ok(run([tools.sl_opt, tmp / "model.onnx",
                      f"--sl-infer=batch={batch} seq={SEQ} {options} world={world}", "-o", path]))
    return path


def ids_for(tmp, rows, seed=3):
    path = tmp / f"ids-{rows}-{seed}.npy"
    rng = np.random.default_rng(seed)
    np.save(path, rng.integers(0, CONFIG.vocab, size=(rows, SEQ), dtype=np.int64))
    return path


@pytest.mark.parametrize("world,options", [
    (2, "num-sub-batches=2 live-blocks=1 mode=speedloader"),
    (2, "num-sub-batches=2 live-blocks=1 mode=canonical"),
    (4, "num-sub-batches=1 live-blocks=2"),
    (2, "num-sub-batches=2 live-blocks=1 precision=bf16"),
])
def test_ranks_infer_as_one_rank_with_w_times_the_batch(sl_tools, model, world, options):
    tmp = model
    ids = ids_for(tmp, world * PER_RANK)
    sharded = compile_for(sl_tools, tmp, world, options, PER_RANK)
    # One rank, the same sub-batch size: W times the sub-batches.
    subs = int(re.search(r"num-sub-batches=(\d+)", options).group(1))
    one = compile_for(sl_tools, tmp, 1, options.replace(f"num-sub-batches={subs}",
                                                        f"num-sub-batches={subs * world}"),
                      world * PER_RANK)
    out_w, out_1 = tmp / f"logits-w{world}.npy", tmp / "logits-1.npy"
    report = tmp / f"report-w{world}.json"
    proc = run(mpirun(world) + [sl_tools.sl_run, sharded, "--input", ids, "--output", out_w,
                                "--report", report])
    check_ok(proc)
    check_ok(run([sl_tools.sl_run, one, "--input", ids, "--output", out_1]))
    got, want = np.load(out_w), np.load(out_1)
    assert got.shape == want.shape == (world * PER_RANK, SEQ, CONFIG.vocab)
    tolerance = 2e-2 if "bf16" in options else 1e-5
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * np.abs(want).max())
    # Rank 0 writes the report; the schedule's collectives ran.
    text = report.read_text()
    assert '"ALL_GATHER"' in text, text[:2000]


def test_a_schedule_for_two_ranks_run_alone_is_refused(sl_tools, model):
    sharded = compile_for(sl_tools, model, 2, "num-sub-batches=1 live-blocks=1", PER_RANK)
    proc = run([sl_tools.sl_run, sharded, "--input", ids_for(model, 2 * PER_RANK), "--output",
                model / "alone.npy"])
    assert proc.returncode != 0, describe(proc)
    assert "the schedule is for 2 ranks (compiled with world=2), but this is a run of one rank; " \
           "launch it with mpirun -np 2" in proc.stderr, describe(proc)
    assert not (model / "alone.npy").exists()


def test_an_input_without_every_ranks_rows_is_refused(sl_tools, model):
    sharded = compile_for(sl_tools, model, 2, "num-sub-batches=1 live-blocks=1", PER_RANK)
    proc = run(mpirun(2) + [sl_tools.sl_run, sharded, "--input", ids_for(model, PER_RANK),
                            "--output", model / "short.npy"])
    assert proc.returncode != 0, describe(proc)
    assert (f"input 'input_ids' has {PER_RANK} rows along its first axis; the schedule is for 2 "
            f"ranks of {PER_RANK} each (compiled with world=2), so it takes {2 * PER_RANK}"
            in proc.stderr), describe(proc)
    assert not (model / "short.npy").exists()


def test_ranks_given_different_inputs_stop_naming_the_input(sl_tools, model):
    sharded = compile_for(sl_tools, model, 2, "num-sub-batches=1 live-blocks=1", PER_RANK)
    mine, other = ids_for(model, 2 * PER_RANK, seed=3), ids_for(model, 2 * PER_RANK, seed=4)
    start = time.monotonic()
    proc = run([MPIRUN, "--allow-run-as-root", "--oversubscribe",
                "-np", "1", sl_tools.sl_run, sharded, "--input", mine, "--output",
                model / "disagree.npy", ":",
                "-np", "1", sl_tools.sl_run, sharded, "--input", other, "--output",
                model / "disagree.npy"], timeout=60)
    assert proc.returncode != 0, describe(proc)
    assert re.search(r"the ranks disagree .*\n  --input input_ids: rank 1 has .*ids-4-4\.npy: "
                     r"\d+ bytes, sampled fnv1a64 [0-9a-f]{16}, rank 0 has .*ids-4-3\.npy",
                     proc.stderr), describe(proc)
    assert not (model / "disagree.npy").exists()
    assert time.monotonic() - start < 60
