"""A hand-written nanoGPT-style model: causal attention as masked_fill over a registered buffer.

`att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))` selects -inf where the causal
buffer is zero: the condition is the inverted causal mask and the fill is where's first operand.
sl-fuse-transformer must still see causal attention in it, so the model infers, trains and
generates like PyTorch, fused (generation refuses an unfused attention, and no remark about one
may appear).
"""

import json
import math

import numpy as np
import torch
from torch import nn

from sl_helpers import check_ok

VOCAB, HIDDEN, HEADS, LAYERS, CONTEXT = 64, 32, 4, 2, 16
BATCH, SEQ, LR, WD, STEPS = 2, 8, 1e-3, 0.01, 3


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("bias", torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(HIDDEN, dim=2)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(torch.nn.functional.gelu(self.fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(CONTEXT, HIDDEN)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def make_model(path):
    torch.manual_seed(0)
    model = NanoGPT().eval()
    with torch.no_grad():
        # Distinct norm weights: equal initializers would be merged by the exporter.
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * 0.08 + (1.0 if name.endswith("ln_1.weight") or
                                                 name.endswith("ln_2.weight") or
                                                 name.endswith("ln_f.weight") else 0.0))
    ids = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    torch.onnx.export(model, (ids,), str(path), input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=False)
    return model


def compile_fused(sl_tools, onnx_path, options, out):
    proc = sl_tools._run([sl_tools.sl_opt, onnx_path, options, "-o", out])
    check_ok(proc)
    assert "attention not fused" not in proc.stderr, proc.stderr


def test_masked_fill_attention_infers_trains_and_generates(sl_tools, tmp_path):
    onnx_path = tmp_path / "model.onnx"
    model = make_model(onnx_path)

    # Inference.
    compile_fused(sl_tools, onnx_path, f"--sl-infer=batch={BATCH} seq={SEQ}", tmp_path / "i.slsched")
    ids = np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int64)
    np.save(tmp_path / "ids.npy", ids)
    check_ok(sl_tools._run([sl_tools.sl_run, tmp_path / "i.slsched", "--input",
                            f"input_ids={tmp_path / 'ids.npy'}", "--output",
                            f"logits={tmp_path / 'logits.npy'}"]))
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).numpy()
    got = np.load(tmp_path / "logits.npy")
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()

    # Generation: greedy, prompts of different lengths in one batch of two sub-batches.
    prompts = [np.random.default_rng(2 + i).integers(0, VOCAB, size=n) for i, n in enumerate([3, 6, 1, 5])]
    with open(tmp_path / "prompts.jsonl", "w") as f:
        for p in prompts:
            f.write(json.dumps({"tokens": [int(t) for t in p]}) + "\n")
    compile_fused(sl_tools, onnx_path, "--sl-generate=batch=4 num-sub-batches=2 max-prompt-len=6 "
                  "max-new-tokens=8", tmp_path / "g.slsched")
    check_ok(sl_tools._run([sl_tools.sl_run, tmp_path / "g.slsched", "--prompts",
                            tmp_path / "prompts.jsonl", "--output", tmp_path / "out.jsonl",
                            "--temperature", 0]))
    with open(tmp_path / "out.jsonl") as f:
        got = [json.loads(line)["tokens"] for line in f if line.strip()]
    for prompt, tokens in zip(prompts, got):
        sequence = list(prompt)
        with torch.no_grad():
            for _ in range(8):
                sequence.append(int(model(torch.tensor([sequence]))[0, -1].argmax()))
        assert tokens == sequence[len(prompt):], (list(prompt), tokens)

    # Training: three AdamW steps over two sub-batches.
    compile_fused(sl_tools, onnx_path, f"--sl-train=batch={BATCH} seq={SEQ} num-sub-batches=2",
                  tmp_path / "t.slsched")
    tokens = np.random.default_rng(5).integers(0, VOCAB, size=BATCH * SEQ * STEPS + 1,
                                               dtype=np.uint16)
    tokens.astype("<u2").tofile(tmp_path / "tokens.bin")
    check_ok(sl_tools._run([sl_tools.sl_run, tmp_path / "t.slsched", "--data",
                            tmp_path / "tokens.bin", "--steps", STEPS, "--lr", LR,
                            "--weight-decay", WD, "--report", tmp_path / "report.json"]))
    with open(tmp_path / "report.json") as f:
        losses = json.load(f)["train"]["losses"]
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    want = []
    for step in range(STEPS):
        window = torch.from_numpy(tokens[step * BATCH * SEQ:(step + 1) * BATCH * SEQ + 1]
                                  .astype(np.int64))
        x, y = window[:-1].view(BATCH, SEQ), window[1:].view(BATCH, SEQ)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-4)
