#!/usr/bin/env bash
# One device-tool call for a short GPU window (15 minutes of device time in all): the suite
# (run-gpu-suite.sh, within $SUITE_SECONDS, default 290) and then the performance part
# (run-gpu-perf.sh, within $PERF_SECONDS, default 170), so that one machine start serves both and
# enough device time is left for a second, shorter call that reruns what was fixed. From the
# repository root, carrying build-bundle (the runtime bundle and build-bundle/probes):
#
#   bash bench/gpu/run-gpu-window.sh build-bundle/speedloader-runtime.tar.gz build-bundle/probes
#
# At most 8 files come back from a call, so $OUT holds the two summaries and one tarball with
# every file of both parts (suite/ and perf/): suite-summary.txt, perf-summary.txt, window.tar.gz.
set -uo pipefail
bundle="${1:-build-bundle/speedloader-runtime.tar.gz}"
probes="${2:-build-bundle/probes}"
top="${OUT:-$PWD/gpu-window-out}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$top/suite" "$top/perf"
OUT="$top/suite" SUITE_SECONDS="${SUITE_SECONDS:-290}" bash "$here/run-gpu-suite.sh" "$bundle"
suite=$?
OUT="$top/perf" PERF_SECONDS="${PERF_SECONDS:-170}" bash "$here/run-gpu-perf.sh" "$bundle" "$probes"
perf=$?
cp "$top/suite/summary.txt" "$top/suite-summary.txt" 2>/dev/null
cp "$top/perf/perf-summary.txt" "$top/perf-summary.txt" 2>/dev/null
tar -C "$top" -czf "$top/window.tar.gz" suite perf && rm -rf "${top:?}/suite" "${top:?}/perf"
echo
echo "=== window: suite exit $suite, perf exit $perf ==="
cat "$top/suite-summary.txt" "$top/perf-summary.txt" 2>/dev/null
[ "$suite" = 0 ] && [ "$perf" = 0 ]
