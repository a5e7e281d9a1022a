#!/usr/bin/env bash
# The GPU suite: the one command a session with a GPU machine runs to verify the CUDA backend
# (docs/cuda.md). Here, first: scripts/pack-runtime.sh (it writes
# build-bundle/speedloader-runtime.tar.gz). Then, with the device tool, from the repository root,
# carrying build-bundle:
#
#   bash bench/gpu/run-gpu-suite.sh build-bundle/speedloader-runtime.tar.gz
#
# BUNDLE is pack-runtime.sh's tarball or the directory it unpacks to (the bundle holds a copy of
# this script, so `speedloader-runtime/run-gpu-suite.sh .` works too). It needs the NVIDIA driver,
# cuBLAS 13 (found wherever the CUDA toolkit or the nvidia-cublas wheel put it) and python3 with
# numpy; nothing is built there. Everything goes to $OUT (default ./gpu-suite-out), at most 8 files:
#   machine.txt            GPU, driver, toolkit, OS
#   suite.log              everything below, as it ran
#   cuda_backend_test.xml  every kernel test (CUDA against the CPU backend) and schedule test, each
#                          run in a process of its own (run_gtests.py), merged
#   e2e.json               every bundled schedule on both backends, f32 and bf16: 20 steps of
#                          losses, outputs, greedy tokens
#   e2e-sync.json          two of them again with SLRT_CUDA_SYNC=1 (each kernel waited for, as
#                          before the backend ran asynchronously)
#   sanitizer.log          compute-sanitizer memcheck and racecheck over the kernel tests, initcheck
#                          over one train and one generate schedule (or "unsupported")
#   summary.txt            the table that also ends the log
# Exit status 0 when every part passed. The whole stays within $SUITE_SECONDS (default 540, under
# the device tool's 10 minutes a command): each part gets a timeout from what is left, and a
# sanitizer run cut short is reported as partial, with what it found until then.
set -uo pipefail
bundle="${1:-build-bundle/speedloader-runtime.tar.gz}"
out="${OUT:-$PWD/gpu-suite-out}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
exec > >(tee -a "$out/suite.log") 2>&1
export PYTHONUNBUFFERED=1
declare -a summary
status=0
deadline=$((SECONDS + ${SUITE_SECONDS:-540}))
# Seconds for a part that wants at most $1: what is left, less $2 kept for the parts after it.
allow() {
  local left=$((deadline - SECONDS - ${2:-0}))
  [ "$left" -lt 1 ] && left=1 # timeout 0 would mean none
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
record() { # NAME RESULT DETAIL
  summary+=("$(printf '%-28s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = pass ] || [ "$2" = skip ] || [ "$2" = part ] || status=1
}
finish() {
  {
    echo
    echo "=== summary ($(date -u +%H:%M:%SZ)) ==="
    printf '%s\n' "${summary[@]}"
    [ "$status" = 0 ] && echo "GPU SUITE PASSED" || echo "GPU SUITE FAILED"
  } | tee "$out/summary.txt"
  exit "$status"
}

echo "=== machine ==="
{
  date -u
  nvidia-smi || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || true
  command -v nvcc > /dev/null && nvcc --version
  uname -a
  cat /etc/os-release 2>/dev/null
  python3 --version
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
if gpus="$(nvidia-smi -L 2> /dev/null)" && [ -n "$gpus" ]; then
  record gpu pass "$(head -1 <<< "$gpus")"
else
  record gpu FAIL "nvidia-smi lists no GPU"
fi

echo "=== bundle ==="
source "$here/bundle.sh"
open_bundle "$bundle" || { record unpack FAIL "$bundle"; finish; }
head -4 "$b/MANIFEST"

# cuBLAS, cuDNN and the CUDA runtime (gpu-libs.sh), and, on an older system, the C++ runtime,
# where the loader does not find them itself.
missing() { ldd "$b/bin/sl-run" "$b/bin/cuda_backend_test" | awk '/not found/ { print $1 }' | sort -u; }
[ -n "$(missing)" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$b/lib"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
ldd "$b/bin/sl-run"
if [ -n "$(missing)" ]; then
  record libraries FAIL "not found: $(missing | tr '\n' ' ')"
  finish
fi
record libraries pass "sl-run and cuda_backend_test load"

echo "=== kernel and schedule tests (cuda_backend_test, one process per test) ==="
# One process per test: a faulting kernel leaves a sticky error only in its own process, and a
# crash is one failed test, not a missing XML. FreeMemoryShrinksByTheArena reads the device's
# free memory, so it runs last, alone. Only the test of the no-GPU message may skip here.
# Its own budget ends 10 s before the timeout, so that it reports the tests it did not reach
# and writes its XML rather than being killed with a smaller SUITE_SECONDS (H100, 2026-11-26).
tests_timeout="$(allow 240 170)"
timeout -k 10 "$tests_timeout" python3 "$here/run_gtests.py" "$b/bin/cuda_backend_test" \
  --out "$out/cuda_backend_test.xml" --timeout 60 --budget "$((tests_timeout > 11 ? tests_timeout - 10 : 1))" \
  --alone 'CudaBackend.FreeMemoryShrinksByTheArena' \
  --allow-skip 'CudaBackend.SaysClearlyWhenThereIsNoGpu'
code=$?
counts="$(python3 - "$out/cuda_backend_test.xml" <<'EOF' 2>/dev/null
import sys
import xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
failed = sum(c.find("failure") is not None for c in cases)
skipped = sum(c.find("skipped") is not None for c in cases)
print(f"{len(cases)} tests, {failed} failed, {skipped} skipped, each in its own process")
EOF
)"
if [ "$code" = 0 ]; then
  record cuda_backend_test pass "$counts"
else
  record cuda_backend_test FAIL "exit $code; $counts"
fi

echo "=== end to end: bundled schedules, CPU against CUDA backend ==="
if [ -d "$b/models" ]; then
  # timeout signals compare_backends.py's whole process group (its sl-run too), then kills it.
  timeout -k 10 "$(allow 240 90)" python3 "$here/compare_backends.py" --sl-run "$b/bin/sl-run" \
    --models "$b/models" --out "$out/e2e.json" --timeout 120
  code=$?
  summaryLine="$(python3 -c "import json; r=json.load(open('$out/e2e.json'))['runs']; print(f'{sum(x[\"pass\"] for x in r)}/{len(r)} schedules agree')" 2>/dev/null)"
  [ "$code" = 0 ] && record end-to-end pass "$summaryLine" || record end-to-end FAIL "exit $code; $summaryLine"
else
  record end-to-end skip "the bundle has no models (packed with --no-models)"
fi

echo "=== end to end with SLRT_CUDA_SYNC=1: one train and one generate schedule ==="
# The asynchronous path ran above; this is the synchronous one it must agree with.
if [ -d "$b/models/llama-gqa" ]; then
  timeout -k 10 "$(allow 60 80)" python3 "$here/compare_backends.py" --sl-run "$b/bin/sl-run" \
    --models "$b/models" --out "$out/e2e-sync.json" --timeout 40 \
    --only llama-gqa/train-speedloader,llama-gqa/generate --candidate-env SLRT_CUDA_SYNC=1
  code=$?
  summaryLine="$(python3 -c "import json; r=json.load(open('$out/e2e-sync.json'))['runs']; print(f'{sum(x[\"pass\"] for x in r)}/{len(r)} schedules agree')" 2>/dev/null)"
  [ "$code" = 0 ] && record end-to-end-sync pass "$summaryLine" || record end-to-end-sync FAIL "exit $code; $summaryLine"
else
  record end-to-end-sync skip "the bundle has no models/llama-gqa"
fi

echo "=== compute-sanitizer ==="
# PATH first, then where the toolkit installs it; tried once, so that a machine whose sanitizer
# refuses the device reports "unsupported" rather than a failure of every tool.
sanitizer=""
for candidate in "$(command -v compute-sanitizer 2>/dev/null)" /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda-*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
  [ -n "$candidate" ] && [ -x "$candidate" ] && { sanitizer="$candidate"; break; }
done
sanitize() { # TOOL SECONDS ARGS...: one sanitizer run into sanitizer.log
  local tool="$1" seconds="$2"
  shift 2
  echo "--- $tool: $* ---"
  timeout -k 10 "$seconds" "$sanitizer" --tool "$tool" --error-exitcode 9 "$@"
  echo "$tool exit $?"
}
verdict() { # TOOL: pass/part/FAIL from its section of sanitizer.log
  local tool="$1" code found
  code="$(awk -v t="$tool" '$1 == t && $2 == "exit" { print $3 }' "$out/sanitizer.log" | sort -u | tail -1)"
  # Findings print as "========= Invalid ...", "========= Race ...", "========= Uninitialized ...".
  found="$(sed -n "/^--- $tool:/,/^$tool exit/p" "$out/sanitizer.log" |
           grep -cE '^========= +(Invalid|Race|Error|Program hit|Uninitialized|Unused)')"
  case "$code" in
    0) record "$tool" pass "no error reported" ;;
    124|137) [ "$found" = 0 ] && record "$tool" part "cut short by the time limit; nothing found until then" ||
               record "$tool" FAIL "$found findings before the time limit (sanitizer.log)" ;;
    *) record "$tool" FAIL "exit $code, $found findings (sanitizer.log)" ;;
  esac
}
if [ -z "$sanitizer" ]; then
  record sanitizer skip "compute-sanitizer is not installed (PATH, /usr/local/cuda*/bin)"
else
  echo "compute-sanitizer: $sanitizer"
  probe="$(timeout -k 5 60 "$sanitizer" --tool memcheck "$b/bin/cuda_backend_test" --gtest_brief=1 \
             --gtest_filter='CudaKernelTest.Reduce' 2>&1)"
  probeCode=$?
  echo "$probe" | tail -n 5
  if grep -qiE "not supported|unsupported|no supported device" <<< "$probe"; then
    record sanitizer skip "unsupported on this machine: $(grep -iE 'supported' <<< "$probe" | head -1)"
  elif [ "$probeCode" != 0 ] && ! grep -q '^=========' <<< "$probe"; then
    record sanitizer FAIL "the sanitizer did not start (exit $probeCode): $(tail -1 <<< "$probe")"
  else
    {
      sanitize memcheck "$(allow 100 60)" "$b/bin/cuda_backend_test" --gtest_brief=1 \
        --gtest_filter='CudaKernelTest.*:-CudaKernelTest.Matmul:CudaKernelTest.Gemm'
      sanitize racecheck "$(allow 60 40)" "$b/bin/cuda_backend_test" --gtest_brief=1 \
        --gtest_filter='CudaKernelTest.Attention*:CudaKernelTest.DecodeAttention:CudaKernelTest.Softmax*:CudaKernelTest.*Norm*:CudaKernelTest.CrossEntropy*:CudaKernelTest.Reduce'
      # initcheck: the CUDA arena is not zeroed (the CPU backend's is), so a schedule that reads
      # arena memory before writing it passes on the CPU and reads garbage here. One train
      # schedule (two steps) and one generate schedule, through sl-run.
      if [ -d "$b/models/llama-gqa" ]; then
        m="$b/models/llama-gqa"
        work="$(mktemp -d)"
        sanitize initcheck "$(allow 40 20)" "$b/bin/sl-run" "$m/train-speedloader.slsched" \
          --backend cuda --data "$m/tokens.bin" --steps 2 --vocab 64
        sanitize initcheck "$(allow 40 3)" "$b/bin/sl-run" "$m/generate.slsched" --backend cuda \
          --prompts "$m/prompts.jsonl" --output "$work/tokens.jsonl" --temperature 0
      fi
    } > "$out/sanitizer.log" 2>&1
    grep -E '^=========' "$out/sanitizer.log" | head -n 40
    verdict memcheck
    verdict racecheck
    [ -d "$b/models/llama-gqa" ] && verdict initcheck
  fi
fi

finish
