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
# The probe's shape, written here once: probe.json (below) is what torch_roofline.py and
# perf_summary.py read.
preset=llama2-7b layers=2 batch=4 seq=2048 subbatches=2
PYTHONPATH="$root/python" /usr/bin/python3 -c "import json; from speedloader.models import get_preset; \
arch, c = get_preset('$preset'); json.dump({'preset': '$preset', 'layers': $layers, 'hidden': c.hidden, \
'heads': c.heads, 'ffn': c.ffn, 'vocab': c.vocab, 'batch': $batch, 'seq': $seq, \
'num_sub_batches': $subbatches}, open('$out/probe.json', 'w'), indent=1)"
vocab="$(/usr/bin/python3 -c "import json; print(json.load(open('$out/probe.json'))['vocab'])")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
PYTHONPATH="$root/python" /usr/bin/python3 -m speedloader.export --preset "$preset" --layers "$layers" \
  --weightless --out "$work/model.onnx" > /dev/null
"$slopt" "$work/model.onnx" -o "$out/train.slsched" \
  --sl-train="batch=$batch seq=$seq num-sub-batches=$subbatches live-blocks=1 precision=bf16"
"$slopt" "$work/model.onnx" -o "$out/infer.slsched" --sl-infer="batch=$batch seq=$seq precision=bf16"
# Variants of the train probe for the schedule-mode comparison (run-gpu-perf.sh): canonical mode
# (each sub-batch through the whole model in turn) and 4 sub-batches of 1.
"$slopt" "$work/model.onnx" -o "$out/train-canonical.slsched" \
  --sl-train="batch=$batch seq=$seq num-sub-batches=$subbatches live-blocks=1 precision=bf16 mode=canonical"
"$slopt" "$work/model.onnx" -o "$out/train-n4.slsched" \
  --sl-train="batch=$batch seq=$seq num-sub-batches=$((2 * subbatches)) live-blocks=1 precision=bf16"
# Generation: $batch prompts of $seq tokens, 32 new tokens each, bf16, weights streamed from the host.
"$slopt" "$work/model.onnx" -o "$out/generate.slsched" \
  --sl-generate="batch=$batch max-prompt-len=$seq max-new-tokens=32 precision=bf16"
# The whole of llama2-7b (32 layers), the same 4 x 2048 tokens per step, parameters, gradients and
# AdamW state in host memory (about 113 GiB: run-7b-step.sh), in both schedule modes. Named
# step7b-* so that run-gpu-perf.sh's train-* variants do not include them.
PYTHONPATH="$root/python" /usr/bin/python3 -m speedloader.export --preset "$preset" \
  --weightless --out "$work/model7b.onnx" > /dev/null
for mode in speedloader canonical; do
  "$slopt" "$work/model7b.onnx" -o "$out/step7b-$mode.slsched" \
    --sl-train="batch=$batch seq=$seq num-sub-batches=$subbatches live-blocks=1 precision=bf16 mode=$mode"
done
/usr/bin/python3 -c "import json, numpy as np; rng = np.random.default_rng(1); \
open('$out/prompts.jsonl', 'w').writelines(json.dumps({'tokens': rng.integers(0, $vocab, $seq).tolist()}) + '\\n' for _ in range($batch))"
/usr/bin/python3 -c "import numpy as np; rng = np.random.default_rng(0); \
rng.integers(0, $vocab, size=$batch * $seq * 8 + 1).astype('<u2').tofile('$out/tokens.bin'); \
np.save('$out/input_ids.npy', rng.integers(0, $vocab, size=($batch, $seq)))"

echo "probes in $out: $(ls "$out" | tr '\n' ' ')"
