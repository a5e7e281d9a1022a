#!/usr/bin/env bash
# The main job on an embedded default: install, build, make a small MLP in PyTorch, export it to
# ONNX, compile it with sl-opt, run it with sl-run on the CPU backend, and compare with PyTorch.
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

echo "== 1. PyTorch MLP (32 -> 64 -> 64 -> 16, SiLU) exported to ONNX, with a reference run"
"$python" -m speedloader.export --arch mlp --in-features 32 --hidden 64,64 --out-features 16 \
  --activation silu --seed 0 --batch 4 --out "$out/mlp.onnx" --save-reference "$out/reference"

echo "== 2. sl-opt: ONNX -> inference schedule for batch 4"
"$build/bin/sl-opt" "$out/mlp.onnx" --sl-infer="batch=4" -o "$out/mlp.slsched"

echo "== 3. sl-run: execute the schedule on the CPU backend"
"$build/bin/sl-run" "$out/mlp.slsched" --input "$out/reference/x.npy" --output "$out/y.npy" \
  --report "$out/report.json"

echo "== 4. Compare with PyTorch"
"$python" - "$out" <<'PY'
import sys
import numpy as np
out = sys.argv[1]
got, want = np.load(f"{out}/y.npy"), np.load(f"{out}/reference/y.npy")
err = float(np.max(np.abs(got - want)))
print(f"sl-run output {got.shape}: first row {np.array2string(got[0, :6], precision=4)} ...")
print(f"max |sl-run - PyTorch| = {err:.3g}")
sys.exit(0 if np.allclose(got, want, rtol=1e-5, atol=1e-5) else "MISMATCH with PyTorch")
PY
echo "Schedule, outputs and report.json are in $out"
