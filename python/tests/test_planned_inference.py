"""Planned inference: `--sl-infer` with a device budget, run by sl-run, against PyTorch.

With `device-memory=` (or any other planning option) the inference pipeline plans the run as the
training pipeline does: sl-plan measures forward-only copies of the model, chooses the sub-batch
size (a divisor of `batch=`), the count and the live blocks, and sl-schedule-subbatches writes
`@infer_step`: every group's weights fetched from host memory once for all sub-batches
(speedloader) or once per sub-batch (canonical), the boundary activations offloaded between
groups, the logits offloaded per sub-batch and joined on the host. Checked here:

- every sub-batch size gives PyTorch's logits, with the arena the plan predicted; under a budget
  the plan takes the largest sub-batch size whose arena fits, which splits the batch into
  sub-batches (LLaMA with GQA, GPT-2 with its head tied to the embedding, read by the first and
  the last group; OPT too, whose arena barely depends on the sub-batch size);
- fixed sub-batch counts, live blocks and both modes give the same logits, the canonical mode
  fetching the weights once per sub-batch (more bytes over the link);
- the device arena sl-run lays out is the one the plan predicted;
- a budget nothing fits is refused with the bytes needed.
"""

import json

import numpy as np
import pytest

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from speedloader.models.gpt2 import OPTConfig
from test_generation import ARCHS

BATCH, SEQ = 4, 7
# The generation tests' LLaMA (GQA) and GPT-2 (tied head), and OPT (ReLU, learned positions).
MODELS = dict(ARCHS, **{"opt-relu": ("opt", OPTConfig(layers=2, hidden=32, heads=4, vocab=64,
                                                       max_positions=16, activation="relu"))})


@pytest.fixture(scope="module", params=list(MODELS.values()), ids=list(MODELS))
def exported(request, tmp_path_factory):
    arch, config = request.param
    tmp = tmp_path_factory.mktemp(arch + "-planned")
    res = export_model(arch, config, tmp / "model.onnx", seed=3, constant_folding=False,
                       batch=BATCH, seq=SEQ, reference_dir=tmp)
    return arch, tmp, res


def infer(sl_tools, tmp, res, name, options):
    sched = tmp / f"{name}.slsched"
    proc = sl_tools._run([sl_tools.sl_opt, tmp / "model.onnx",
                          f"--sl-infer=batch={BATCH} seq={SEQ} {options}", "-o", sched])
    check_ok(proc)
    out, report = tmp / f"{name}.npy", tmp / f"{name}.json"
    run = sl_tools.run(sched, res.input_file, out, report)
    check_ok(run)
    return np.load(out), json.loads(report.read_text())


def assert_close(got, want, what):
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-4, f"{what}: max |diff| / max |logit| = {err:.3g}"


def test_budget_picks_the_largest_sub_batch_that_fits(sl_tools, exported):
    arch, tmp, res = exported
    want = np.load(res.output_file)
    # Each sub-batch size's arena, as the plan predicts it and sl-run lays it out.
    arenas = {}
    for b in (1, 2, BATCH):
        got, report = infer(sl_tools, tmp, res, f"b{b}", f"sub-batch-size={b}")
        plan = report["plan"]
        assert plan["sub_batch_size"] == b and plan["num_sub_batches"] == BATCH // b
        assert report["device_arena_bytes"] == plan["predicted_device_bytes"], report
        assert_close(got, want, f"{arch}, {BATCH // b} sub-batches of {b}")
        arenas[b] = plan["predicted_device_bytes"]

    # The smallest of them as the budget: the planner takes the largest size that fits.
    budget = min(arenas.values())
    expected = max(b for b, arena in arenas.items() if arena <= budget)
    if arch != "opt":
        # Here the whole batch's activations outweigh a second sub-batch's pipelining, so the
        # budget splits the batch (OPT's tiny activations do not: its arena barely depends on b).
        assert expected < BATCH, arenas
    split, report = infer(sl_tools, tmp, res, "split", f"device-memory={budget}")
    plan = report["plan"]
    assert plan["sub_batch_size"] == expected, (plan, arenas)
    assert plan["sub_batch_size"] * plan["num_sub_batches"] == BATCH
    assert report["device_arena_bytes"] <= budget, report
    # Every weight crossed the link: the model's weights are read from host memory.
    assert report["bytes_moved"]["host_to_device"] >= plan["parameter_bytes"], report
    assert_close(split, want, f"{arch}, {plan['num_sub_batches']} sub-batches")


@pytest.mark.parametrize("options", ["num-sub-batches=2 live-blocks=2",
                                     "num-sub-batches=4 mode=canonical",
                                     "sub-batch-size=1 plan-report"])
def test_fixed_plans_agree(sl_tools, exported, options):
    arch, tmp, res = exported
    want = np.load(res.output_file)
    name = options.replace(" ", "_").replace("=", "")
    got, report = infer(sl_tools, tmp, res, name, options)
    plan = report["plan"]
    if "canonical" in options:
        assert plan["mode"] == "canonical"
        # Once per sub-batch: four times the weights.
        assert report["bytes_moved"]["host_to_device"] >= 4 * plan["parameter_bytes"]
    assert_close(got, want, f"{arch}, {options}")


def test_budget_nothing_fits_is_refused(sl_tools, exported):
    arch, tmp, res = exported
    proc = sl_tools._run([sl_tools.sl_opt, tmp / "model.onnx",
                          f"--sl-infer=batch={BATCH} seq={SEQ} device-memory=1KiB", "-o",
                          tmp / "none.slsched"])
    assert proc.returncode != 0, describe(proc)
    assert "sub-batch-size=1" in proc.stderr and "of device memory, more than the budget of " \
        "1.00 KiB (1024 bytes)" in proc.stderr, describe(proc)
    assert not (tmp / "none.slsched").exists()
