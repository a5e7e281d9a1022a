#!/usr/bin/env bash
# Configures and builds SpeedLoader into build/ (or $SL_BUILD_DIR) with Ninja. Extra arguments go
# to cmake's configure step, e.g. scripts/build.sh -DSL_ENABLE_CUDA=OFF.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SL_BUILD_DIR:-$root/build}"

cmake -S "$root" -B "$build" -G Ninja \
  -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py \
  "$@"
cmake --build "$build"
