#!/usr/bin/env bash
# Runs one fuzz target (fuzz/) for a bounded time: scripts/fuzz.sh TARGET SECONDS [BUILD_DIR].
# TARGET is schedule, safetensors, token_data, prompts, rank_agreement, onnx or onnxtxt; the
# binaries and seeds come from BUILD_DIR (default build/, configured with SL_BUILD_FUZZERS=ON).
# New inputs accumulate in BUILD_DIR/fuzz-work/TARGET/corpus, crash reproducers in
# BUILD_DIR/fuzz-work/TARGET/ (crash-*, leak-*, timeout-*, oom-*), and the exit status is
# libFuzzer's: non-zero when it found one. Extra arguments after BUILD_DIR go to libFuzzer (e.g.
# -jobs=4 -workers=4).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$1"
seconds="$2"
build="${3:-$root/build}"
shift 3 || shift $#

fuzzer="$build/fuzz/${target}_fuzzer"
seeds="$build/fuzz-seeds/$target"
work="$build/fuzz-work/$target"
if [ ! -x "$fuzzer" ]; then
  echo "fuzz.sh: $fuzzer is not built (configure with -DSL_BUILD_FUZZERS=ON)" >&2
  exit 2
fi
if [ ! -d "$seeds" ]; then
  echo "fuzz.sh: no seeds in $seeds (ctest -R fuzz-seeds writes them)" >&2
  exit 2
fi
mkdir -p "$work/corpus"
# -timeout: an input that takes 25 s is a hang (generous: CI machines are busy).
# -rss_limit_mb: one input may not take 2 GiB.
exec "$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/corpus" "$seeds"
