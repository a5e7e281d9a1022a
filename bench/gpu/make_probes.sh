#!/usr/bin/env bash
# The GPU suite's performance probes, compiled here (the GPU machine has no sl-opt): 2 layers of
# llama2-7b (hidden 4096, 32 heads, ffn 11008, vocab 32000), weightless, bf16, batch 4 x 2048 in
# 2 sub-batches, as a SpeedLoader train schedule (live-blocks=1) and an inference schedule, and
# two variants of the train schedule (canonical mode; 4 sub-batches).
# sl-run runs them with --random-weights, so no weight file travels. Takes a few minutes of CPU.
#
#   bench/gpu/make_probes.sh [--sl-opt build/bin/sl-opt] [OUT (default build-bundle/probes)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
slopt="$root/build/bin/sl-opt"
if [ "${1:-}" = --sl-opt ]; then slopt="$2"; shift 2; fi
out="${1:-$root/build-bundle/probes}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
PYTHONPATH="$root/python" /usr/bin/python3 -m speedloader.export --preset llama2-7b --layers 2 \
  --weightless --out "$work/model.onnx" > /dev/null
"$slopt" "$work/model.onnx" -o "$out/train.slsched" \
  --sl-train="batch=4 seq=2048 num-sub-batches=2 live-blocks=1 precision=bf16"
"$slopt" "$work/model.onnx" -o "$out/infer.slsched" --sl-infer="batch=4 seq=2048 precision=bf16"
# Variants of the train probe for the schedule-mode comparison (run-gpu-perf.sh): canonical mode
# (each sub-batch through the whole model in turn) and 4 sub-batches of 1.
"$slopt" "$work/model.onnx" -o "$out/train-canonical.slsched" \
  --sl-train="batch=4 seq=2048 num-sub-batches=2 live-blocks=1 precision=bf16 mode=canonical"
"$slopt" "$work/model.onnx" -o "$out/train-n4.slsched" \
  --sl-train="batch=4 seq=2048 num-sub-batches=4 live-blocks=1 precision=bf16"
# Generation: 4 prompts of 2048 tokens, 32 new tokens each, bf16, weights streamed from the host.
"$slopt" "$work/model.onnx" -o "$out/generate.slsched" \
  --sl-generate="batch=4 max-prompt-len=2048 max-new-tokens=32 precision=bf16"
/usr/bin/python3 -c "import json, numpy as np; rng = np.random.default_rng(1); \
open('$out/prompts.jsonl', 'w').writelines(json.dumps({'tokens': rng.integers(0, 32000, 2048).tolist()}) + '\\n' for _ in range(4))"
/usr/bin/python3 -c "import numpy as np; rng = np.random.default_rng(0); \
rng.integers(0, 32000, size=4 * 2048 * 8 + 1).astype('<u2').tofile('$out/tokens.bin'); \
np.save('$out/input_ids.npy', rng.integers(0, 32000, size=(4, 2048)))"
echo "probes in $out: $(ls "$out" | tr '\n' ' ')"
