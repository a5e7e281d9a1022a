"""Exports a two-block language model whose attention sees only the last WINDOW keys (GPT-Neo's
local attention): `masked_fill` over a registered banded buffer, sliced to the sequence length.

Up to WINDOW positions the band is the causal triangle; beyond it, it is not.

usage: sliding_window_model.py OUT.onnx
"""

import math
import sys

import torch
from torch import nn

VOCAB, HIDDEN, HEADS, CONTEXT, WINDOW = 32, 16, 2, 16, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        causal = torch.tril(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool))
        band = causal & ~torch.tril(causal, -WINDOW)
        self.register_buffer("band", band.view(1, 1, CONTEXT, CONTEXT))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln(x)).split(HIDDEN, dim=2)
        q, k, v = (y.view(b, t, HEADS, c // HEADS).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(~self.band[:, :, :t, :t], float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        return x + self.proj(y)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids):
        x = self.wte(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.onnx.export(Model().eval(), (torch.zeros((1, 3), dtype=torch.int64),), sys.argv[1],
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=False)
