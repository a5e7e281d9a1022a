"""sl-plan's memory predictions against what sl-run allocates and touches.

sl-plan predicts the device arena and the host pool by scheduling the step of a configuration
on the copies of the model it compiles at sub-batch sizes 2 and 4 and laying it out as
sl-allocate does (docs/user-guide.md, "Plan a training step"): exactly up to 16 sub-batches, the
pool bounded beyond. For a tiny LLaMA (GQA) and a tiny GPT-2 (tied embeddings: the prologue and
the epilogue share a parameter), both modes, K in {1, 2}, N from 1 to 20 (past the 16 laid
out), and configurations chosen for device and host budgets, one step is run and the measured
arena and pool (and the high-water marks the kernels actually touched) must be at most the
prediction and at least 90% of it; the chosen configurations must fit their budgets. The cases
are few and small (sl-run's time grows with b x N): tools/ and the lit tests cover the rest.
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


# (mode, K, b, N): both modes and K, N = 1, N > 4 and N > 16 (the pool bounded, not laid out).
EXPLICIT = [
    ("speedloader", 1, 3, 2),
    ("speedloader", 2, 2, 7),
    ("speedloader", 1, 1, 20),
    ("canonical", 2, 1, 1),
    ("canonical", 1, 2, 6),
]


@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("mode,k,b,n", EXPLICIT)
def test_explicit_configurations(sl_tools, workdir, arch, mode, k, b, n):
    report = compile_and_run(sl_tools, workdir, arch,
                             f"sub-batch-size={b} num-sub-batches={n} live-blocks={k} "
                             f"mode={mode}")
    plan = report["plan"]
    assert (plan["mode"], plan["sub_batch_size"], plan["num_sub_batches"],
            plan["live_blocks"]) == (mode, b, n, k)
    check_memory(report)


# Budgets that choose b (device) and N (host: SpeedLoader's pool grows with N by the boundaries
# it holds; canonical's only by the inputs, so there N is given), in bytes, per model; the chosen
# step must fit them. GPT-2's SpeedLoader budgets choose N > 16 (the pool bounded).
BUDGETS = [
    ("llama", "speedloader", 1, 1536 << 10, "host-memory=7759462"),   # b=8, N=14
    ("llama", "speedloader", 2, 3 << 20, "host-memory=7654604"),      # b=10, N=8
    ("llama", "canonical", 1, 1 << 20, "num-sub-batches=3"),          # b=8
    ("gpt2", "speedloader", 1, 1 << 20, "host-memory=4718592"),       # b=2, N=65
    ("gpt2", "speedloader", 2, 2304 << 10, "host-memory=5242880"),    # b=6, N=49
    ("gpt2", "canonical", 1, 1 << 20, "num-sub-batches=3"),           # b=9
]


@pytest.mark.parametrize("arch,mode,k,device,other", BUDGETS)
def test_budgets(sl_tools, workdir, arch, mode, k, device, other):
    report = compile_and_run(sl_tools, workdir, arch,
                             f"device-memory={device} {other} live-blocks={k} mode={mode}")
    plan = report["plan"]
    assert (plan["mode"], plan["live_blocks"]) == (mode, k)
    assert plan["sub_batch_size"] * plan["num_sub_batches"] <= MAX_SEQUENCES, plan
    check_memory(report)
    assert report["device_arena_bytes"] <= device
    if other.startswith("host-memory="):
        assert plan["predicted_host_bytes"] <= int(other.split("=")[1])
