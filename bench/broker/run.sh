#!/usr/bin/env bash
# X1 broker cost, side by side in one run: the same work under
# `--profile spec` and the default dispatch profile. Since issue 26 the spec
# profile runs the broker too (every rule but the P7 names), so the ratio
# is the cost of the P7 names alone; the broker's whole cost shows by
# running this script against an older BIN_DIR (e.g. a build of 3b8ba0b,
# whose spec profile has no broker) next to the current one.
#   bench/broker/run.sh BIN_DIR [ROUNDS]
# Prints wall seconds (best of ROUNDS) per profile and the ratio
# dispatch/spec for: extracting a tarball of 10,000 small files, checking
# out a repository of 3,000 files, and compiling a few C++ files.
# Targets (issue 8): <= 1.3x for the first two, <= 1.05x for the last.
# The time is the work's own, taken inside the sandbox around it (bash's
# EPOCHREALTIME): the launch is launch_bench's subject, and the previous
# round's output is removed on the host before each run, untimed (an
# `rm -rf` inside would time 10,000 brokered unlinks that no extraction
# makes).
# Then the per-call latency (p50/p99 µs of 5,000 calls, call_latency.c) of
# openat(O_CREAT) and of a Unix-socket connect, both brokered in dispatch,
# and of a read-only openat (never brokered), per profile; and the
# mechanism's floor on the host (notify_floor.c): an openat(O_CREAT) with no
# filter, notified and answered CONTINUE, and notified and performed by a
# supervisor that checks and resolves nothing.
set -euo pipefail
bin=$(cd "${1:?BIN_DIR}" && pwd) # absolute: the runs cd into the work dir
rounds=${2:-3}
# CCSB_BENCH_DIR: where the work dir goes (default /tmp); a tmpfs there
# takes the file system's own allocation cost out of the comparison.
work=$(mktemp -d "${CCSB_BENCH_DIR:-/tmp}/ccsb-bench-broker-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/cpp"
for i in $(seq 1 10000); do printf 'f%d\n' "$i" > "$work/src/f$i.txt"; done
tar -C "$work/src" -cf "$work/files.tar" .
for i in 1 2 3 4; do
  printf '#include <string>\n#include <vector>\n#include <map>\nstd::map<std::string,std::vector<int>> f%d(){return {{"a",{1,2}}};}\n' "$i" > "$work/cpp/u$i.cpp"
done
# A bare repository of 3,000 files, checked out into a fresh directory
# (--work-tree: no .git entry is created below the root, which X1 refuses).
mkdir -p "$work/seed" && for i in $(seq 1 3000); do printf 'line %d\n' "$i" > "$work/seed/s$i.c"; done
git -C "$work/seed" init -q && git -C "$work/seed" add . &&
  git -C "$work/seed" -c user.name=b -c user.email=b@b commit -qm seed && git clone -q --bare "$work/seed" "$work/repo.git"
rm -rf "$work/seed"
if [ "$(id -u)" = 0 ]; then chown -R 65534:65534 "$work"; fi
once() { # profile prep script -> seconds the script took inside the sandbox
  (cd "$work" && eval "$2")
  if [ "$(id -u)" = 0 ]; then chown -R 65534:65534 "$work"; fi
  local out
  out=$(cd "$work" && "$bin/ccsb-run" --profile "$1" --bind "$work" -- bash -c \
    "t0=\$EPOCHREALTIME; $3; s=\$?; t1=\$EPOCHREALTIME; echo @@t=\$t0,\$t1,\$s" 2>/dev/null) || true
  local t
  t=$(printf '%s\n' "$out" | sed -n 's/^@@t=//p')
  case "$t" in
  *,*,0) echo "$t" | awk -F, '{print $2-$1}' ;;
  *) echo "run failed under --profile $1: $3" >&2; exit 1 ;;
  esac
}
row() { # name prep script: rounds interleaved (spec, dispatch, spec, ...), best of each
  # Interleaved because on ext4 a creation right after many deletions is slow
  # (the inode allocator skips recently deleted inodes, recently_deleted() in
  # perf): whichever profile ran second paid for the first one's deletions.
  local s=999999 d=999999 x
  for _ in $(seq 1 "$rounds"); do
    x=$(once spec "$2" "$3"); s=$(echo "$x $s" | awk '{print ($1<$2)?$1:$2}')
    x=$(once dispatch "$2" "$3"); d=$(echo "$x $d" | awk '{print ($1<$2)?$1:$2}')
  done
  printf '%-23s spec %8.3f s   dispatch %8.3f s   ratio %.3f\n' "$1" "$s" "$d" "$(echo "$d $s" | awk '{print $1/$2}')"
}
row "tar x 10000 files" "rm -rf out && mkdir out" "tar -C out -xf files.tar"
row "git checkout 3000 files" "rm -rf co && mkdir co" "git --git-dir=repo.git --work-tree=co checkout -f HEAD -- ."
row "c++ -c 4 files" "rm -f cpp/*.o" "cd cpp && for f in u*.cpp; do c++ -O1 -c \$f -o \${f%.cpp}.o; done"
cp "$bin/call_latency" "$work/call_latency" # inside the sandbox only the bound work dir is visible
lat() { # profile -> "name p50 p99" lines
  rm -rf "$work/lat" && mkdir "$work/lat"
  if [ "$(id -u)" = 0 ]; then chown 65534:65534 "$work/lat"; fi
  (cd "$work" && "$bin/ccsb-run" --profile "$1" --bind "$work" -- "$work/call_latency" "$work/lat" 5000 2>/dev/null)
}
ls=$(lat spec)
ld=$(lat dispatch)
printf '%-14s %12s %12s %14s %14s %8s\n' call "spec p50" "spec p99" "dispatch p50" "dispatch p99" "p50 x"
paste <(echo "$ls") <(echo "$ld") | awk '{printf "%-14s %9.2f us %9.2f us %11.2f us %11.2f us %7.2fx\n", $1, $2, $3, $5, $6, $5/$2}'
mkdir -p "$work/floor"
echo "floor (host, notify_floor.c; p50 / p99 of 5,000 openat(O_CREAT)):"
"$bin/notify_floor" "$work/floor" 5000 | awk '{printf "  %-9s %8.2f us %8.2f us\n", $1, $2, $3}'
