# Sourced by the GPU scripts (run-gpu-suite.sh, run-gpu-perf.sh, measure-working-memory.sh, and the
# peers' scripts): open_bundle BUNDLE sets $b to the runtime bundle's directory, BUNDLE being
# scripts/pack-runtime.sh's tarball (unpacked into a new temporary directory, also left in $work)
# or the directory it unpacks to, then puts the GPU libraries the bundled binaries need on
# LD_LIBRARY_PATH (gpu-libs.sh). Returns 1, saying why, when there is no bundle or it does not
# unpack.
open_bundle() {
  local bundle="$1" here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  if [ -d "$bundle/bin" ]; then
    b="$(cd "$bundle" && pwd)"
  elif [ -f "$bundle" ]; then
    work="$(mktemp -d)"
    if ! tar -C "$work" -xzf "$bundle"; then
      echo "cannot unpack $bundle"
      return 1
    fi
    b="$work/speedloader-runtime"
  else
    echo "no bundle at $bundle: run scripts/pack-runtime.sh here first and carry build-bundle"
    return 1
  fi
  if [ ! -x "$b/bin/sl-run" ]; then
    echo "$bundle holds no bin/sl-run: not a runtime bundle"
    return 1
  fi
  source "$here/gpu-libs.sh"
}
