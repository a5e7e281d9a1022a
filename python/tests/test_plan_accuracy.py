"""sl-plan's memory predictions against what sl-run allocates and touches.

sl-plan predicts the device arena and the host pool by scheduling the step of a configuration
on the copies of the model it compiles at sub-batch sizes 2 and 4 and laying it out as
sl-allocate does (docs/user-guide.md, "Plan a training step"). For a tiny LLaMA (GQA) and a
tiny GPT-2 (tied embeddings: the prologue and the epilogue share a parameter), both modes,
N in {1, 2, 4, 7}, K in {1, 2}, several sub-batch sizes, and configurations chosen for device
and host budgets, one step is run and the measured arena and pool (and the high-water marks the
kernels actually touched) must be at most the prediction and at least 90% of it; the chosen
configurations must fit their budgets.
"""

import json

import numpy as np
import pytest

from sl_helpers import check_ok
from speedloader.export import export_model
from speedloader.models.gpt2 import GPT2Config
from speedloader.models.llama import LlamaConfig

SEQ = 8
MODELS = {
    "llama": LlamaConfig(layers=6, hidden=64, heads=4, kv_heads=2, ffn=256, vocab=32,
                         max_positions=SEQ),
    "gpt2": GPT2Config(layers=4, hidden=64, heads=4, vocab=64, max_positions=SEQ),
}
MAX_SEQUENCES = 1024  # the most sequences any configuration below reads in its step


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan_accuracy")
    for arch, config in MODELS.items():
        export_model(arch, config, tmp / f"{arch}.onnx", seed=0, constant_folding=False, batch=1,
                     seq=SEQ)
    (np.arange(MAX_SEQUENCES * SEQ + 1) % 32).astype("<u2").tofile(tmp / "tokens.bin")
    return tmp


def compile_and_run(tools, workdir, arch, options):
    name = f"{arch}-" + "-".join(o.replace("=", "") for o in options.split())
    sched, report = workdir / f"{name}.slsched", workdir / f"{name}.json"
    check_ok(tools._run([tools.sl_opt, workdir / f"{arch}.onnx",
                         f"--sl-train=seq={SEQ} {options}", "-o", sched]))
    check_ok(tools._run([tools.sl_run, sched, "--data", workdir / "tokens.bin", "--steps", 1,
                         "--report", report]))
    with open(report) as f:
        return json.load(f)


def check_memory(report):
    plan = report["plan"]
    pairs = [("device_arena_bytes", "predicted_device_bytes"),
             ("device_arena_peak_bytes", "predicted_device_bytes"),
             ("host_pool_bytes", "predicted_host_pool_bytes"),
             ("host_pool_peak_bytes", "predicted_host_pool_bytes")]
    for measured_key, predicted_key in pairs:
        measured, predicted = report[measured_key], plan[predicted_key]
        assert measured <= predicted, (measured_key, measured, predicted, plan)
        assert measured >= 0.9 * predicted, (measured_key, measured, predicted, plan)
    # The host in all: the pool and AdamW's fp32 master weights and two moments.
    assert plan["predicted_host_bytes"] > plan["predicted_host_pool_bytes"]


@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("mode", ["speedloader", "canonical"])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("b,n", [(1, 1), (3, 2), (2, 4), (5, 7)])
def test_explicit_configurations(sl_tools, workdir, arch, mode, k, b, n):
    report = compile_and_run(sl_tools, workdir, arch,
                             f"sub-batch-size={b} num-sub-batches={n} live-blocks={k} "
                             f"mode={mode}")
    plan = report["plan"]
    assert (plan["mode"], plan["sub_batch_size"], plan["num_sub_batches"],
            plan["live_blocks"]) == (mode, b, n, k)
    check_memory(report)


# Budgets that choose b (device) and N (host), in bytes; the chosen step must fit them.
BUDGETS = [
    ("speedloader", 1, 1536 << 10, 8 << 20),
    ("speedloader", 1, 2 << 20, 12 << 20),
    ("speedloader", 2, 4 << 20, 10 << 20),
    ("canonical", 1, 1 << 20, 10 << 20),
]

@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("mode,k,device,host", BUDGETS)
def test_budgets(sl_tools, workdir, arch, mode, k, device, host):
    report = compile_and_run(sl_tools, workdir, arch,
                             f"device-memory={device} host-memory={host} live-blocks={k} "
                             f"mode={mode}")
    plan = report["plan"]
    assert (plan["mode"], plan["live_blocks"]) == (mode, k)
    assert plan["sub_batch_size"] * plan["num_sub_batches"] <= MAX_SEQUENCES, plan
    check_memory(report)
    assert report["device_arena_bytes"] <= device
    assert plan["predicted_host_bytes"] <= host
