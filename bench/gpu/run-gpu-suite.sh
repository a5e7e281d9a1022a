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
#   cuda_backend_test.xml  every kernel test (CUDA against the CPU backend) and schedule test
#   e2e.json               every bundled schedule on both backends: 20 steps of losses, outputs
#   sanitizer.log          compute-sanitizer memcheck and racecheck over the kernel tests
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
if [ -d "$bundle/bin" ]; then
  b="$(cd "$bundle" && pwd)"
elif [ -f "$bundle" ]; then
  work="$(mktemp -d)"
  tar -C "$work" -xzf "$bundle" || { record unpack FAIL "$bundle"; finish; }
  b="$work/speedloader-runtime"
else
  echo "no bundle at $bundle: run scripts/pack-runtime.sh here first and carry build-bundle"
  record unpack FAIL "no bundle at $bundle"
  finish
fi
head -4 "$b/MANIFEST"

# cuBLAS (and, on an older system, the C++ runtime) where the loader does not find them itself.
missing() { ldd "$b/bin/sl-run" "$b/bin/cuda_backend_test" | awk '/not found/ { print $1 }' | sort -u; }
for lib in $(missing); do
  case "$lib" in
    libcublas*)
      dir="$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /usr/local \
               /opt /usr/lib -name "$lib" -print -quit 2>/dev/null | xargs -r dirname)"
      [ -n "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  esac
done
[ -n "$(missing)" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$b/lib"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
ldd "$b/bin/sl-run"
if [ -n "$(missing)" ]; then
  record libraries FAIL "not found: $(missing | tr '\n' ' ')"
  finish
fi
record libraries pass "sl-run and cuda_backend_test load"

echo "=== kernel and schedule tests (cuda_backend_test) ==="
timeout "$(allow 240 200)" "$b/bin/cuda_backend_test" --gtest_output="xml:$out/cuda_backend_test.xml"
code=$?
# Only the test of the no-GPU message may skip here.
counts="$(python3 - "$out/cuda_backend_test.xml" <<'EOF' 2>/dev/null
import sys
import xml.etree.ElementTree as ET
run = failed = skipped = 0
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    run += 1
    if case.find("failure") is not None:
        failed += 1
    elif (case.get("result") == "skipped" or case.find("skipped") is not None) and \
            case.get("name") != "SaysClearlyWhenThereIsNoGpu":
        skipped += 1
print(f"{run} tests, {failed} failed, {skipped} skipped")
EOF
)"
if [ "$code" = 0 ] && grep -q " 0 failed, 0 skipped" <<< "$counts"; then
  record cuda_backend_test pass "$counts"
else
  record cuda_backend_test FAIL "exit $code; ${counts:-no XML}"
fi

echo "=== end to end: bundled schedules, CPU against CUDA backend ==="
if [ -d "$b/models" ]; then
  timeout "$(allow 240 120)" python3 "$here/compare_backends.py" --sl-run "$b/bin/sl-run" --models "$b/models" \
    --out "$out/e2e.json"
  code=$?
  summaryLine="$(python3 -c "import json; r=json.load(open('$out/e2e.json'))['runs']; print(f'{sum(x[\"pass\"] for x in r)}/{len(r)} schedules agree')" 2>/dev/null)"
  [ "$code" = 0 ] && record end-to-end pass "$summaryLine" || record end-to-end FAIL "exit $code; $summaryLine"
else
  record end-to-end skip "the bundle has no models (packed with --no-models)"
fi

echo "=== compute-sanitizer ==="
if command -v compute-sanitizer > /dev/null; then
  memcheck=$(allow 150 60)
  {
    echo "--- memcheck: every kernel test but the cuBLAS ones ---"
    timeout "$memcheck" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$b/bin/cuda_backend_test" --gtest_brief=1 \
      --gtest_filter='CudaKernelTest.*:-CudaKernelTest.Matmul:CudaKernelTest.Gemm'
    echo "memcheck exit $?"
  } > "$out/sanitizer.log" 2>&1
  racecheck=$(allow 150 5)
  {
    echo "--- racecheck: the kernels that share memory within a block ---"
    timeout "$racecheck" compute-sanitizer --tool racecheck --error-exitcode 9 \
      "$b/bin/cuda_backend_test" --gtest_brief=1 \
      --gtest_filter='CudaKernelTest.Attention*:CudaKernelTest.DecodeAttention:CudaKernelTest.Softmax*:CudaKernelTest.*Norm*:CudaKernelTest.CrossEntropy*:CudaKernelTest.Reduce'
    echo "racecheck exit $?"
  } >> "$out/sanitizer.log" 2>&1
  grep -E '^=========' "$out/sanitizer.log" | head -n 40
  for tool in memcheck racecheck; do
    code="$(awk -v t="$tool" '$1 == t && $2 == "exit" { print $3 }' "$out/sanitizer.log")"
    # Findings print as "========= Invalid ...", "========= Race ...", "========= Error ...".
    found="$(sed -n "/--- $tool/,/$tool exit/p" "$out/sanitizer.log" |
             grep -cE '^========= +(Invalid|Race|Error|Program hit|Uninitialized)')"
    case "$code" in
      0) record "$tool" pass "no error reported" ;;
      124) [ "$found" = 0 ] && record "$tool" part "cut short by the time limit; nothing found until then" ||
             record "$tool" FAIL "$found findings before the time limit (sanitizer.log)" ;;
      *) record "$tool" FAIL "exit $code, $found findings (sanitizer.log)" ;;
    esac
  done
else
  record sanitizer skip "compute-sanitizer is not installed"
fi

finish
