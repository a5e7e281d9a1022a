#!/usr/bin/env bash
# Installs everything SpeedLoader needs on Debian bookworm. Idempotent: packages that are already
# installed are skipped, so this is cheap to run before every build.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache g++ pkg-config
  # compiler half: MLIR/LLVM 19.1, ONNX, protobuf
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  libonnx-dev protobuf-compiler libprotobuf-dev
  # runtime: BLAS for the CPU backend, MPI for multi-rank runs
  libopenblas-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev libcli11-dev
  # tests; clang and its runtime libraries (libFuzzer, the sanitizers) for the fuzz targets
  googletest libgtest-dev libonnx-testdata clang libclang-rt-dev
  # python: model builders, ONNX export, reference implementations
  python3 python3-torch python3-onnx python3-numpy python3-pytest
  # trace timelines (python/speedloader/plot_trace.py, docs/images)
  python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
