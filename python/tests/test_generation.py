"""Generation end to end: sl-opt --sl-generate, then sl-run --prompts, against PyTorch.

Greedy decoding of a tiny LLaMA (grouped-query attention, rotary positions) and a GPT-2 (learned
positions, tied head) must equal PyTorch's greedy decoding token for token, for prompts of
different lengths in one batch, with the batch as one sub-batch and as three, more prompts than
one batch holds, and the KV cache in the host pool (the only place the schedule keeps it).
PyTorch's reference recomputes the whole sequence for every new token, so it shares no KV-cache
logic with what it checks.
"""

import json

import numpy as np
import pytest
import torch

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from speedloader.models.gpt2 import GPT2Config
from speedloader.models.llama import LlamaConfig

MAX_PROMPT, NEW = 7, 5
LENGTHS = [3, 7, 1, 5, 2, 6, 4, 7]  # 8 prompts: one batch of 6 and a padded second batch
ARCHS = {
    "llama-gqa": ("llama", LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48,
                                       vocab=64, max_positions=16)),
    "gpt2-tied": ("gpt2", GPT2Config(layers=2, hidden=32, heads=4, vocab=64, max_positions=16,
                                     activation="gelu")),
}


def torch_greedy(model, prompt, new_tokens):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(torch.tensor([ids], dtype=torch.int64))
            ids.append(int(torch.argmax(logits[0, -1]).item()))
    return ids[len(prompt):]


def write_prompts(path, prompts):
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"tokens": [int(t) for t in p]}) + "\n")


def read_outputs(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module", params=list(ARCHS.values()), ids=list(ARCHS))
def exported(request, tmp_path_factory):
    arch, config = request.param
    tmp = tmp_path_factory.mktemp(arch)
    res = export_model(arch, config, tmp / "model.onnx", seed=3, constant_folding=False,
                       batch=2, seq=MAX_PROMPT)
    rng = np.random.default_rng(11)
    prompts = [rng.integers(0, config.vocab, size=n) for n in LENGTHS]
    want = [torch_greedy(res.model, p, NEW) for p in prompts]
    write_prompts(tmp / "prompts.jsonl", prompts)
    return arch, config, tmp, prompts, want


@pytest.mark.parametrize("num_sub_batches,device_memory", [(1, ""), (3, ""), (3, "1GB")],
                         ids=["n1", "n3", "n3-weights-and-cache-on-device"])
def test_greedy_matches_pytorch(sl_tools, exported, num_sub_batches, device_memory):
    """The KV cache in the host pool (no budget), and, with a device budget that holds
    everything, the weights and every cache chunk kept on the device."""
    arch, config, tmp, prompts, want = exported
    name = f"n{num_sub_batches}{'-resident' if device_memory else ''}"
    sched = tmp / f"gen-{name}.slsched"
    budget = f" device-memory={device_memory}" if device_memory else ""
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp / "model.onnx",
                            f"--sl-generate=batch=6 num-sub-batches={num_sub_batches} "
                            f"max-prompt-len={MAX_PROMPT} max-new-tokens={NEW}{budget}", "-o",
                            sched]))
    out = tmp / f"out-{name}.jsonl"
    report = tmp / f"report-{name}.json"
    proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp / "prompts.jsonl",
                          "--output", out, "--temperature", 0, "--report", report])
    check_ok(proc)
    got = read_outputs(out)
    assert len(got) == len(prompts), describe(proc)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g["index"] == i
        assert g["prompt_tokens"] == len(prompts[i])
        assert g["tokens"] == w, f"prompt {i} (length {len(prompts[i])}): {g} != {w}"
        assert g["finish_reason"] == "length"
    with open(report) as f:
        generation = json.load(f)["generation"]
    assert generation["batches"] == 2
    resident = bool(device_memory)
    assert generation["schedule"]["weights_on_device"] == resident
    assert generation["schedule"]["kv_cache_on_device"] == resident
    if resident:
        # The weights come over once per batch's prefill; a decoding
        # step moves only tokens, positions and small constants: not the weights (streamed, they
        # would be parameter_bytes per step) and not the cache.
        p = generation["schedule"]["parameter_bytes"]
        assert generation["bytes_host_to_device"] < (
            generation["prefill_runs"] * 2 * p + generation["decode_runs"] * p / 4), generation


def test_kv_cache_forced_on_device(sl_tools, exported):
    """kv-cache-on-device=true weights-on-device=false (FlexGen's placement) with a budget that
    would keep both on the device: the same greedy tokens as the streamed schedule (and
    PyTorch's), the weights still fetched every decoding step, and each step's traffic to the
    device smaller by exactly the KV-cache reads (every chunk once), its traffic back by the new
    keys and values."""
    arch, config, tmp, prompts, want = exported
    runs = {}
    for name, placement in (("streamed", ""),
                            ("kvdev", " device-memory=1GB weights-on-device=false "
                                      "kv-cache-on-device=true")):
        sched = tmp / f"gen-{name}.slsched"
        check_ok(sl_tools._run([sl_tools.sl_opt, tmp / "model.onnx",
                                f"--sl-generate=batch=6 num-sub-batches=3 "
                                f"max-prompt-len={MAX_PROMPT} max-new-tokens={NEW}{placement}",
                                "-o", sched]))
        out, report = tmp / f"out-{name}.jsonl", tmp / f"report-{name}.json"
        check_ok(sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp / "prompts.jsonl",
                                "--output", out, "--temperature", 0, "--report", report]))
        with open(report) as f:
            runs[name] = ([g["tokens"] for g in read_outputs(out)], json.load(f)["generation"])
    (streamed, s), (kvdev, k) = runs["streamed"], runs["kvdev"]
    assert kvdev == streamed == want
    assert (s["schedule"]["weights_on_device"], s["schedule"]["kv_cache_on_device"]) == (
        False, False)
    assert (k["schedule"]["weights_on_device"], k["schedule"]["kv_cache_on_device"]) == (
        False, True)
    assert k["schedule"]["sub_batch_size"] == 2 and k["decode_runs"] == s["decode_runs"] > 0
    steps = k["decode_runs"]
    cache = k["schedule"]["kv_cache_bytes"]
    # The weights still cross every step (the streamed schedule's weights and caches both do).
    assert k["decode_bytes_host_to_device"] / steps > k["schedule"]["parameter_bytes"]
    # Each weight once per step: GPT-2's head, tied to the embedding, reuses the embedding's
    # fetched copy (fetched twice, it added 8192 bytes, 7% of the weights, to every step); the
    # rest is tokens, positions and small constants.
    extra = k["decode_bytes_host_to_device"] / steps - k["schedule"]["parameter_bytes"]
    assert extra < 0.02 * k["schedule"]["parameter_bytes"], (arch, extra)
    assert s["decode_bytes_host_to_device"] / steps - k["decode_bytes_host_to_device"] / steps \
        == cache
    # Back: one position of every cache per step.
    assert s["decode_bytes_device_to_host"] / steps - k["decode_bytes_device_to_host"] / steps \
        == cache / k["schedule"]["cache_len"]


def test_sampling_is_reproducible(sl_tools, exported):
    arch, config, tmp, prompts, want = exported
    sched = tmp / "gen-sample.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp / "model.onnx",
                            f"--sl-generate=batch=4 num-sub-batches=2 "
                            f"max-prompt-len={MAX_PROMPT} max-new-tokens={NEW}", "-o", sched]))

    def sample(seed, name):
        out = tmp / name
        check_ok(sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp / "prompts.jsonl",
                                "--output", out, "--temperature", 1.5, "--seed", seed]))
        return [o["tokens"] for o in read_outputs(out)]

    first, again, other = sample(1, "s1.jsonl"), sample(1, "s1b.jsonl"), sample(2, "s2.jsonl")
    assert first == again
    assert first != other
    # Temperature 0 is greedy, whatever the seed.
    out = tmp / "t0.jsonl"
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp / "prompts.jsonl",
                            "--output", out, "--temperature", 0, "--seed", 7]))
    assert [o["tokens"] for o in read_outputs(out)] == want


def test_bad_prompts(sl_tools, exported):
    arch, config, tmp, prompts, want = exported
    sched = tmp / "gen-bad.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp / "model.onnx",
                            f"--sl-generate=batch=2 max-prompt-len={MAX_PROMPT} "
                            f"max-new-tokens={NEW}", "-o", sched]))
    cases = {
        "empty": ([], "empty"),
        "long": (list(range(MAX_PROMPT + 1)), str(MAX_PROMPT)),
        "vocab": ([1, config.vocab], str(config.vocab)),
    }
    for name, (prompt, message) in cases.items():
        path = tmp / f"bad-{name}.jsonl"
        write_prompts(path, [[1, 2], prompt])
        out = tmp / f"bad-{name}-out.jsonl"
        proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", path, "--output", out])
        assert proc.returncode != 0, describe(proc)
        assert message in proc.stderr and f"{path}:2:" in proc.stderr, describe(proc)
        assert not out.exists(), f"{name}: a partial output was left"


def test_long_prompts_past_the_fold_limit(sl_tools, tmp_path):
    """Prompts whose rotary tables (the prefill's [max-prompt-len, head size / 2] frequencies,
    here 1030 x 64) are past the default fold limit of 65536 elements: they must still fold to
    constants (llama2-7b at prompt 2048 failed to compile before: "a block must return its output
    and the keys and values of each KV cache it reads"), and greedy decoding still equals
    PyTorch's."""
    config = LlamaConfig(layers=2, hidden=256, heads=2, kv_heads=1, ffn=64, vocab=64,
                         max_positions=1040)
    res = export_model("llama", config, tmp_path / "model.onnx", seed=5, constant_folding=False,
                       batch=1, seq=8)
    rng = np.random.default_rng(13)
    prompts = [rng.integers(0, config.vocab, size=n) for n in (1030, 4)]
    new = 3
    want = [torch_greedy(res.model, p, new) for p in prompts]
    write_prompts(tmp_path / "prompts.jsonl", prompts)
    sched = tmp_path / "gen.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                            f"--sl-generate=batch=2 max-prompt-len=1030 max-new-tokens={new}",
                            "-o", sched]))
    out = tmp_path / "out.jsonl"
    proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp_path / "prompts.jsonl",
                          "--output", out, "--temperature", 0])
    check_ok(proc)
    got = read_outputs(out)
    assert [g["tokens"] for g in got] == want, describe(proc)
