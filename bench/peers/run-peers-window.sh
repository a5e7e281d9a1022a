#!/usr/bin/env bash
# Both parts of the peer comparison (issue 23) in one device-tool call, for a window too short for
# two calls and their gaps: run-peers.sh train, then run-peers.sh generate, each in its own budget
# ($TRAIN_SECONDS, default 320; $GENERATE_SECONDS, default 240), from the repository root,
# carrying build-peers/carry:
#
#   bash bench/peers/run-peers-window.sh [CARRY]        (timeout_s 600)
#
# At most 8 files come back from a call, so $OUT holds train-peers.jsonl, generate-peers.jsonl,
# tables.md and plot.png (of both parts) and peers-window.tar.gz (each part's log, machine.txt and
# run logs).
set -uo pipefail
carry="${1:-build-peers/carry}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="${OUT:-$PWD/peers-out}"
mkdir -p "$top/train" "$top/generate"
OUT="$top/train" PEERS_SECONDS="${TRAIN_SECONDS:-320}" bash "$here/run-peers.sh" train "$carry"
OUT="$top/generate" PEERS_SECONDS="${GENERATE_SECONDS:-240}" bash "$here/run-peers.sh" generate "$carry"
cp "$top/train/peers.jsonl" "$top/train-peers.jsonl" 2>/dev/null
cp "$top/generate/peers.jsonl" "$top/generate-peers.jsonl" 2>/dev/null
PYTHONPATH="$here/../../python:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" python3 -m speedloader.peer_tables \
  "$top"/train-peers.jsonl "$top"/generate-peers.jsonl --out "$top/tables.md" --plot "$top/plot.png"
tar -C "$top" -czf "$top/peers-window.tar.gz" train generate && rm -rf "${top:?}/train" "${top:?}/generate"
cat "$top/tables.md" 2>/dev/null
