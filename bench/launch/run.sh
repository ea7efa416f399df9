#!/usr/bin/env bash
# Launch benchmark: bare true vs bwrap vs ccsb-run vs sandbox-runtime (srt).
#   bench/launch/run.sh [launch_bench options, e.g. --runs 30]
# BUILD_DIR (default: <repo>/build) holds the build and, under
# bench-launch/npm, the srt npm package (never committed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$src/build}

bash "$src/scripts/install-deps.sh"            # bubblewrap, ripgrep, ...
# srt's Linux backend bridges its proxies with socat (ccsb needs none, L3:
# so it is installed for this benchmark only, never by install-deps.sh).
if ! command -v socat >/dev/null; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -q && $sudo apt-get install -y -q socat
fi
cmake -S "$src" -B "$build" >/dev/null
cmake --build "$build" -j2 --target launch_bench ccsb-run ccsb-init egressd

# sandbox-runtime from the npm registry (through npm's configured registry),
# into a local prefix inside the build dir.
prefix="$build/bench-launch/npm"
pkg="$prefix/node_modules/@anthropic-ai/sandbox-runtime"
if [ ! -f "$pkg/package.json" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error @anthropic-ai/sandbox-runtime
fi
# The CLI's name comes from the package's "bin" field.
bin_name=$(node -e 'const b=require(process.argv[1]).bin; console.log(typeof b==="string"?"srt":Object.keys(b)[0])' "$pkg/package.json")
srt="$prefix/node_modules/.bin/$bin_name"
echo "srt: $srt ($(node -p 'require(process.argv[1]).version' "$pkg/package.json"), node $(node --version))"

exec "$build/bin/launch_bench" --srt "$srt" "$@"
