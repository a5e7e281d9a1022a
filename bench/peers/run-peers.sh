#!/usr/bin/env bash
# The peer comparison on the GPU machine (issue 23), one device-tool call per part, from the
# repository root, carrying the folder bench/peers/prepare.sh made here (default
# build-peers/carry: the wheels, the runtime bundle, the compiled schedules, FlexGen's policy,
# plan.env):
#
#   bash bench/peers/run-peers.sh train    [CARRY]   # SpeedLoader, DeepSpeed ZeRO-3 offload, FSDP
#   bash bench/peers/run-peers.sh generate [CARRY]   # SpeedLoader, accelerate, FlexGen
#
# It installs the wheels into /tmp/site, measures the link and GEMM rates (link.py), then runs
# the drivers one process each, most important first, each under `timeout` from one budget
# ($PEERS_SECONDS, default 330): a run that does not fit what is left is recorded as skipped,
# one that times out or crashes as an error line of its own, so every run has a line. Writes to
# $OUT (at most 8 files come back): peers.jsonl (every result line), tables.md and plot.png
# (python -m speedloader.peer_tables), peers.log (this script's output), logs.tar.gz (each run's
# full output), machine.txt (nvidia-smi, tool versions).
set -uo pipefail
part="${1:?usage: run-peers.sh train|generate [CARRY]}"
carry="$(cd "${2:-build-peers/carry}" && pwd)" || exit 2
case "$part" in train|generate) ;; *) echo "run-peers.sh: part is train or generate" >&2; exit 2 ;; esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/bench/peers"
out="${OUT:-$PWD/peers-out}"
mkdir -p "$out"
logs="$(mktemp -d)/logs-$part"
mkdir -p "$logs"
exec > >(tee -a "$out/peers.log") 2>&1
export PYTHONUNBUFFERED=1
deadline=$((SECONDS + ${PEERS_SECONDS:-330}))
jsonl="$out/peers.jsonl"
# shellcheck source=/dev/null
source "$carry/plan.env"

# --- the wheels, the compilers DeepSpeed's JIT needs -------------------------------------------
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$carry"/wheels/*.whl || { echo "cannot install the wheels"; exit 1; }
export PYTHONPATH="/tmp/site:$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$PATH:/tmp/site/bin"
if [ -z "${CUDA_HOME:-}" ]; then
  nvcc="$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)"
  if [ -n "$nvcc" ]; then CUDA_HOME="$(dirname "$(dirname "$nvcc")")"; export CUDA_HOME; fi
fi
export DS_ACCELERATOR=cuda
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
  echo "nvcc: $(command -v nvcc) $(nvcc --version 2>/dev/null | tail -1)"; echo "CUDA_HOME=${CUDA_HOME:-}"
  echo "ninja: $(command -v ninja) $(ninja --version 2>/dev/null)"
  echo "gcc: $(gcc --version 2>/dev/null | head -1)"
  python3 -m pip list 2>/dev/null | grep -Ei '^(torch|transformers|accelerate|deepspeed|flexgen|pydantic|numpy|ninja) '
  free -g; nproc
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

# Seconds for a run that wants at most $1, keeping $2 for the runs after it where the budget
# allows (the keep yields when less than 30 s would be left for this run); 0 (skip it) when
# under 30 s are left.
allow() {
  local left=$((deadline - SECONDS))
  local t=$((left - ${2:-0}))
  [ "$t" -lt 30 ] && t=$left
  if [ "$t" -lt 30 ]; then echo 0; elif [ "$t" -lt "$1" ]; then echo "$t"; else echo "$1"; fi
}
# run NAME SYSTEM TASK WANT KEEP CMD...: one driver, its own log, a result line whatever happens.
run() {
  local name="$1" system="$2" task="$3" want="$4" keep="$5"; shift 5
  # $PEERS_RUNS (names, space-separated) runs those alone, for a rerun in a short window.
  if [ -n "${PEERS_RUNS:-}" ] && [[ " $PEERS_RUNS " != *" $name "* ]]; then return; fi
  local t; t="$(allow "$want" "$keep")"
  local before; before="$(wc -l < "$jsonl" 2>/dev/null || echo 0)"
  if [ "$t" = 0 ]; then
    echo "--- $name: skipped, $((deadline - SECONDS)) s of the budget left"
    note "$system" "$task" "$name" skipped "the call's budget (PEERS_SECONDS) was spent" "$*"
    return
  fi
  echo "--- $name (timeout ${t} s): $*"
  local start=$SECONDS
  timeout -k 10 "$t" "$@" --jsonl "$jsonl" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "    exit $rc after $((SECONDS - start)) s"
  if [ "$(wc -l < "$jsonl" 2>/dev/null || echo 0)" = "$before" ]; then
    local why="exit $rc with no result line"
    { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && why="timed out after $t s"
    note "$system" "$task" "$name" error "$why; log tail: $(tail -c 600 "$logs/$name.log")" "$*"
  fi
  tail -1 "$jsonl" | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); \
print('   ', r['status'], {k: r.get(k) for k in ('tokens_per_second', 'decode_tokens_per_second', \
'device_peak_bytes', 'error', 'reason') if r.get(k) is not None})" 2>/dev/null
}
note() {
  python3 - "$@" >> "$jsonl" <<'PY'
import json, sys
system, task, name, status, why, cmd = sys.argv[1:7]
print(json.dumps({"system": system, "task": task, "status": status, "run": name, "command": cmd,
                  ("error" if status == "error" else "reason"): why}))
PY
}

py=python3
# sl-run from the bundle, unpacked once, with the library path bench/gpu/gpu-libs.sh finds for
# it (cuBLAS, cuDNN, the CUDA runtime) given to its runs alone, and cuDNN's attention required:
# without cuDNN, attention would run the reference kernels (870x slower), so that is an error.
# shellcheck source=../gpu/bundle.sh
read -r b sl_ld < <(LD_LIBRARY_PATH='' && source "$root/bench/gpu/bundle.sh" &&
  open_bundle "$carry/speedloader-runtime.tar.gz" >&2 && echo "$b ${LD_LIBRARY_PATH:-}")
[ -n "${b:-}" ] || { echo "cannot open the bundle"; exit 1; }
sl=(env "LD_LIBRARY_PATH=$sl_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SLRT_CUDNN_ATTENTION=require
    "$py" "$here/speedloader_run.py" --carry "$carry" --bundle "$b" --schedule)
timeout -k 10 90 "$py" "$here/link.py" --jsonl "$jsonl" > "$logs/link.log" 2>&1 || tail -5 "$logs/link.log"

if [ "$part" = train ]; then
  tr=(--layers "$TRAIN_LAYERS" --batch "$TRAIN_BATCH" --seq "$SEQ")
  # DeepSpeedCPUAdam is JIT-built (nvcc, ninja) on its first use: build it once, untimed.
  echo "--- building DeepSpeedCPUAdam (JIT)"
  start=$SECONDS
  timeout -k 10 "$(allow 240 150)" "$py" -c "from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load()" \
    > "$logs/cpu_adam_build.log" 2>&1 && echo "    built in $((SECONDS - start)) s" ||
    { echo "    FAILED after $((SECONDS - start)) s:"; tail -15 "$logs/cpu_adam_build.log"; }
  # The comparison at N = 2 first, then the sweep and the other sub-batch counts.
  run sl-train-n2 speedloader train 90 150 "${sl[@]}" train-sl-n2
  run sl-canonical-n2 speedloader-canonical train 90 140 "${sl[@]}" train-canonical-n2
  run ds-n2 deepspeed train 120 80 "$py" "$here/train_deepspeed.py" "${tr[@]}" --sub-batches 2
  run fsdp-n2 fsdp train 100 60 "$py" "$here/train_fsdp.py" "${tr[@]}" --sub-batches 2
  run ds-n2-live3e8 deepspeed train 90 40 "$py" "$here/train_deepspeed.py" "${tr[@]}" --sub-batches 2 \
    --max-live-parameters 3e8 --prefetch-bucket-size 5e7
  run ds-n2-prefetch5e8 deepspeed train 90 30 "$py" "$here/train_deepspeed.py" "${tr[@]}" --sub-batches 2 \
    --max-live-parameters 1e9 --prefetch-bucket-size 5e8
  run sl-train-n1 speedloader train 60 25 "${sl[@]}" train-sl-n1
  run sl-train-n4 speedloader train 60 20 "${sl[@]}" train-sl-n4
  run sl-canonical-n4 speedloader-canonical train 60 15 "${sl[@]}" train-canonical-n4
  run ds-n1 deepspeed train 90 10 "$py" "$here/train_deepspeed.py" "${tr[@]}" --sub-batches 1
  run ds-n4 deepspeed train 90 5 "$py" "$here/train_deepspeed.py" "${tr[@]}" --sub-batches 4
  run fsdp-n4 fsdp train 90 0 "$py" "$here/train_fsdp.py" "${tr[@]}" --sub-batches 4
else
  ge=(--batch "$GEN_BATCH" --prompt-len "$PROMPT_LEN" --new-tokens "$NEW_TOKENS" --layers "$GEN_LAYERS")
  run sl-gen-llama-n1 speedloader generate 90 200 "${sl[@]}" gen-llama2-7b-n1
  run accelerate accelerate generate 150 110 "$py" "$here/gen_accelerate.py" --model llama2-7b "${ge[@]}" --seconds 100
  run sl-gen-opt-n1 speedloader generate 90 110 "${sl[@]}" gen-opt-6.7b-n1
  # FlexGen's placement (weights streamed, KV caches on the device), ~7 s each on an H100.
  run sl-gen-opt-n1-kvdev speedloader generate 60 95 "${sl[@]}" gen-opt-6.7b-n1-kvdev
  run sl-gen-llama-n1-kvdev speedloader generate 60 80 "${sl[@]}" gen-llama2-7b-n1-kvdev
  run flexgen-search flexgen generate 150 30 "$py" "$here/gen_flexgen.py" --model opt-6.7b "${ge[@]}" \
    --policy-file "$carry/flexgen-policy.json"
  run sl-gen-llama-n4 speedloader generate 60 20 "${sl[@]}" gen-llama2-7b-n4
  run sl-gen-opt-n4 speedloader generate 60 10 "${sl[@]}" gen-opt-6.7b-n4
  run flexgen-ngb4 flexgen generate 120 0 "$py" "$here/gen_flexgen.py" --model opt-6.7b "${ge[@]}" \
    --num-gpu-batches 4
fi

"$py" -m speedloader.peer_tables "$jsonl" --out "$out/tables.md" --plot "$out/plot.png" || true
tar -C "$(dirname "$logs")" -czf "$out/logs-$part.tar.gz" "logs-$part"
echo "=== run-peers.sh $part: $(grep -c '"status": "ok"' "$jsonl") ok lines of $(wc -l < "$jsonl"); $SECONDS s"
