"""Stage gradients (sl-partition-layers + sl-autodiff) against PyTorch autograd.

A model is compiled once into stage functions and their backward functions, and each is
scheduled on its own (`sl-opt --schedule-entry=NAME`). The test chains them as a training step
does: the stages forward (prologue, each block, the epilogue with the loss), then the backward
functions in reverse, each recomputing its stage from the saved boundary input. The loss and the
gradient of every parameter (summed over every stage that reads it, as a tied embedding is read
twice) must equal PyTorch's.
"""

import re
import subprocess

import numpy as np
import pytest
import torch

from sl_helpers import check_ok, describe
from speedloader.export import export_model
from speedloader.models.gpt2 import GPT2Config, OPTConfig
from speedloader.models.llama import LlamaConfig

_LLAMA = dict(layers=2, hidden=32, heads=4, ffn=48, vocab=64, max_positions=16)
_GPT = dict(layers=2, hidden=32, heads=4, vocab=64, max_positions=16)
CASES = [
    pytest.param("llama", LlamaConfig(kv_heads=2, **_LLAMA), id="llama-gqa-untied"),
    pytest.param("llama", LlamaConfig(rope="interleaved", tie_embeddings=True, **_LLAMA),
                 id="llama-interleaved-tied"),
    pytest.param("gpt2", GPT2Config(activation="gelu", **_GPT), id="gpt2-erf"),
    pytest.param("opt", OPTConfig(activation="relu", **_GPT), id="opt-relu"),
]
BATCH, SEQ = 2, 6

LAYER_RE = re.compile(r"(%[\w#:]+) = sl\.layer @(\w+)\(([^)]*)\) params\(([^)]*)\)")
PARAM_RE = re.compile(r'(%\w+) = sl\.param "([^"]+)"')


def stages_of(mlir: str):
    """[(callee, [input SSA names], [param names], [result SSA names])] of @forward, in order."""
    params = dict(PARAM_RE.findall(mlir))
    forward = mlir[mlir.index("func.func @forward"):]
    stages = []
    for results, callee, inputs, args in LAYER_RE.findall(forward):
        base, _, count = results.partition(":")
        outs = [f"{base}#{i}" for i in range(int(count))] if count else [base]
        stages.append((callee, [v.strip() for v in inputs.split(",") if v.strip()],
                       [params[a.strip()] for a in args.split(",") if a.strip()], outs))
    return stages


def run_schedule(sl_tools, sched, inputs, n_outputs, tmp):
    cmd = [sl_tools.sl_run, sched]
    for i, value in enumerate(inputs):
        path = tmp / f"in{i}.npy"
        np.save(path, value)
        cmd += ["--input", f"arg{i}={path}"]
    for i in range(n_outputs):
        cmd += ["--output", f"output{i}={tmp / f'out{i}.npy'}"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    check_ok(proc)
    return [np.load(tmp / f"out{i}.npy") for i in range(n_outputs)]


@pytest.mark.parametrize("arch,config", CASES)
def test_stage_gradients_match_autograd(sl_tools, tmp_path, arch, config):
    onnx_path = tmp_path / "model.onnx"
    res = export_model(arch, config, onnx_path, seed=0, constant_folding=False, batch=BATCH,
                       seq=SEQ)
    passes = ["--sl-append-loss", f"--sl-infer=batch={BATCH} seq={SEQ} step=false",
              "--sl-partition-layers", "--sl-autodiff", "-canonicalize", "-cse"]
    proc = sl_tools._run([sl_tools.sl_opt, onnx_path, *passes])
    check_ok(proc)
    stages = stages_of(proc.stdout)
    assert [s[0] for s in stages][0] == "prologue" and stages[-1][0] == "epilogue"

    schedules = {}
    for callee in {s[0] for s in stages}:
        for name in (callee, callee + "_backward"):
            sched = tmp_path / f"{name}.slsched"
            check_ok(sl_tools._run([sl_tools.sl_opt, onnx_path, *passes,
                                    f"--schedule-entry={name}", "-o", sched]))
            schedules[name] = sched

    rng = np.random.default_rng(3)
    tokens = rng.integers(0, config.vocab, size=(BATCH, SEQ + 1), dtype=np.int64)
    ids, labels = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    state = {k: v.detach().numpy() for k, v in res.model.state_dict().items()}
    values = {"%arg0": ids, "%arg1": labels}

    # Forward, stage by stage, keeping each stage's boundary inputs.
    saved = []
    for callee, inputs, params, outs in stages:
        args = [values[v] for v in inputs] + [state[p] for p in params]
        results = run_schedule(sl_tools, schedules[callee], args, len(outs), tmp_path)
        saved.append(args)
        values.update(zip(outs, results))
    loss = float(values[stages[-1][3][0]])

    # Backward, in reverse: each backward returns its float inputs' and its params' gradients.
    grads = {stages[-1][3][0]: np.array(1.0, dtype=np.float32)}
    param_grads = {}
    for (callee, inputs, params, outs), args in zip(reversed(stages), reversed(saved)):
        seeds = [grads.get(o, np.zeros_like(values[o])) for o in outs]
        float_inputs = [v for v in inputs if values[v].dtype == np.float32]
        results = run_schedule(sl_tools, schedules[callee + "_backward"], args + seeds,
                               len(float_inputs) + len(params), tmp_path)
        for v, g in zip(float_inputs, results):
            grads[v] = grads.get(v, 0) + g
        for p, g in zip(params, results[len(float_inputs):]):
            param_grads[p] = param_grads.get(p, 0) + g

    # PyTorch.
    model = res.model
    model.zero_grad()
    logits = model(torch.from_numpy(ids))
    want = torch.nn.functional.cross_entropy(logits.reshape(-1, config.vocab),
                                             torch.from_numpy(labels).reshape(-1))
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-5)
    named = dict(model.named_parameters())
    assert param_grads, "no parameter gradients came back"
    for name, grad in param_grads.items():
        expected = named[name].grad.numpy()
        # Some gradients are zero in exact arithmetic (a key bias shifts every score of a query
        # alike, which softmax ignores): both sides are then rounding noise near 1e-9.
        atol = max(1e-5 * float(np.abs(expected).max()), 1e-7)
        np.testing.assert_allclose(grad, expected, rtol=1e-3, atol=atol,
                                   err_msg=f"gradient of {name}")
    # Every trained parameter got its gradient.
    missing = {n for n, p in named.items() if p.requires_grad} - set(param_grads)
    assert not missing, f"parameters without gradients: {sorted(missing)}"
