"""Parameters read by several stages, and initializers that are constants, against PyTorch.

* A fresh LLaMA (every norm weight all ones) exported in eval mode: torch.onnx.export merges the
  equal norm weights into one initializer, read by every layer and by the final norm. sl-opt
  warns that this looks like the exporter's merging, and trains the model as exported: equal to
  PyTorch training those norms tied, in both schedule modes and sharded over two ranks. Exported in train mode with TrainingMode.PRESERVE nothing is
  merged, there is no warning, and training equals PyTorch's on the untied model.
* A GPT-2 whose head is functional, ``ln_f(h) @ wte.weight.t()`` with no lm_head module: the
  embedding is read by the first stage and the last. It trains equal to PyTorch and generates
  PyTorch's greedy tokens.
* A model whose causal mask is a float buffer read only through Equal: a constant, not a
  parameter. No optimizer state, not in the checkpoint, still in --export-onnx's model as it was.

Training: 3 AdamW steps, batch 4 as 2 sub-batches, losses and final weights against torch.optim.AdamW
on the same token windows.
"""

import json
import math

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
import torch
from torch import nn

from sl_helpers import check_ok, describe
from speedloader.models import build_model
from speedloader.models import transformer as tf
from speedloader.models.gpt2 import GPT2Config, GPT2Model
from speedloader.models.llama import LlamaConfig
from test_distributed import MPIRUN, _mpi_plugin, mpirun
from test_e2e_training import read_safetensors
from test_generation import read_outputs, torch_greedy, write_prompts

BATCH, SEQ, STEPS, LR, WD, VOCAB = 4, 8, 3, 1e-3, 0.01, 64
WARNING = "looks like torch.onnx.export merging initializers of equal values"


def export(model, path, *, train_mode):
    """As a user exports for sl-opt: names kept (no constant folding); for training, the model in
    train mode with TrainingMode.PRESERVE, which merges only tensors the model really shares."""
    axes = {0: "batch", 1: "seq"}
    model.train(train_mode)
    kwargs = {"training": torch.onnx.TrainingMode.PRESERVE} if train_mode else {}
    torch.onnx.export(model, (torch.zeros(2, SEQ, dtype=torch.int64),), str(path),
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": axes, "logits": axes}, opset_version=14,
                      do_constant_folding=False, **kwargs)
    model.eval()


def token_file(tmp_path):
    tokens = np.random.default_rng(7).integers(0, VOCAB, size=BATCH * SEQ * STEPS + 1,
                                               dtype=np.uint16)
    path = tmp_path / "tokens.bin"
    tokens.astype("<u2").tofile(path)
    return tokens, path


def torch_losses(model, tokens):
    """PyTorch's AdamW on sl-run's windows (step t reads tokens [t*B*S, (t+1)*B*S + 1)): the
    losses, and every parameter's step-1 gradient."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    losses, first_grads = [], None
    for t in range(STEPS):
        window = torch.from_numpy(tokens[t * BATCH * SEQ:(t + 1) * BATCH * SEQ + 1].astype(np.int64))
        opt.zero_grad()
        logits = model(window[:-1].reshape(BATCH, SEQ))
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), window[1:].reshape(-1))
        loss.backward()
        if first_grads is None:
            first_grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        opt.step()
        losses.append(loss.item())
    return losses, first_grads


def train(sl_tools, tmp_path, onnx_path, tokens_path, options="", tag="train"):
    """Compiles for training with 2 sub-batches and runs 3 steps; returns sl-opt's stderr, the
    report and the checkpoint."""
    sched = tmp_path / f"{tag}.slsched"
    compiled = sl_tools._run([sl_tools.sl_opt, onnx_path,
                              f"--sl-train=batch={BATCH} seq={SEQ} num-sub-batches=2{options}",
                              "-o", sched])
    check_ok(compiled)
    report, ckpt = tmp_path / f"{tag}.json", tmp_path / f"{tag}.safetensors"
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--data", tokens_path, "--steps", STEPS,
                            "--lr", LR, "--weight-decay", WD, "--report", report, "--save", ckpt,
                            "--export-onnx", tmp_path / f"{tag}-trained.onnx"]))
    with open(report) as f:
        return compiled.stderr, json.load(f)["train"], read_safetensors(ckpt)


def weights_of(checkpoint):
    """The checkpoint's weights, without AdamW's moments (`<name>.adam_m`, `<name>.adam_v`)."""
    return {k: v for k, v in checkpoint.items() if not k.endswith((".adam_m", ".adam_v"))}


def assert_weights_equal(checkpoint, model, first_grads):
    """Every PyTorch parameter (a tied one under the name it was exported with) equals the
    checkpoint's, and the checkpoint holds nothing else.

    Elements whose gradient is zero but for rounding (GPT-2's key bias: softmax ignores a shift of
    every score alike; a few others by chance) are only bounded: AdamW turns noise of ~1e-9 into
    steps of about lr in random directions, on both sides."""
    checkpoint = weights_of(checkpoint)
    assert len(checkpoint) == len(list(model.parameters())), sorted(checkpoint)
    for name, param in model.named_parameters():
        got, want, grad = checkpoint[name], param.detach().numpy(), np.abs(first_grads[name])
        noise = grad <= 1e-5 * grad.max()
        np.testing.assert_array_less(np.abs(got - want)[noise], 2 * LR * STEPS + 1e-6)
        np.testing.assert_allclose(got[~noise], want[~noise], rtol=1e-4, atol=1e-6, err_msg=name)


# --- (a) a fresh LLaMA, eval-mode and train-mode exports ------------------------------------------

def fresh_llama():
    model = build_model("llama", LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48,
                                             vocab=VOCAB, max_positions=16), seed=1)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            nn.init.ones_(p)  # as a freshly initialised HF model has them
    return model


def tie_like_the_exporter(model):
    """The model as an eval-mode export trains it: torch.onnx.export keeps one initializer per set
    of equal parameters (the first, in named_parameters order), so PyTorch trains those tied."""
    first = {}
    for name, p in list(model.named_parameters()):
        key = (tuple(p.shape), p.detach().numpy().tobytes())
        if key not in first:
            first[key] = p
            continue
        owner, attr = name.rsplit(".", 1)
        module = model.get_submodule(owner)
        del module._parameters[attr]
        setattr(module, attr, first[key])
    return model


def initializer_names(path):
    return {i.name for i in onnx.load(str(path)).graph.initializer}


@pytest.mark.parametrize("mode", ["speedloader", "canonical"])
def test_eval_export_merges_norms_warns_and_trains_them_tied(sl_tools, tmp_path, mode):
    export(fresh_llama(), tmp_path / "model.onnx", train_mode=False)
    model = tie_like_the_exporter(fresh_llama())
    merged = "model.layers.0.input_layernorm.weight"
    assert initializer_names(tmp_path / "model.onnx") == {n for n, _ in model.named_parameters()}
    assert model.model.norm.weight is model.get_parameter(merged)

    tokens, data = token_file(tmp_path)
    stderr, report, checkpoint = train(sl_tools, tmp_path, tmp_path / "model.onnx", data,
                                       f" mode={mode}")
    assert "warning" in stderr and WARNING in stderr and merged in stderr, stderr
    assert "TrainingMode.PRESERVE" in stderr, stderr
    assert stderr.count(WARNING) == 1, stderr

    losses, grads = torch_losses(model, tokens)
    np.testing.assert_allclose(report["losses"], losses, rtol=1e-4)
    assert_weights_equal(checkpoint, model, grads)


@pytest.mark.skipif(MPIRUN is None or _mpi_plugin() is None,
                    reason="needs mpirun and sl-run's MPI plugin (lib/libslrt_mpi.so)")
def test_merged_norms_train_sharded_over_two_ranks(sl_tools, tmp_path):
    """world=2: the merged weight lives in one shard that every stage reading it all-gathers, and
    the reduce-scatter sums its gradients from every stage and both ranks' halves of the batch."""
    export(fresh_llama(), tmp_path / "model.onnx", train_mode=False)
    tokens, data = token_file(tmp_path)
    sched, index = tmp_path / "w2.slsched", tmp_path / "w2.ckpt"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                            f"--sl-train=batch={BATCH // 2} seq={SEQ} num-sub-batches=2 world=2",
                            "-o", sched]))
    check_ok(sl_tools._run(mpirun(2) + [sl_tools.sl_run, sched, "--data", data, "--steps", STEPS,
                                        "--lr", LR, "--weight-decay", WD, "--report",
                                        tmp_path / "w2.json", "--save", index]))
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--consolidate", index, "--save",
                            tmp_path / "whole.safetensors"]))
    with open(tmp_path / "w2.json") as f:
        report = json.load(f)["train"]
    model = tie_like_the_exporter(fresh_llama())
    losses, grads = torch_losses(model, tokens)
    np.testing.assert_allclose(report["losses"], losses, rtol=1e-4)
    assert_weights_equal(read_safetensors(tmp_path / "whole.safetensors"), model, grads)


def test_train_mode_export_keeps_norms_apart(sl_tools, tmp_path):
    export(fresh_llama(), tmp_path / "model.onnx", train_mode=True)
    model = fresh_llama()
    assert initializer_names(tmp_path / "model.onnx") == {n for n, _ in model.named_parameters()}

    tokens, data = token_file(tmp_path)
    stderr, report, checkpoint = train(sl_tools, tmp_path, tmp_path / "model.onnx", data)
    assert "warning" not in stderr, stderr
    losses, grads = torch_losses(model, tokens)
    np.testing.assert_allclose(report["losses"], losses, rtol=1e-4)
    assert_weights_equal(checkpoint, model, grads)
    # Trained apart: the norms differ now, as PyTorch's do.
    assert not np.array_equal(checkpoint["model.layers.0.input_layernorm.weight"],
                              checkpoint["model.norm.weight"])


# --- (b) a functional tied head ------------------------------------------------------------------

class FunctionalHeadGPT2(nn.Module):
    """GPT-2 with the head written as a product with the embedding (no lm_head module), its
    LayerNorms as nn.LayerNorm initialises them (weights ones, biases zeros)."""

    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        tf.init_parameters(self)
        for module in self.modules():
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()

    def forward(self, input_ids):
        return torch.matmul(self.transformer(input_ids), self.transformer.wte.weight.t())


def functional_head_gpt2():
    torch.manual_seed(4)
    return FunctionalHeadGPT2(GPT2Config(layers=2, hidden=32, heads=4, vocab=VOCAB,
                                         max_positions=16, activation="gelu"))


def test_functional_tied_head_trains_and_generates(sl_tools, tmp_path):
    """Exported in eval mode, as the issue's user did: the LayerNorms of every block and ln_f are
    merged (warned), and wte is read by the first stage and by the last."""
    export(functional_head_gpt2(), tmp_path / "model.onnx", train_mode=False)
    model = tie_like_the_exporter(functional_head_gpt2())
    assert initializer_names(tmp_path / "model.onnx") >= {n for n, _ in model.named_parameters()}
    tokens, data = token_file(tmp_path)
    stderr, report, checkpoint = train(sl_tools, tmp_path, tmp_path / "model.onnx", data)
    assert WARNING in stderr and "transformer.h.0.ln_1.weight" in stderr, stderr
    assert "transformer.wte.weight" not in stderr, stderr
    losses, grads = torch_losses(model, tokens)
    np.testing.assert_allclose(report["losses"], losses, rtol=1e-4)
    assert_weights_equal(checkpoint, model, grads)

    # Generation from the exported (untrained) model: PyTorch's greedy tokens.
    model = functional_head_gpt2().eval()
    prompts = [np.random.default_rng(2).integers(0, VOCAB, size=n) for n in (5, 2, 7, 3)]
    write_prompts(tmp_path / "prompts.jsonl", prompts)
    sched = tmp_path / "gen.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                            "--sl-generate=batch=4 num-sub-batches=2 max-prompt-len=7 "
                            "max-new-tokens=5", "-o", sched]))
    proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp_path / "prompts.jsonl",
                          "--output", tmp_path / "out.jsonl", "--temperature", 0])
    check_ok(proc)
    got = [o["tokens"] for o in read_outputs(tmp_path / "out.jsonl")]
    assert got == [torch_greedy(model, p, 5) for p in prompts], describe(proc)


# --- (c) a float mask buffer read only through Equal ---------------------------------------------

class MaskedAttentionBlock(nn.Module):
    def __init__(self, hidden, heads, max_positions):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        # nanoGPT's causal buffer, in float: a persistent buffer, so an initializer.
        self.register_buffer("mask", torch.tril(torch.ones(max_positions, max_positions))
                             .view(1, 1, max_positions, max_positions))

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        scores = scores.masked_fill(self.mask[:, :, :s, :s] == 0, torch.finfo(scores.dtype).min)
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        return x + self.out(y)


class MaskBufferLM(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.embed = nn.Embedding(VOCAB, 32)
        self.layers = nn.ModuleList(MaskedAttentionBlock(32, 4, 16) for _ in range(2))
        self.head = nn.Linear(32, VOCAB, bias=False)
        tf.init_parameters(self)

    def forward(self, input_ids):
        h = self.embed(input_ids)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def test_mask_buffer_read_through_equal_is_a_constant(sl_tools, tmp_path):
    export(MaskBufferLM(), tmp_path / "model.onnx", train_mode=True)
    initializers = {i.name: onnx.numpy_helper.to_array(i)
                    for i in onnx.load(str(tmp_path / "model.onnx")).graph.initializer}
    masks = sorted(n for n in initializers if n.endswith(".mask"))
    assert masks, sorted(initializers)

    tokens, data = token_file(tmp_path)
    _, report, checkpoint = train(sl_tools, tmp_path, tmp_path / "model.onnx", data)
    model = MaskBufferLM()
    losses, grads = torch_losses(model, tokens)
    np.testing.assert_allclose(report["losses"], losses, rtol=1e-4)
    assert_weights_equal(checkpoint, model, grads)  # the masks are no parameters
    assert not [k for k in checkpoint if ".mask" in k], sorted(checkpoint)
    # AdamW keeps an f32 master weight and two f32 moments for every trained element, and for
    # nothing else.
    trained = sum(p.numel() for p in model.parameters())
    assert report["optimizer_state_bytes"] == 3 * 4 * trained, report
    # The exported model keeps the masks as they were.
    exported = {i.name: onnx.numpy_helper.to_array(i)
                for i in onnx.load(str(tmp_path / "train-trained.onnx")).graph.initializer}
    for name in masks:
        np.testing.assert_array_equal(exported[name], initializers[name])
