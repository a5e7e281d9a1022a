# Sourced by bundle.sh's open_bundle with $b set to the unpacked bundle: puts on
# LD_LIBRARY_PATH what the bundled binaries load from the GPU machine and the loader may not find
# by itself: cuBLAS 13 (linked), and cuDNN 9 with the CUDA 13 runtime library (loaded at run time by
# the cuDNN frontend for fused attention; without them attention runs the reference kernels).
# Found in the CUDA toolkit, then in the NVIDIA wheels that PyTorch installs.
gpu_lib_dir() { # NAME [PYTHON-MODULE]: the directory holding library NAME, or nothing
  local dir
  dir="$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /usr/lib \
           /usr/local/lib -name "$1" -print -quit 2>/dev/null | xargs -r dirname)"
  if [ -z "$dir" ] && [ -n "${2:-}" ]; then
    dir="$(python3 -c "import $2, os; print(os.path.join(list($2.__path__)[0], 'lib'))" \
             2>/dev/null)"
    [ -f "$dir/$1" ] || dir=""
  fi
  [ -z "$dir" ] && dir="$(find / -xdev -name "$1" -print -quit 2>/dev/null | xargs -r dirname)"
  echo "$dir"
}
gpu_lib_add() { # DIR: prepend unless empty or already there
  [ -n "$1" ] || return 0
  case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) return 0 ;; esac
  export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
for lib in $(ldd "$b/bin/sl-run" | awk '/not found/ && /libcublas/ { print $1 }' | sort -u); do
  gpu_lib_add "$(gpu_lib_dir "$lib" nvidia.cublas)"
done
ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 ' || gpu_lib_add "$(gpu_lib_dir libcudnn.so.9 nvidia.cudnn)"
ldconfig -p 2>/dev/null | grep -q 'libcudart.so.13 ' ||
  gpu_lib_add "$(gpu_lib_dir libcudart.so.13 nvidia.cuda_runtime)"
echo "cuDNN 9: $(gpu_lib_dir libcudnn.so.9 nvidia.cudnn)/libcudnn.so.9;" \
     "CUDA runtime: $(gpu_lib_dir libcudart.so.13 nvidia.cuda_runtime)/libcudart.so.13"
