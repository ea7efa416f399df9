#!/usr/bin/env bash
# The microvm backend's cost (X4, docs/microvm.md), side by side in one run:
#   1. session_bench.py: one ccsbd, a native and a microvm session of the same
#      worktree: launch to ready, the exec round trip of `true` in the warm
#      session, small-file creates/s and bulk write/read MB/s in the bind
#      (9p in the guest), with the microvm/native ratios;
#   2. `ccsb-run -- true` with the native backend and with --backend microvm
#      (boot, one exec, poweroff), medians of RUNS, interleaved so load
#      drifts hit both alike; and `uname -r` in the guest.
# TCG here unless /dev/kvm is usable (CCSB_MICROVM_ACCEL=tcg is set for the
# run: the figures say which).
#   bench/microvm/run.sh [RUNS]        BUILD_DIR (default <repo>/build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${BUILD_DIR:-$src/build}" && pwd)
runs=${1:-5}
bin="$build/bin"
[ -x "$bin/ccsb-run" ] && [ -x "$bin/ccsbd" ] && [ -f "$bin/guest/manifest" ] ||
  { echo "bench/microvm: build ccsb-run, ccsbd, ccsb-init, egressd and ccsb-guest-image in $build first" >&2; exit 1; }
accel=kvm
[ -w /dev/kvm ] || { accel=tcg; export CCSB_MICROVM_ACCEL=tcg; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ "$(id -u)" -ne 0 ] || chown 65534:65534 "$work"
python3 "$here/session_bench.py" --bin-dir "$bin" --runs "$((runs * 4))"
echo
cd "$work"
now() { date +%s.%N; }
native=() vm=()
for _ in $(seq "$runs"); do
  t=$(now); HOME=/nonexistent "$bin/ccsb-run" --quiet -- true 2>/dev/null; native+=("$(echo "$(now) - $t" | bc)")
  t=$(now); HOME=/nonexistent "$bin/ccsb-run" --quiet --backend microvm -- true 2>/dev/null; vm+=("$(echo "$(now) - $t" | bc)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "runs: $runs, accelerator: $accel, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ccsb-run -- true, native:                 median $(median "${native[@]}") s"
echo "ccsb-run --backend microvm -- true:       median $(median "${vm[@]}") s (boot, exec, poweroff)"
echo "guest kernel: $(HOME=/nonexistent "$bin/ccsb-run" --quiet --backend microvm -- uname -r 2>/dev/null), host: $(uname -r)"
