#!/usr/bin/env bash
# Builds the runtime alone (no compiler, no CUDA, no MPI) with AddressSanitizer and
# UndefinedBehaviorSanitizer into $1 (default build-sanitize/) and runs its GoogleTest suites there:
# sl_run_test runs the sanitized sl-run end to end. Any report fails the run (halt_on_error).
# ctest runs this as `runtime-sanitized` (label sanitize); by hand: scripts/sanitize-runtime.sh.
# Extra arguments go to the inner ctest (e.g. -R checkpoint).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-sanitize}"
shift || true

# -O1 -g1: ASan's recommended optimisation level, with line numbers in reports; it keeps both the
# build (on 2 cores) and the kernel tests short. -fno-sanitize-recover makes UBSan abort like ASan.
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja \
  -DSL_BUILD_COMPILER=OFF -DSL_ENABLE_CUDA=OFF -DSL_ENABLE_MPI=OFF -DSL_BUILD_FUZZERS=OFF \
  -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1 $flags" -DCMAKE_C_FLAGS_SANITIZE="-O1 -g1 $flags" \
  -DCMAKE_EXE_LINKER_FLAGS_SANITIZE="$flags" > "$build/configure.log" ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build"

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The runtime's own suites; the Python suite and the include check do not run runtime code.
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -E '^(python|runtime-includes-no-mlir)$' "$@"
