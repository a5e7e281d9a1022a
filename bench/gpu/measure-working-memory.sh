#!/usr/bin/env bash
# Device memory a run uses beyond its arena (cuBLAS/cuBLASLt workspaces, scratch, cuDNN's graphs and
# workspaces, loaded kernels, the CUDA context), which sl-run's memory check adds as an estimate
# (kDeviceWorkingPerStreamBytes, kDeviceWorkingFixedBytes in cuda_backend.cc). On the GPU machine,
# from the repository root, carrying build-bundle (the bundle and make_probes.sh's probes):
#
#   bash bench/gpu/measure-working-memory.sh build-bundle/speedloader-runtime.tar.gz build-bundle/probes
#
# For each probe: the GPU's used memory before, its peak while sl-run runs (nvidia-smi every 20 ms),
# the schedule's arena, and what is left: peak - before - arena.
set -uo pipefail
probes="$(cd "$2" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/bundle.sh"
open_bundle "$1" || exit 1
work="$(mktemp -d)"
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
printf '%-16s %10s %10s %10s %12s\n' probe "before" peak arena "working MiB"
for p in train train-n4 train-canonical infer; do
  [ -f "$probes/$p.slsched" ] || continue
  before="$(used)"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 20 > "$work/mem.$p" &
  sampler=$!
  if [ "$p" = infer ]; then
    args=(--input "$probes/input_ids.npy" --output "$work/logits.npy")
  else
    args=(--data "$probes/tokens.bin" --steps 2 --vocab 32000)
  fi
  timeout -k 5 60 "$b/bin/sl-run" "$probes/$p.slsched" --backend cuda --random-weights 0 \
    "${args[@]}" --report "$work/$p.json" > "$work/$p.log" 2>&1 || tail -3 "$work/$p.log"
  kill "$sampler" 2> /dev/null
  wait "$sampler" 2> /dev/null
  peak="$(sort -n "$work/mem.$p" | tail -1)"
  arena="$(python3 -c "import json; print(json.load(open('$work/$p.json'))['device_arena_bytes'] // 2**20)")"
  printf '%-16s %10s %10s %10s %12s\n' "$p" "$before" "$peak" "$arena" "$((peak - before - arena))"
done
