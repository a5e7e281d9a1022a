#!/usr/bin/env bash
# The GPU suite's performance part (issue 22), one device-tool call (about 5 minutes): PyTorch's
# roofline at the probe's shapes (torch_roofline.py), then the 7B-shaped probes of
# make_probes.sh on the CUDA backend with --random-weights, --report and --trace, then the table
# (perf_summary.py), with the machine profile `sl-run --calibrate` measures. From the repository root, carrying build-bundle (the runtime bundle and
# build-bundle/probes):
#
#   bash bench/gpu/run-gpu-perf.sh build-bundle/speedloader-runtime.tar.gz build-bundle/probes
#
# Writes to $OUT (at most 8 files): roofline.json, train-report.json, infer-report.json,
# train-trace.json.gz, infer-trace.json.gz, perf.log, perf-summary.txt. The whole stays within
# $PERF_SECONDS (default 300): each part gets a timeout from what is left.
set -uo pipefail
bundle="${1:-build-bundle/speedloader-runtime.tar.gz}"
probes="$(cd "${2:-build-bundle/probes}" && pwd)"
out="${OUT:-$PWD/gpu-perf-out}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
exec > >(tee -a "$out/perf.log") 2>&1
export PYTHONUNBUFFERED=1
deadline=$((SECONDS + ${PERF_SECONDS:-300}))
# Seconds for a part that wants at most $1: what is left, less $2 kept for the parts after it.
allow() {
  local left=$((deadline - SECONDS - ${2:-0}))
  [ "$left" -lt 1 ] && left=1
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
source "$here/bundle.sh"
open_bundle "$bundle" || exit 1
work="$(mktemp -d)"
vocab="$(python3 -c "import json; print(json.load(open('$probes/probe.json'))['vocab'])")"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
roofline_timeout="$(allow 70 100)"
timeout -k 10 "$roofline_timeout" python3 "$here/torch_roofline.py" --probe "$probes/probe.json" \
  --out "$out/roofline.json"
status=$?
# Say why it is missing (on the H100, 2026-11-26, PERF_SECONDS=110 left it 10 s, silently).
[ "$status" = 0 ] || echo "torch_roofline.py: exit $status with a timeout of $roofline_timeout s" \
  "(PERF_SECONDS=${PERF_SECONDS:-170}; it needs about 40 s)"
timeout -k 10 "$(allow 150 25)" "$b/bin/sl-run" "$probes/train.slsched" --backend cuda --random-weights 0 \
  --data "$probes/tokens.bin" --steps 3 --vocab "$vocab" --report "$out/train-report.json" \
  --trace "$work/train-trace.json" || status=1
timeout -k 10 "$(allow 80 3)" "$b/bin/sl-run" "$probes/infer.slsched" --backend cuda --random-weights 0 \
  --warmup-runs 1 --input "$probes/input_ids.npy" --output "$work/logits.npy" --report "$out/infer-report.json" \
  --trace "$work/infer-trace.json" || status=1
# The planner's machine profile of this GPU (link, f32/bf16 GEMM, host AdamW, cost per kernel),
# printed into perf.log: sl-opt's `target=` reads it once saved as a .json file.
echo "=== sl-run --calibrate --backend cuda ==="
timeout -k 10 "$(allow 40 60)" "$b/bin/sl-run" --calibrate "$work/profile.json" --backend cuda \
  --calibrate-seconds 0.3 || status=1
# The train probe's variants (make_probes.sh), one line each: the same tokens per step in another
# schedule mode or sub-batch count.
for variant in "$probes"/train-*.slsched; do
  [ -f "$variant" ] || continue
  name="$(basename "$variant" .slsched)"
  timeout -k 10 "$(allow 60 3)" "$b/bin/sl-run" "$variant" --backend cuda --random-weights 0 \
    --data "$probes/tokens.bin" --steps 3 --vocab "$vocab" --report "$work/$name-report.json" \
    > "$work/$name.log" 2>&1 || { status=1; tail -3 "$work/$name.log"; }
  python3 - "$work/$name-report.json" "$name" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
t, plan = r["train"], r.get("plan", {})
print(f"{sys.argv[2]:16} mode {plan.get('mode')} N {plan.get('num_sub_batches')}: "
      f"last step {t['step_seconds'][-1]:.3f} s, {t['tokens_per_step'] / t['step_seconds'][-1]:.0f} "
      f"tokens/s, H2D {t['bytes_host_to_device'][-1] / 1e9:.2f} GB, D2H "
      f"{t['bytes_device_to_host'][-1] / 1e9:.2f} GB per step, arena {r['device_arena_bytes'] / 2**30:.2f} GiB")
PY
done | tee "$out/variants.txt"
for t in train infer; do [ -f "$work/$t-trace.json" ] && gzip -c "$work/$t-trace.json" > "$out/$t-trace.json.gz"; done
python3 "$here/perf_summary.py" --probe "$probes/probe.json" --roofline "$out/roofline.json" --train "$out/train-report.json" \
  --infer "$out/infer-report.json" | tee "$out/perf-summary.txt"
[ "$status" = 0 ] && echo "PERF PART RAN" || echo "PERF PART HAD FAILURES"
exit "$status"
