#!/usr/bin/env bash
# Sets up and runs every test: installs the Debian packages, builds all
# targets (library, egressd, ccsb-run, tests, fuzz replays, benchmarks) and
# runs ctest. Tests that cannot run in this environment fail (CCSB_MUST_WORK).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build="${CCSB_BUILD_DIR:-build/test}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$(nproc)"
cd "$build"
CCSB_MUST_WORK=1 ctest --output-on-failure -j2 --timeout 600 "$@"
