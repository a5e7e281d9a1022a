"""Hugging Face `transformers` architectures through sl-opt and sl-run, checked against PyTorch.

An architecture is a transformers config class, its causal-LM class and a tiny configuration (two
layers, small hidden size and vocabulary). The model is built from the configuration (nothing is
downloaded), its weights re-drawn at a standard deviation of 0.08 around their initial values so
that greedy decoding has no near-ties and no two norm weights are equal, and exported the way the
user guide says:

- inference and generation: `torch.onnx.export(model, (input_ids,), ..., opset_version=17,
  do_constant_folding=False)` in eval mode with `use_cache=False`;
- training: the same with `training=torch.onnx.TrainingMode.PRESERVE` and the model in train mode
  (dropout probabilities are 0 in every configuration here).

`check_inference`, `check_training` and `check_generation` then hold sl-run's results against
PyTorch's, and each asserts that every block ran fused (`assert_fused`).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import torch

from sl_helpers import check_ok, describe
from test_e2e_training import read_safetensors, torch_training
from test_generation import read_outputs, write_prompts

WEIGHT_STD = 0.08
# Logits: max |diff| / max |logit|.
LOGITS_RTOL = 1e-4
# Training: 3 AdamW steps over a batch of 4 split into 2 sub-batches.
TRAIN_BATCH, TRAIN_SEQ, TRAIN_STEPS, LR, WD, SUB_BATCHES = 4, 8, 3, 1e-3, 0.01, 2
BETA1 = 0.9  # sl-run's and torch's default: after one step, adam_m = (1 - BETA1) * gradient
# Generation: prompts of different lengths, each compared with HF generate run on it alone.
GEN_LENGTHS = [5, 1, 8, 3]
GEN_NEW = 8

# The kernels an unfused block leaves behind: a softmax (attention), the reductions and powers of
# a norm, the activation of an MLP. None may run once every block is fused; the loss is a fused
# cross-entropy, and constant scales (1/sqrt(d), sqrt(hidden)) fold.
UNFUSED_KINDS = {"SOFTMAX", "SOFTMAX_GRAD", "REDUCE_MEAN", "POW", "SQRT", "ERF", "TANH", "SIGMOID",
                 "SILU"}


@dataclass(frozen=True)
class HFArch:
    """One architecture: `transformers.<config>(**kwargs)` built as `transformers.<model>`.

    `fused` counts the fused kernels one inference forward runs (for example
    `{"RMS_NORM": 5, "ATTENTION": 2}`); training and generation must run each of these kinds too.
    """

    name: str
    config: str
    model: str
    kwargs: Dict[str, object]
    fused: Dict[str, int]
    # Flat [begin, end) ranges of parameters whose gradient is zero in exact arithmetic: both
    # sides are rounding noise there, so those elements are only bounded.
    zero_grad_slices: Dict[str, Tuple[int, int]] = field(default_factory=dict)

    @property
    def vocab(self) -> int:
        return int(self.make_config().vocab_size)

    def make_config(self):
        import transformers

        return getattr(transformers, self.config)(**self.kwargs)


class LogitsOnly(torch.nn.Module):
    """A causal LM as `input_ids -> logits`: what the exported graph computes."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        # Models without a KV cache (OpenAI GPT) take no use_cache argument.
        self.kwargs = {"use_cache": False} if "use_cache" in inspect.signature(
            model.forward).parameters else {}

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, return_dict=True, **self.kwargs).logits


def build_model(arch: HFArch, seed: int = 0):
    """The model with its weights re-drawn around their initial values (tied weights stay tied)."""
    import transformers

    config = arch.make_config()
    config.use_cache = False  # the export's only output is the logits
    torch.manual_seed(seed)
    model = getattr(transformers, arch.model)(config)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * WEIGHT_STD)
    # Generation runs exactly max_new_tokens, as sl-run does without --stop-token.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model.eval()


def export(model, path: Path, *, training: bool) -> None:
    ids = torch.zeros((2, 5), dtype=torch.int64)
    model.train(training)
    kwargs = {}
    if training:
        kwargs["training"] = torch.onnx.TrainingMode.PRESERVE
    torch.onnx.export(model, (ids,), str(path), input_names=["input_ids"],
                      output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=False, **kwargs)
    model.eval()


def ops_of(report_path: Path) -> Dict[str, int]:
    with open(report_path) as f:
        return {name: entry["count"] for name, entry in json.load(f)["ops"].items()}


def assert_fused(arch: HFArch, ops: Dict[str, int], pipeline: str, exact: bool = False) -> None:
    leftover = {k: v for k, v in ops.items() if k in UNFUSED_KINDS}
    assert not leftover, f"{arch.name} {pipeline}: unfused kernels ran: {leftover}\nall: {ops}"
    for kind, count in arch.fused.items():
        if pipeline == "generation" and kind == "ATTENTION":
            kind = "DECODE_ATTENTION"  # prefill and decode both attend over the KV cache
        if exact:
            assert ops.get(kind, 0) == count, f"{arch.name} {pipeline}: {kind}: {ops}"
        else:
            assert ops.get(kind, 0) > 0, f"{arch.name} {pipeline}: no {kind} kernel: {ops}"


def check_inference(arch: HFArch, model, onnx_path: Path, tools, tmp: Path,
                    batch: int = 2, seq: int = 7) -> None:
    rng = np.random.default_rng(1)
    ids = rng.integers(0, arch.vocab, size=(batch, seq), dtype=np.int64)
    np.save(tmp / "ids.npy", ids)
    sched, report = tmp / "infer.slsched", tmp / "infer.json"
    check_ok(tools._run([tools.sl_opt, onnx_path, f"--sl-infer=batch={batch} seq={seq}", "-o",
                         sched]))
    check_ok(tools._run([tools.sl_run, sched, "--input", f"input_ids={tmp / 'ids.npy'}",
                         "--output", f"logits={tmp / 'logits.npy'}", "--report", report]))
    with torch.no_grad():
        want = LogitsOnly(model)(torch.from_numpy(ids)).numpy()
    got = np.load(tmp / "logits.npy")
    assert got.shape == want.shape, (got.shape, want.shape)
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert rel <= LOGITS_RTOL, f"{arch.name}: logits differ by {rel:.3g} of the largest logit"
    assert_fused(arch, ops_of(report), "inference", exact=True)


def torch_gradients(model, tokens: np.ndarray):
    """Autograd's gradients of the first step's loss (the batch sl-run's step 1 reads)."""
    n = TRAIN_BATCH * TRAIN_SEQ
    window = torch.from_numpy(tokens[:n + 1].astype(np.int64))
    inputs, labels = window[:-1].reshape(TRAIN_BATCH, -1), window[1:].reshape(TRAIN_BATCH, -1)
    model.zero_grad()
    logits = LogitsOnly(model)(inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             labels.reshape(-1))
    loss.backward()
    grads = {name: p.grad.detach().numpy().copy() for name, p in model.named_parameters()}
    model.zero_grad()
    return grads


def check_training(arch: HFArch, onnx_path: Path, tools, tmp: Path, seed: int = 0) -> None:
    """Three AdamW steps with 2 sub-batches against torch.optim.AdamW on the same batches, and
    step 1's gradients (from the checkpoint's first moment) against autograd."""
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, arch.vocab, size=TRAIN_BATCH * TRAIN_SEQ * TRAIN_STEPS + 7,
                          dtype=np.uint16)
    data = tmp / "tokens.bin"
    tokens.astype("<u2").tofile(data)
    sched = tmp / "train.slsched"
    check_ok(tools._run([tools.sl_opt, onnx_path,
                         f"--sl-train=batch={TRAIN_BATCH} seq={TRAIN_SEQ} "
                         f"num-sub-batches={SUB_BATCHES}", "-o", sched]))

    def train(steps, tag):
        report, ckpt = tmp / f"train{tag}.json", tmp / f"train{tag}.safetensors"
        check_ok(tools._run([tools.sl_run, sched, "--data", data, "--steps", steps, "--lr", LR,
                             "--weight-decay", WD, "--report", report, "--save", ckpt]))
        with open(report) as f:
            rep = json.load(f)
        assert rep["plan"]["num_sub_batches"] == SUB_BATCHES, rep["plan"]
        return rep, read_safetensors(ckpt)

    # Step 1's gradients: the first moment after one step is (1 - beta1) * gradient.
    one, state = train(1, "1")
    model = build_model(arch, seed)
    want_grads = torch_gradients(model, tokens)
    trained = [n for n in state if not n.endswith((".adam_m", ".adam_v"))]
    assert set(trained) == set(want_grads), (sorted(trained), sorted(want_grads))
    # Zero gradients are rounding noise on both sides: bounded against the step's largest one
    # (a parameter can be all noise, as OPT's key bias is).
    largest = max(float(np.abs(g).max()) for g in want_grads.values())
    for name, want in want_grads.items():
        got = (state[name + ".adam_m"] / np.float32(1 - BETA1)).reshape(-1)
        want = want.reshape(-1)
        scale = float(np.abs(want).max())
        if name in arch.zero_grad_slices:
            begin, end = arch.zero_grad_slices[name]
            assert float(np.abs(got[begin:end]).max()) < 1e-4 * largest, name
            got = np.concatenate([got[:begin], got[end:]])
            want = np.concatenate([want[:begin], want[end:]])
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale,
                                   err_msg=f"{arch.name}: gradient of {name}")

    rep, _ = train(TRAIN_STEPS, "3")
    losses = rep["train"]["losses"]
    want_losses = torch_training(LogitsOnly(build_model(arch, seed)), tokens, arch.vocab,
                                 batch=TRAIN_BATCH, seq=TRAIN_SEQ, steps=TRAIN_STEPS, lr=LR,
                                 wd=WD)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4, err_msg=f"{arch.name}: losses")
    assert_fused(arch, {k: e["count"] for k, e in rep["ops"].items()}, "training")


def hf_greedy(model, prompt: np.ndarray, new_tokens: int) -> List[int]:
    ids = torch.from_numpy(prompt.astype(np.int64))[None]
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=new_tokens,
                             do_sample=False, num_beams=1, use_cache=True)
    return [int(t) for t in out[0, ids.shape[1]:]]


def check_generation(arch: HFArch, model, onnx_path: Path, tools, tmp: Path) -> None:
    rng = np.random.default_rng(11)
    prompts = [rng.integers(0, arch.vocab, size=n) for n in GEN_LENGTHS]
    want = [hf_greedy(model, p, GEN_NEW) for p in prompts]
    write_prompts(tmp / "prompts.jsonl", prompts)
    sched, out, report = tmp / "gen.slsched", tmp / "gen.jsonl", tmp / "gen.json"
    check_ok(tools._run([tools.sl_opt, onnx_path,
                         f"--sl-generate=batch={len(prompts)} num-sub-batches=2 "
                         f"max-prompt-len={max(GEN_LENGTHS)} max-new-tokens={GEN_NEW}", "-o",
                         sched]))
    proc = tools._run([tools.sl_run, sched, "--prompts", tmp / "prompts.jsonl", "--output", out,
                       "--temperature", 0, "--report", report])
    check_ok(proc)
    got = read_outputs(out)
    assert len(got) == len(prompts), describe(proc)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g["tokens"] == w, (f"{arch.name}: prompt {i} (length {len(prompts[i])}): "
                                  f"{g['tokens']} != HF {w}")
    ops = ops_of(report)
    assert_fused(arch, ops, "generation")


def check_all(arch: HFArch, tools, tmp: Path, seed: int = 0) -> None:
    model = build_model(arch, seed)
    infer_onnx, train_onnx = tmp / "model.onnx", tmp / "train.onnx"
    export(model, infer_onnx, training=False)
    export(model, train_onnx, training=True)
    check_inference(arch, model, infer_onnx, tools, tmp)
    check_generation(arch, model, infer_onnx, tools, tmp)
    check_training(arch, train_onnx, tools, tmp, seed)
