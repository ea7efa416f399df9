#!/usr/bin/env bash
# Sets up and runs every test: installs the Debian packages, builds all
# targets (library, egressd, ccsb-run, tests, fuzz replays, benchmarks) and
# runs ctest. A test that cannot run in this environment fails; none skips.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build="${CCSB_BUILD_DIR:-build/test}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j2 --timeout 600 "$@"
