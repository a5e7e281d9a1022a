#!/usr/bin/env bash
# Issue 22's "7B training step with parameters and optimizer on the host in both schedule modes":
# the whole of llama2-7b (32 layers, bf16, 4 x 2048 tokens per step in 2 sub-batches), compiled
# here by make_probes.sh (step7b-speedloader.slsched, step7b-canonical.slsched), run by the
# bundled sl-run with --random-weights for 3 steps each. Parameters, gradients and the AdamW state
# live in host memory (the plan predicts about 113 GiB of it), the GPU holds one layer's working
# set (arena 1.5-2.3 GiB). From the repository root, carrying build-bundle:
#
#   bash bench/gpu/run-7b-step.sh build-bundle/speedloader-runtime.tar.gz build-bundle/probes
#
# Writes step7b-<mode>-report.json, step7b-<mode>.log and step7b.txt (its output) to $OUT; the whole stays
# within $STEP7B_SECONDS (default 300), split between the two modes.
set -uo pipefail
bundle="${1:-build-bundle/speedloader-runtime.tar.gz}"
probes="$(cd "${2:-build-bundle/probes}" && pwd)"
out="${OUT:-$PWD/gpu-7b-out}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
exec > >(tee -a "$out/step7b.txt") 2>&1
source "$here/bundle.sh"
open_bundle "$bundle" || exit 1
vocab="$(python3 -c "import json; print(json.load(open('$probes/probe.json'))['vocab'])")"
deadline=$((SECONDS + ${STEP7B_SECONDS:-300}))
free -g | head -2
status=0
modes=(speedloader canonical)
for i in "${!modes[@]}"; do
  mode="${modes[$i]}"
  # What is left, shared by the modes still to run.
  allow=$(( (deadline - SECONDS) / (${#modes[@]} - i) ))
  [ "$allow" -lt 1 ] && allow=1
  start=$SECONDS
  timeout -k 10 "$allow" "$b/bin/sl-run" "$probes/step7b-$mode.slsched" --backend "${SL_BACKEND:-cuda}" \
    --random-weights 0 --data "$probes/tokens.bin" --steps 3 --vocab "$vocab" \
    --report "$out/step7b-$mode-report.json" > "$out/step7b-$mode.log" 2>&1
  rc=$?
  tail -5 "$out/step7b-$mode.log"
  if [ "$rc" != 0 ]; then
    echo "step7b-$mode: exit $rc after $((SECONDS - start)) s (timeout $allow s)"
    status=1
    continue
  fi
  python3 - "$out/step7b-$mode-report.json" "$mode" "$((SECONDS - start))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t, plan = r["train"], r.get("plan", {})
last = t["step_seconds"][-1]
print(f"7B {sys.argv[2]:12} N {plan.get('num_sub_batches')}: steps "
      + ", ".join(f"{s:.2f}" for s in t["step_seconds"])
      + f" s; last {t['tokens_per_step'] / last:.0f} tokens/s; H2D "
      f"{t['bytes_host_to_device'][-1] / 1e9:.1f} GB, D2H {t['bytes_device_to_host'][-1] / 1e9:.1f} GB "
      f"per step; arena {r['device_arena_bytes'] / 2**30:.2f} GiB, host pool "
      f"{r['host_pool_bytes'] / 2**30:.1f} GiB, optimizer state {t['optimizer_state_bytes'] / 2**30:.1f} GiB; "
      f"load {r['load_seconds']:.1f} s, process {sys.argv[3]} s; losses "
      + ", ".join(f"{x:.4f}" for x in t.get("losses", [])))
busy = sorted(r["ops"].items(), key=lambda kv: -kv[1]["seconds"])[:5]
print("   busiest ops (s): " + ", ".join(f"{k} {v['seconds']:.3f}" for k, v in busy))
PY
done
exit "$status"
