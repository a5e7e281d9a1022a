#!/usr/bin/env bash
# Prepares the generation benchmark (bench/gpu/generation_offload.py) for the GPU machine, which
# has no MLIR: here, export the model weightless (its graph; the weights never exist), compile the
# generation schedule with sl-opt, pack the runtime (scripts/pack-runtime.sh), and put everything
# the device needs into one ignored folder to carry (a few MB: the weights never travel; sl-run
# draws them there with --random-weights). Prints the device tool's invocation(s).
#
#   bench/gpu/prepare_generation.sh [--out DIR] [--no-pack] [prepare options...]
#
# prepare options go to `generation_offload.py prepare` (defaults: --preset llama-30b --batch 32
# --prompt-len 512 --new-tokens 32 --precision bf16; e.g. --sub-batches N, --device-memory 70GB,
# --tiny). DIR defaults to build-bench-gen (inside the repository, ignored by .gitignore's build-*/);
# DIR/carry is what travels, DIR/model stays here (the sparse data file is the model's full size
# in apparent bytes, none on disk).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$root/build-bench-gen"
pack=1
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --no-pack) pack=0; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$out" in
  "$root"/*) rel="${out#"$root"/}" ;;
  *) echo "prepare_generation.sh: --out must be inside the repository ($root) to be carried" >&2
     exit 2 ;;
esac
mkdir -p "$out"
if ! git -C "$root" check-ignore -q "$rel/carry"; then
  echo "prepare_generation.sh: git does not ignore $rel/carry: carry takes ignored paths only" \
       "(name it build-SOMETHING, or add it to .git/info/exclude)" >&2
  exit 2
fi

rm -rf "$out/carry"
PYTHONPATH="$root/python" /usr/bin/python3 "$root/bench/gpu/generation_offload.py" prepare \
  --out "$out" "${args[@]}"
if [ "$pack" = 1 ]; then
  "$root/scripts/pack-runtime.sh" --no-models --out "$out/carry/speedloader-runtime.tar.gz"
fi
size="$(du -sm "$out/carry" | cut -f1)"
echo "carry folder: $rel/carry (${size} MiB; the device tool carries at most 64 MiB with the tree)"
if [ "$size" -ge 60 ]; then
  echo "prepare_generation.sh: $rel/carry is too large to carry" >&2
  exit 1
fi
drv="bench/gpu/generation_offload.py run --carry $rel/carry"
cat <<EOF

Device tool calls (kind nvidia-h100-x1 or nvidia-h200, timeout_s 600, carry ["$rel/carry"]),
each under 10 minutes; the second runs the peer after sl-run has exited:

  1. PYTHONUNBUFFERED=1 python3 $drv --phases bandwidth,speedloader
  2. PYTHONUNBUFFERED=1 python3 $drv --phases bandwidth,accelerate --accelerate-seconds 420

(or all three phases in one call where they fit: python3 $drv --accelerate-seconds 240).
Each writes PHASE.json and generation-offload.md to \$OUT. Then, here, one table of both:

  /usr/bin/python3 bench/gpu/generation_offload.py table DEVICE_FILES_1/speedloader.json \\
      DEVICE_FILES_1/bandwidth.json DEVICE_FILES_2/accelerate.json \\
      --out bench/results/generation-offload-<gpu>-<date>.md
EOF
