#!/usr/bin/env bash
# Packs a self-contained SpeedLoader runtime for a GPU machine that has the NVIDIA driver and the
# CUDA toolkit's libraries (cuBLAS) but no MLIR, protobuf, BLAS or MPI: sl-run and the CUDA
# backend's test suite (cuda_backend_test), which link protobuf, OpenBLAS and cudart statically;
# where the build has it, the NCCL communicator plugin that sl-run loads for runs of several ranks
# (lib/libslrt_nccl.so, 60 KB; it needs MPI, NCCL and the shared cudart on the GPU machine, and
# its one-rank test travels apart: bench/gpu/prepare-nccl.sh);
# the GPU suite's scripts (bench/gpu/); the tiny models of that suite, compiled here by sl-opt
# (bench/gpu/make_models.py); and a MANIFEST (commit, ldd of each binary).
#
#   scripts/pack-runtime.sh [--build DIR] [--out FILE] [--no-models] [--no-build] [--check]
#
#   --build DIR   the configured build to take the binaries from (default build/, as
#                 scripts/build.sh makes it; it needs the CUDA backend, and sl-opt for the models).
#                 sl-run and cuda_backend_test are brought up to date there first.
#   --out FILE    the tarball (default build-bundle/speedloader-runtime.tar.gz; it unpacks into
#                 speedloader-runtime/).
#   --no-models   leave the models out (they need sl-opt and PyTorch).
#   --no-build    take the binaries as they are (ctest, which runs after the build).
#   --check       then unpack it elsewhere, refuse any binary that needs protobuf, BLAS, cudart, MPI,
#                 NCCL, MLIR or LLVM, and run the bundled sl-run (on the CPU backend) and the
#                 bundle's tests with an empty environment. ctest runs this as runtime-bundle.
#
# On the GPU machine: bench/gpu/run-gpu-suite.sh FILE (docs/cuda.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
out="$root/build-bundle/speedloader-runtime.tar.gz"
models=1
check=0
rebuild=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-models) models=0; shift ;;
    --check) check=1; shift ;;
    --no-build) rebuild=0; shift ;;
    *) echo "pack-runtime.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3

if ! grep -q '^SL_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "pack-runtime.sh: $build is not a configured build with the CUDA backend" \
       "(scripts/build.sh configures one where nvcc is installed)" >&2
  exit 1
fi
nccl=0
grep -q '^SL_ENABLE_NCCL:BOOL=ON' "$build/CMakeCache.txt" && nccl=1
if [ "$rebuild" = 1 ]; then
  cmake --build "$build" --target sl-run cuda_backend_test > /dev/null
  [ "$nccl" = 0 ] || cmake --build "$build" --target slrt_nccl > /dev/null
fi
[ "$nccl" = 0 ] || [ -f "$build/lib/libslrt_nccl.so" ] || nccl=0

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
bundle="$stage/speedloader-runtime"
mkdir -p "$bundle/bin" "$bundle/lib"
for tool in sl-run cuda_backend_test; do
  # Without host debug information but with the symbols (a crash's backtrace names functions), and
  # with the device code's line tables (-lineinfo), which compute-sanitizer reports as file:line.
  strip --strip-debug -o "$bundle/bin/$tool" "$build/bin/$tool"
done
# sl-run loads lib/libslrt_nccl.so beside its bin/ when it runs as one of several ranks.
[ "$nccl" = 0 ] || strip --strip-debug -o "$bundle/lib/libslrt_nccl.so" "$build/lib/libslrt_nccl.so"
# Fallbacks for a machine whose C++ runtime is missing or older than this one's; the suite puts
# them on the library path only when the loader reports a library not found.
for lib in libstdc++.so.6 libgcc_s.so.1 libgomp.so.1; do
  path="$(ldd "$bundle/bin/sl-run" | awk -v l="$lib" '$1 == l { print $3 }')"
  [ -n "$path" ] && cp -L "$path" "$bundle/lib/"
done
cp "$root/bench/gpu/run-gpu-suite.sh" "$root/bench/gpu/bundle.sh" "$root/bench/gpu/gpu-libs.sh" \
   "$root/bench/gpu/compare_backends.py" \
   "$root/bench/gpu/run_gtests.py" "$bundle/"

if [ "$models" = 1 ]; then
  if [ ! -x "$build/bin/sl-opt" ]; then
    echo "pack-runtime.sh: $build has no sl-opt to compile the models; give --no-models" >&2
    exit 1
  fi
  PYTHONPATH="$root/python" "$python" "$root/bench/gpu/make_models.py" \
    --sl-opt "$build/bin/sl-opt" --out "$bundle/models" > /dev/null
fi

# Nothing that the GPU machine lacks: a library from this list in a bundled binary fails the pack.
forbidden='libprotobuf|libopenblas|libblas|liblapack|libcudart|libmpi|libnccl|libMLIR|libLLVM|libgfortran'
{
  echo "SpeedLoader runtime bundle"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  echo "build: $build ($(grep '^CMAKE_BUILD_TYPE:' "$build/CMakeCache.txt" | cut -d= -f2)," \
       "CUDA architectures $(grep '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" | cut -d= -f2))"
  for tool in bin/sl-run bin/cuda_backend_test lib/libslrt_nccl.so; do
    [ -e "$bundle/$tool" ] || continue
    echo
    echo "ldd $tool:"
    ldd "$bundle/$tool"
  done
} > "$bundle/MANIFEST"
for tool in sl-run cuda_backend_test; do
  if ldd "$bundle/bin/$tool" | grep -Ei "$forbidden"; then
    echo "pack-runtime.sh: bin/$tool needs a library the GPU machine does not have (above)" >&2
    exit 1
  fi
done

mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out.partial" speedloader-runtime
mv "$out.partial" "$out"
echo "packed $out ($(du -h "$out" | cut -f1))"

[ "$check" = 1 ] || exit 0

# --- the bundle on its own: unpacked elsewhere, run with an empty environment -------------------
unpacked="$(mktemp -d)"
trap 'rm -rf "$stage" "$unpacked"' EXIT
tar -C "$unpacked" -xzf "$out"
b="$unpacked/speedloader-runtime"
clean() { env -i PATH=/usr/bin:/bin "$@"; }
for tool in sl-run cuda_backend_test; do
  if ldd "$b/bin/$tool" | grep -Ei "$forbidden|not found"; then
    echo "runtime-bundle: bin/$tool: a library above is bundled-in-name-only or missing" >&2
    exit 1
  fi
done
clean "$b/bin/sl-run" --help > /dev/null
# The CUDA suite's own checks of the no-GPU case (the rest skip themselves without a GPU).
clean "$b/bin/cuda_backend_test" --gtest_brief=1 > "$unpacked/gtest.log" 2>&1 ||
  { cat "$unpacked/gtest.log"; exit 1; }
# A real schedule, compiled here, on the CPU backend: relu(0.5 * x w^T + 2 b), as gemm.onnxtxt says.
if [ -x "$build/bin/sl-opt" ]; then
  t="$unpacked/smoke"
  mkdir -p "$t"
  "$python" "$root/test/Import/Inputs/save_model.py" "$root/test/Import/gemm.onnxtxt" \
    "$t/model.onnx" --raw
  "$build/bin/sl-opt" "$t/model.onnx" --sl-infer="batch=3" -o "$t/model.slsched"
  "$python" -c "import numpy as np; np.save('$t/x.npy', np.arange(12, dtype=np.float32).reshape(3, 4) / 4 - 1)"
  clean "$b/bin/sl-run" "$t/model.slsched" --input "$t/x.npy" --output "$t/y.npy"
  "$python" - "$t" <<'EOF'
import sys
import numpy as np
t = sys.argv[1]
x = np.load(f"{t}/x.npy")
w = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
b = np.array([0.5, -0.5], dtype=np.float32)
want = np.maximum(0.5 * x @ w.T + 2 * b, 0)
got = np.load(f"{t}/y.npy")
if not np.allclose(got, want, rtol=1e-6, atol=1e-6):
    sys.exit(f"runtime-bundle: the bundled sl-run computed {got}, expected {want}")
EOF
fi
echo "runtime-bundle: the bundle runs with an empty environment"
