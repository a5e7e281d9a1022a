"""Causal masks at long contexts, for every Hugging Face architecture of test_hf_architectures.

Exporters build the causal mask from constants (aranges compared with positions, a triangle of a
filled matrix, a slice of a registered tril buffer). sl-fuse-transformer judges it from the ops
that compute it, row by row (sl/Analysis/AttentionMasks.h), so attention fuses at any context
length without the S x T values; before, it evaluated them, and past 8192 positions (2^26
values) gave up and left attention unfused, with an S x S score matrix per head.

Each architecture is exported with room for 320 positions and compiled at 320 (a mask of 102400
values, past the fold limit, so it stays a computation in the IR):

- `sl-fuse-transformer{check-masks=true}` judges every mask both ways, row by row and on its
  evaluated values, and fails on any difference; every mask must be read row by row (none left
  to evaluation alone);
- `--sl-infer` at that length fuses every attention (no "attention not fused" remark).

And one end to end past what evaluation could judge: HF LLaMA at 9000 positions (a mask of 81M
values, past 2^26; its rotary table is too big to fold, so `cat(freqs, freqs)` is a kernel on
the device), run by sl-run against PyTorch's logits, every block fused.
"""

from __future__ import annotations

import dataclasses
import os
import re

import pytest

if os.environ.get("SL_REQUIRE_TRANSFORMERS") == "1":
    import transformers  # noqa: F401
else:
    pytest.importorskip("transformers")

from hf_harness import build_model, check_inference, export  # noqa: E402
from sl_helpers import check_ok  # noqa: E402
from test_hf_architectures import ARCHS  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")

SEQ = 320
# The configuration keys that bound the positions a model embeds, and GPT-Neo's local window.
POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len",
                 "window_size")


def long_context(arch):
    kwargs = {key: (512 if key in POSITION_KEYS else value) for key, value in arch.kwargs.items()}
    if arch.name == "gpt-neo":
        kwargs["window_size"] = 512  # its local layer is causal within the window only
    return dataclasses.replace(arch, name=arch.name + "-long", kwargs=kwargs)


@pytest.mark.parametrize("arch", ARCHS, ids=[a.name for a in ARCHS])
def test_mask_read_row_by_row_agrees_with_its_values(sl_tools, tmp_path, arch):
    onnx_path = tmp_path / "model.onnx"
    export(build_model(long_context(arch)), onnx_path, training=False)

    pipeline = (f"builtin.module(sl-bind-inputs{{inputs=past_key_values}},"
                f"sl-bind-shapes{{batch=2 seq={SEQ}}},canonicalize,"
                f"func.func(sl-fuse-transformer{{check-masks=true}}))")
    proc = sl_tools._run([sl_tools.sl_opt, onnx_path, f"--pass-pipeline={pipeline}",
                          "-o", tmp_path / "fused.mlir"])
    check_ok(proc)
    counts = re.search(r"check-masks: (\d+) terms read row by row and evaluated, alike; (\d+) "
                       r"read row by row only \(too big to evaluate\); (\d+) masks evaluated only",
                       proc.stderr)
    assert counts, proc.stderr
    both, rows_only, values_only = map(int, counts.groups())
    assert both >= 1 and rows_only == 0 and values_only == 0, proc.stderr

    proc = sl_tools.compile(onnx_path, tmp_path / "m.slsched", batch=1, seq=SEQ)
    check_ok(proc)
    assert "attention not fused" not in proc.stderr, proc.stderr


def test_hf_llama_at_9000_positions_runs_fused_as_pytorch(sl_tools, tmp_path):
    arch = next(a for a in ARCHS if a.name == "llama-gqa-untied")
    long = dataclasses.replace(arch, name="llama-9000",
                               kwargs=dict(arch.kwargs, max_position_embeddings=9000))
    model = build_model(long)
    export(model, tmp_path / "model.onnx", training=False)
    check_inference(long, model, tmp_path / "model.onnx", sl_tools, tmp_path, batch=1, seq=9000)
