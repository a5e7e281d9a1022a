#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds, and runs every suite through
# ctest (GoogleTest, lit, pytest, the architecture checks). GPU tests skip themselves where no
# GPU is visible. This is what CI runs (.ci/run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SL_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
