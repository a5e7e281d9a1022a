"""A hand-written LLaMA whose rotary tables are a cached [positions, head_dim] table sliced by the
sequence length (`cos_cached[:seq]`, no position_ids gather), as much pre-4.38 and nanoGPT-style
code writes them.

The 2-D slice broadcasts against the [batch, heads, seq, head_dim] queries from the right, with no
batch dimension of its own: --sl-generate must still give each sequence the rows of its own
positions at decode. Checked: --sl-infer logits equal PyTorch's, and greedy generation for prompts
of different lengths equals PyTorch's greedy decoding of each prompt.
"""

import math

import numpy as np
import torch
from torch import nn

from hf_harness import assert_fused, HFArch, ops_of
from sl_helpers import check_ok, describe
from test_generation import read_outputs, torch_greedy, write_prompts

VOCAB, HIDDEN, HEADS, LAYERS, FFN, MAX_POSITIONS = 64, 32, 4, 2, 48, 32
FUSED = {"RMS_NORM": 2 * LAYERS + 1, "ROTARY": 2 * LAYERS, "ATTENTION": LAYERS,
         "SWIGLU": LAYERS}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = HIDDEN // HEADS
        self.attn_norm = RMSNorm(HIDDEN)
        self.q = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.v = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.o = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.mlp_norm = RMSNorm(HIDDEN)
        self.gate = nn.Linear(HIDDEN, FFN, bias=False)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        h = self.attn_norm(x)
        heads = lambda t: t.view(b, s, HEADS, self.head_dim).transpose(1, 2)  # noqa: E731
        q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim) + mask
        att = torch.softmax(scores, dim=-1) @ v
        x = x + self.o(att.transpose(1, 2).reshape(b, s, HIDDEN))
        h = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class SlicedRotaryLlama(nn.Module):
    def __init__(self):
        super().__init__()
        d = HIDDEN // HEADS
        inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(MAX_POSITIONS).float(), inv_freq)
        table = torch.cat((angles, angles), dim=-1)
        # Non-persistent, as HF's: the exporter writes them as constants, not parameters.
        self.register_buffer("cos_cached", table.cos(), persistent=False)
        self.register_buffer("sin_cached", table.sin(), persistent=False)
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        cos, sin = self.cos_cached[:s], self.sin_cached[:s]
        mask = torch.full((s, s), float("-inf")).triu(1)
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        return self.head(self.norm(x))


def make_model():
    torch.manual_seed(0)
    model = SlicedRotaryLlama()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape) * 0.08)
    return model.eval()


def test_sliced_rotary_table_infers_and_generates(sl_tools, tmp_path):
    model = make_model()
    onnx_path = tmp_path / "model.onnx"
    torch.onnx.export(model, (torch.zeros((2, 5), dtype=torch.int64),), str(onnx_path),
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=False)
    arch = HFArch("sliced-rotary-llama", "", "", {}, FUSED)

    ids = np.random.default_rng(1).integers(0, VOCAB, size=(2, 7), dtype=np.int64)
    np.save(tmp_path / "ids.npy", ids)
    check_ok(sl_tools._run([sl_tools.sl_opt, onnx_path, "--sl-infer=batch=2 seq=7", "-o",
                            tmp_path / "infer.slsched"]))
    check_ok(sl_tools._run([sl_tools.sl_run, tmp_path / "infer.slsched", "--input",
                            f"input_ids={tmp_path / 'ids.npy'}", "--output",
                            f"logits={tmp_path / 'logits.npy'}", "--report",
                            tmp_path / "infer.json"]))
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).numpy()
    got = np.load(tmp_path / "logits.npy")
    assert float(np.abs(got - want).max() / np.abs(want).max()) <= 1e-4
    assert_fused(arch, ops_of(tmp_path / "infer.json"), "inference", exact=True)

    lengths, new = [5, 1, 8, 3], 8
    rng = np.random.default_rng(11)
    prompts = [rng.integers(0, VOCAB, size=n) for n in lengths]
    write_prompts(tmp_path / "prompts.jsonl", prompts)
    sched = tmp_path / "gen.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, onnx_path,
                            f"--sl-generate=batch=4 num-sub-batches=2 max-prompt-len=8 "
                            f"max-new-tokens={new}", "-o", sched]))
    out, report = tmp_path / "gen.jsonl", tmp_path / "gen.json"
    proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp_path / "prompts.jsonl",
                          "--output", out, "--temperature", 0, "--report", report])
    check_ok(proc)
    got_tokens = [o["tokens"] for o in read_outputs(out)]
    assert got_tokens == [torch_greedy(model, p, new) for p in prompts], describe(proc)
    assert_fused(arch, ops_of(report), "generation")
