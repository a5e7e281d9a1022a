#!/usr/bin/env bash
# The main job on an embedded default: install, build, make a tiny LLaMA in PyTorch, export it to
# ONNX, compile it with sl-opt, run its forward pass with sl-run on the CPU backend and compare
# the logits with PyTorch's; then train a byte-level LLaMA on the small text in data/ for 300
# steps and show the loss fall; then generate text from the trained model.
# Everything it writes goes to out/quickstart/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SL_BUILD_DIR:-$root/build}"
out="$root/out/quickstart"
python=/usr/bin/python3
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
mkdir -p "$out"

echo "== 1. A tiny LLaMA (2 layers, hidden 64, 4 heads, 2 KV heads) built in PyTorch, exported to ONNX"
"$python" -m speedloader.export --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 \
  --ffn 128 --vocab 256 --max-positions 128 --seed 0 --batch 2 --seq 16 \
  --out "$out/llama.onnx" --save-reference "$out/reference"

echo "== 2. sl-opt: ONNX -> forward schedule for batch 2, sequence 16 (shapes bound, blocks fused)"
"$build/bin/sl-opt" "$out/llama.onnx" --sl-infer="batch=2 seq=16" -o "$out/llama.slsched"

echo "== 3. sl-run: the forward pass on the CPU backend"
"$build/bin/sl-run" "$out/llama.slsched" --input "input_ids=$out/reference/input_ids.npy" \
  --output "logits=$out/logits.npy" --report "$out/report.json"

echo "== 4. Compare the logits with PyTorch's"
"$python" - "$out" <<'PY'
import sys
import numpy as np
out = sys.argv[1]
got, want = np.load(f"{out}/logits.npy"), np.load(f"{out}/reference/logits.npy")
err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
print(f"logits {got.shape}; next-token argmax of sequence 0: {got[0].argmax(-1).tolist()}")
print(f"max |sl-run - PyTorch| / max |PyTorch| = {err:.3g}")
sys.exit(0 if np.allclose(got, want, rtol=1e-4, atol=1e-5) else "MISMATCH with PyTorch")
PY

echo "== 5. Train a byte-level LLaMA on data/tiny.txt: sl-opt --sl-train, then 300 AdamW steps"
"$python" -m speedloader.data --text "$root/data/tiny.txt" --out "$out/tiny.tokens"
"$python" -m speedloader.export --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 \
  --ffn 128 --vocab 256 --max-positions 64 --seed 0 --no-constant-folding --batch 4 --seq 64 \
  --out "$out/byte_llama.onnx"
"$build/bin/sl-opt" "$out/byte_llama.onnx" --sl-train="batch=4 seq=64 num-sub-batches=2" -o "$out/train.slsched"
"$build/bin/sl-run" "$out/train.slsched" --data "$out/tiny.tokens" --steps 300 --lr 3e-3 \
  --warmup-steps 20 --decay-steps 280 --min-lr 3e-4 --save "$out/byte_llama.safetensors" \
  --export-onnx "$out/byte_llama_trained.onnx" --report "$out/train_report.json" \
  | awk 'NR == 1 || NR % 25 == 0'

echo "== 6. Generate from the trained model: sl-opt --sl-generate (4 prompts as 2 sub-batches, host KV cache), sl-run --prompts"
"$build/bin/sl-opt" "$out/byte_llama_trained.onnx" \
  --sl-generate="batch=4 num-sub-batches=2 max-prompt-len=24 max-new-tokens=40" -o "$out/generate.slsched"
printf '%s\n' '{"text": "The keeper "}' '{"text": "One came from the "}' '{"text": "a ship came, "}' \
  '{"text": "The "}' > "$out/prompts.jsonl"
"$build/bin/sl-run" "$out/generate.slsched" --prompts "$out/prompts.jsonl" --tokenizer bytes \
  --output "$out/generated.jsonl" --report "$out/generate_report.json"
"$python" - "$out" <<'PY'
import json
import sys
out = sys.argv[1]
prompts = [json.loads(line)["text"] for line in open(f"{out}/prompts.jsonl")]
for prompt, line in zip(prompts, open(f"{out}/generated.jsonl")):
    print(f"{prompt!r} -> {json.loads(line)['text']!r}")
PY
echo "Models, schedules, logits, the trained checkpoint, generated text and the reports are in $out"
