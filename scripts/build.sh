#!/usr/bin/env bash
# Configures and builds SpeedLoader into build/ (or $SL_BUILD_DIR) with Ninja. Extra arguments go
# to cmake's configure step, e.g. scripts/build.sh -DSL_ENABLE_CUDA=OFF.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SL_BUILD_DIR:-$root/build}"

# The CUDA toolkit installs nvcc outside PATH; point CMake at it so SL_ENABLE_CUDA turns on.
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDACXX:-}" ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

cmake -S "$root" -B "$build" -G Ninja \
  -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py \
  "$@"
cmake --build "$build"
