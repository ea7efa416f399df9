#!/usr/bin/env bash
# Sets up and runs every test: installs the Debian packages, builds all
# targets (library, egressd, ccsb-run, tests, fuzz replays, benchmarks) and
# runs ctest. A test that cannot run in this environment fails; none skips.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build="${CCSB_BUILD_DIR:-build/test}"
# A compile cache for the builds the tests make again: the fresh-clone test
# (the demo builds ccsb-run, ccsb-init and egressd from a clone below this
# build directory) compiles the same sources with the same flags. ccache
# answers those from this run's own cache (in the build directory, so a new
# machine starts cold and nothing is shared between checkouts). Paths below
# this checkout are made relative (CCACHE_BASEDIR), so a clone placed below
# it hits. CMake takes the launcher from the environment for every build it
# configures, nested ones included.
mkdir -p "$build"
export CCACHE_DIR="${CCACHE_DIR:-$(cd "$build" && pwd)/ccache}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=file_macro,time_macros
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j2 --timeout 600 "$@"
