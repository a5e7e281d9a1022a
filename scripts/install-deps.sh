#!/usr/bin/env bash
# Installs everything SpeedLoader needs on Debian bookworm. Idempotent: packages that are already
# installed are skipped, so this is cheap to run before every build.
#
# Last, it makes the venv the Hugging Face architecture tests run in ($SL_HF_VENV, by default
# .venv/ in the repository, git-ignored): Debian's python3 with its site packages (so it sees
# python3-torch) plus transformers 4.41.2 and its small dependencies from PyPI, pinned and
# installed with --no-deps, so that pip never brings PyPI's torch.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

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
  # the venv for transformers (below) and the Debian packages transformers imports
  python3-venv python3-yaml python3-requests python3-packaging python3-typing-extensions
  # chat templates (speedloader.generate --chat), rendered as transformers renders them
  python3-jinja2
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
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

HF_VENV="${SL_HF_VENV:-$root/.venv}"
HF_PACKAGES=(
  transformers==4.41.2 tokenizers==0.19.1 huggingface-hub==0.23.5 safetensors==0.8.0
  regex==2026.11.19 tqdm==4.70.1 filelock==4.3.1 fsspec==2026.9.0
  optimum==1.20.0
)
# The venv is ready when its interpreter imports every pinned package at its pinned version.
hf_venv_ready() {
  "$HF_VENV/bin/python" - "${HF_PACKAGES[@]}" <<'PY' 2> /dev/null
import sys
from importlib.metadata import version
sys.exit(any(version(name) != want for name, want in (p.split("==") for p in sys.argv[1:])))
PY
}
if hf_venv_ready; then
  echo "install-deps: $HF_VENV has transformers 4.41.2"
else
  echo "install-deps: making $HF_VENV (transformers 4.41.2 over Debian's python3-torch)"
  /usr/bin/python3 -m venv --system-site-packages "$HF_VENV"
  "$HF_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${HF_PACKAGES[@]}"
  hf_venv_ready || { echo "install-deps: $HF_VENV is incomplete after pip install" >&2; exit 1; }
fi

# The cuDNN frontend's headers (header-only C++; the CUDA backend's fused attention), from the
# nvidia-cudnn-frontend wheel, unpacked into build-deps/ (git-ignored), where CMake looks for them.
# cuDNN itself comes from the CUDA installation and is loaded at run time.
FRONTEND_VERSION=1.32.0
FRONTEND_DIR="$root/build-deps/cudnn-frontend"
if [ -f "$FRONTEND_DIR/VERSION" ] && [ "$(cat "$FRONTEND_DIR/VERSION")" = "$FRONTEND_VERSION" ]; then
  echo "install-deps: cuDNN frontend $FRONTEND_VERSION present"
else
  echo "install-deps: fetching the cuDNN frontend $FRONTEND_VERSION headers"
  wheels="$(mktemp -d)"
  /usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$wheels" "nvidia-cudnn-frontend==$FRONTEND_VERSION"
  rm -rf "$FRONTEND_DIR"
  mkdir -p "$FRONTEND_DIR"
  /usr/bin/python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith('include/')])" \
    "$(ls "$wheels"/nvidia_cudnn_frontend-*.whl)" "$FRONTEND_DIR"
  echo "$FRONTEND_VERSION" > "$FRONTEND_DIR/VERSION"
  rm -rf "$wheels"
fi
