"""Planned inference: `--sl-infer` with a device budget, run by sl-run, against PyTorch.

With `device-memory=` (or any other planning option) the inference pipeline plans the run as the
training pipeline does: sl-plan measures forward-only copies of the model, chooses the sub-batch
size (a divisor of `batch=`), the count and the live blocks, and sl-schedule-subbatches writes
`@infer_step`: every group's weights fetched from host memory once for all sub-batches
(speedloader) or once per sub-batch (canonical), the boundary activations offloaded between
groups, the logits offloaded per sub-batch and joined on the host. Checked here:

- under a budget one byte smaller than the arena of the whole batch, the plan splits the batch
  into sub-batches, its arena fits the budget, and the logits equal PyTorch's (LLaMA with GQA,
  GPT-2 with its head tied to the embedding, read by the first and the last group);
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
from test_generation import ARCHS

BATCH, SEQ = 4, 7


@pytest.fixture(scope="module", params=list(ARCHS.values()), ids=list(ARCHS))
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


def test_budget_splits_the_batch(sl_tools, exported):
    arch, tmp, res = exported
    want = np.load(res.output_file)
    # The whole batch as one sub-batch: its arena is the plan's prediction, and what sl-run lays out.
    whole, report = infer(sl_tools, tmp, res, "whole", "num-sub-batches=1")
    plan = report["plan"]
    assert plan["num_sub_batches"] == 1 and plan["sub_batch_size"] == BATCH
    assert report["device_arena_bytes"] == plan["predicted_device_bytes"], report
    assert_close(whole, want, f"{arch}, one sub-batch of {BATCH}")

    budget = plan["predicted_device_bytes"] - 1
    split, report = infer(sl_tools, tmp, res, "split", f"device-memory={budget}")
    plan = report["plan"]
    assert plan["num_sub_batches"] > 1, plan
    assert plan["sub_batch_size"] * plan["num_sub_batches"] == BATCH
    assert report["device_arena_bytes"] <= budget, report
    assert report["device_arena_bytes"] == plan["predicted_device_bytes"], report
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
