#!/usr/bin/env bash
# Prepares, here, everything the peer comparison (issue 23) needs on the GPU machine, which has
# PyTorch, transformers and accelerate but no deepspeed, flexgen, MPI, protobuf or MLIR, and no
# network: one git-ignored folder to carry (default build-peers/carry) holding
#   wheels/                      bench/peers/wheels.txt for CPython 3.12 (deepspeed built here
#                                with DS_BUILD_OPS=0), every Requires-Dist checked
#   speedloader-runtime.tar.gz   scripts/pack-runtime.sh's bundle, sl-run only (no test binary)
#   schedules/, speedloader.json SpeedLoader's schedules for the same shapes
#                                (prepare_speedloader.py; weightless, so sl-run draws the weights)
#   flexgen-policy.json          FlexGen's own policy search (its cost model's LP, needs pulp:
#                                run here, so that pulp stays here)
#   plan.env                     the shapes, which run-peers.sh gives the peer drivers
# then checks that the carry and the working tree fit the device tool's 64 MiB, and prints the
# device calls with their expected durations.
#
#   bench/peers/prepare.sh [--build DIR] [--no-build] [--out DIR] [--train-layers 2]
#                          [--gen-layers 4] [--hf-python PY] [--skip-wheels] [--skip-schedules]
#
# --build DIR: the configured build with sl-opt and a CUDA sl-run (default build/; --no-build
# takes its binaries as they are). --hf-python: a Python with transformers, for FlexGen's policy
# search (default .venv/bin/python, as scripts/install-deps.sh makes it). Takes about 10 minutes
# of CPU here (the train schedules' compiles, 1-2 minutes each), and network for the wheels.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/bench/peers"
build="$root/build"
out="$root/build-peers/carry"
nobuild=()
train_layers=2
gen_layers=4
hf_python="$root/.venv/bin/python"
wheels=1
schedules=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --no-build) nobuild=(--no-build); shift ;;
    --out) mkdir -p "$2"; out="$(cd "$2" && pwd)"; shift 2 ;;
    --train-layers) train_layers="$2"; shift 2 ;;
    --gen-layers) gen_layers="$2"; shift 2 ;;
    --hf-python) hf_python="$2"; shift 2 ;;
    --skip-wheels) wheels=0; shift ;;
    --skip-schedules) schedules=0; shift ;;
    *) echo "prepare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$out" in
  "$root"/*) rel="${out#"$root"/}" ;;
  *) echo "prepare.sh: --out must be inside the repository ($root) to be carried" >&2; exit 2 ;;
esac
mkdir -p "$out"
if ! git -C "$root" check-ignore -q "$rel/plan.env"; then
  echo "prepare.sh: git does not ignore $rel: the device tool carries ignored paths only" \
       "(name it build-SOMETHING, or add it to .git/info/exclude)" >&2
  exit 2
fi
train_batch=4 seq=2048 gen_batch=32 prompt_len=512 new_tokens=32
py_tag=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

# --- wheels --------------------------------------------------------------------------------------
pins=$(grep -v '^#' "$here/wheels.txt" | grep -v '^$')
if [ "$wheels" = 1 ]; then
  rm -rf "$out/wheels" && mkdir -p "$out/wheels"
  others=$(echo "$pins" | grep -v '^deepspeed==')
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: "${py_tag[@]}" -d "$out/wheels" $others
  ds=$(echo "$pins" | grep '^deepspeed==')
  src="$(mktemp -d)"
  python3 -m pip download -q --no-deps --no-binary=:all: -d "$src" "$ds"
  tar -C "$src" -xzf "$src"/deepspeed-*.tar.gz
  # No op is compiled here (DS_BUILD_OPS=0): DeepSpeedCPUAdam is JIT-built on the GPU machine.
  # DS_ACCELERATOR=cuda: this machine has no GPU, and the wheel records the accelerator.
  (cd "$src"/deepspeed-*/ && DS_BUILD_OPS=0 DS_ACCELERATOR=cuda /usr/bin/python3 -m pip wheel -q \
     --no-deps --no-build-isolation -w "$out/wheels" . > "$src/build.log" 2>&1) ||
    { tail -20 "$src/build.log"; exit 1; }
  rm -rf "$src"
fi
# Every Requires-Dist (outside extras) of every wheel must be carried or in the image.
/usr/bin/python3 - "$out/wheels" <<'PY'
import re, sys, zipfile
from pathlib import Path
image = set("""accelerate attrs einops filelock fsspec huggingface-hub jinja2 msgpack networkx
ninja numpy nvidia-ml-py packaging psutil py-cpuinfo pyyaml regex requests safetensors sympy
tokenizers torch tqdm transformers triton typing-extensions""".split())
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
wheels = sorted(Path(sys.argv[1]).glob("*.whl"))
carried = {norm(w.name.split("-")[0]) for w in wheels}
missing = []
for w in wheels:
    meta = next(n for n in zipfile.ZipFile(w).namelist() if n.endswith(".dist-info/METADATA"))
    for line in zipfile.ZipFile(w).read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            name = norm(re.split(r"[ ;<>=!~(\[]", line.split(":", 1)[1].strip())[0])
            if name not in carried and name not in image and name != "pulp":
                missing.append(f"{w.name} needs {name}")
if missing:
    sys.exit("prepare.sh: neither carried nor in the GPU image:\n  " + "\n  ".join(missing))
names = sorted(norm(w.name.split("-")[0]) for w in wheels)
if len(names) != len(set(names)):
    sys.exit(f"prepare.sh: two versions of one package in {sys.argv[1]}: {names}")
print(f"wheels: {len(wheels)}, every requirement carried or in the image (flexgen's pulp is "
      f"needed only by its policy search, which runs here)")
PY

# --- the runtime bundle: sl-run alone ------------------------------------------------------------
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
"$root/scripts/pack-runtime.sh" --build "$build" --no-models "${nobuild[@]}" --out "$stage/full.tar.gz"
tar -C "$stage" -xzf "$stage/full.tar.gz"
rm -f "$stage/speedloader-runtime/bin/cuda_backend_test"
tar -C "$stage" -czf "$out/speedloader-runtime.tar.gz" speedloader-runtime

# --- SpeedLoader's schedules, FlexGen's policy ---------------------------------------------------
if [ "$schedules" = 1 ]; then
  rm -rf "$out/schedules"
  /usr/bin/python3 "$here/prepare_speedloader.py" --out "$out" --sl-opt "$build/bin/sl-opt" \
    --train-layers "$train_layers" --train-batch "$train_batch" --seq "$seq" \
    --gen-layers "$gen_layers" --gen-batch "$gen_batch" --prompt-len "$prompt_len" \
    --new-tokens "$new_tokens"
fi
site="$stage/site"
pulp="$(python3 -m pip download -q --no-deps -d "$stage/pulp" pulp==2.9.0 > /dev/null && ls "$stage"/pulp/*.whl)"
[ -x "$hf_python" ] || hf_python=/usr/bin/python3
"$hf_python" -m pip install -q --no-deps --no-index --target "$site" "$pulp" "$out"/wheels/flexgen-*.whl
PYTHONPATH="$site" "$hf_python" "$here/gen_flexgen.py" --search-policy "$out/flexgen-policy.json" \
  --model opt-6.7b --layers "$gen_layers" --batch "$gen_batch" --prompt-len "$prompt_len" \
  --new-tokens "$new_tokens"

cat > "$out/plan.env" <<EOF
TRAIN_LAYERS=$train_layers
TRAIN_BATCH=$train_batch
SEQ=$seq
GEN_LAYERS=$gen_layers
GEN_BATCH=$gen_batch
PROMPT_LEN=$prompt_len
NEW_TOKENS=$new_tokens
EOF

# --- what travels --------------------------------------------------------------------------------
echo
echo "wheels (for CPython 3.12, manylinux x86-64):"
(cd "$out/wheels" && ls -l *.whl | awk '{ printf "  %-75s %6.2f MB\n", $9, $5 / 1e6 }')
tree=$(git -C "$root" ls-files -z --cached --others --exclude-standard | (cd "$root" && xargs -0 du -cb 2>/dev/null) | tail -1 | cut -f1)
carry=$(du -sb "$out" | cut -f1)
printf 'carry %s: %.1f MiB (wheels %.1f, runtime %.1f, schedules %.1f); working tree %.1f MiB; together %.1f MiB of 64\n' \
  "$rel" "$(echo "$carry / 1048576" | bc -l)" "$(du -sb "$out/wheels" | cut -f1 | awk '{ print $1 / 1048576 }')" \
  "$(du -sb "$out/speedloader-runtime.tar.gz" | cut -f1 | awk '{ print $1 / 1048576 }')" \
  "$(du -sb "$out/schedules" | cut -f1 | awk '{ print $1 / 1048576 }')" \
  "$(echo "$tree / 1048576" | bc -l)" "$(echo "($carry + $tree) / 1048576" | bc -l)"
if [ $((carry + tree)) -ge $((62 * 1048576)) ]; then
  echo "prepare.sh: too large for one device call (64 MiB with the working tree)" >&2
  exit 1
fi
cat <<EOF

Device tool calls (kind nvidia-h100-x1 or nvidia-h200, carry ["$rel"]), back to back so that the
machine stays warm; each prints its tables last and writes peers.jsonl, tables.md, plot.png,
peers.log, logs-PART.tar.gz and machine.txt to \$OUT:

  1. PEERS_SECONDS=400 bash bench/peers/run-peers.sh train $rel          (timeout_s 480)
     expected about 7 minutes: wheels 10 s, link 15 s, DeepSpeedCPUAdam's JIT build 1-2 min,
     then ~20 s per SpeedLoader schedule and ~40-60 s per DeepSpeed or FSDP run; what does not
     fit the 400 s is recorded as skipped (the N = 2 comparison runs first)
  2. PEERS_SECONDS=280 bash bench/peers/run-peers.sh generate $rel       (timeout_s 360)
     expected about 4 minutes: ~15 s per SpeedLoader schedule (six: N = 1, 4 and N = 1 with the
     KV caches on the device, -kvdev, per model), accelerate ~40 s, FlexGen ~40 s

These durations are estimates from the H200 run of 2026-11-26 (bench/results), not measurements.
With the machine's start (~1 min) the two take about 12 of the 15 minutes; call give_back after
the second. Then, here, one table of both calls:

  PYTHONPATH=python python3 -m speedloader.peer_tables D1/peers.jsonl D2/peers.jsonl \\
      --out bench/results/peers-<gpu>-<date>.md --plot bench/results/peers-<gpu>-<date>.png
EOF
