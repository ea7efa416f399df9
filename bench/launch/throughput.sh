#!/usr/bin/env bash
# Throughput through a sandbox's proxy (issue 9, L3): curl inside
# `ccsb-run --profile spec` downloads SIZE from a loopback server through
# the session's HTTP proxy, against the same curl on the host directly,
# measured in the same run (medians of RUNS, interleaved so load drifts hit
# every case alike). Two proxy paths: a CONNECT tunnel (`curl -p`, what
# https uses: egressd splices) and an absolute-form request (plain http).
#   bench/launch/throughput.sh [--runs N] [--size 1G] [--baseline DIR/ccsb-run]
# BUILD_DIR (default <repo>/build) holds the build of ccsb-run, ccsb-init and egressd.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$src/build}
runs=5 size=1G baseline=
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--size 1G] [--baseline PATH/ccsb-run]" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
ccsb_run=$build/bin/ccsb-run
[ -n "$baseline" ] && baseline=$(realpath "$baseline")
[ -x "$ccsb_run" ] || { echo "no $ccsb_run: build first (cmake --build $build)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/ccsb-throughput-XXXXXX)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
truncate -s "$size" "$tmp/blob"        # sparse: the page cache serves zeros
mkdir -p "$tmp/home" "$tmp/work"
chmod 755 "$tmp"
# A root launcher runs the sandbox as the workdir's owner (L1).
[ "$(id -u)" = 0 ] && chown 65534:65534 "$tmp/home" "$tmp/work"

# The upstream: HTTP/1.1, Content-Length, sendfile(2), one thread per client.
python3 - "$tmp/blob" >"$tmp/port" <<'EOF' &
import os, socket, sys, threading
path = sys.argv[1]
size = os.path.getsize(path)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
def serve(c):
    f = c.makefile("rb")
    while True:
        line = f.readline()
        if not line or line in (b"\r\n", b"\n"): break
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
    with open(path, "rb") as fh:
        off = 0
        while off < size:
            n = os.sendfile(c.fileno(), fh.fileno(), off, size - off)
            if n <= 0: break
            off += n
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
server_pid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")

sandboxed() { # ccsb-run binary, curl options...
  local bin=$1; shift
  (cd "$tmp/work" && env -i HOME="$tmp/home" PATH=/usr/bin:/bin LANG=C "$bin" --profile spec \
    --allow blob.test --egress-opt --resolve --egress-opt blob.test=127.0.0.1 \
    --egress-opt --allow-upstream --egress-opt 127.0.0.0/8 -- \
    curl -sS -o /dev/null -w '%{speed_download}\n' "$@" "http://blob.test:$port/" 2>/dev/null)
}
declare -A samples
cases=("host" "tunnel" "absolute")
[ -n "$baseline" ] && cases+=("baseline-tunnel" "baseline-absolute")
for _ in $(seq "$runs"); do
  samples[host]+="$(curl -sS -o /dev/null -w '%{speed_download}\n' "http://127.0.0.1:$port/") "
  samples[tunnel]+="$(sandboxed "$ccsb_run" -p) "
  samples[absolute]+="$(sandboxed "$ccsb_run") "
  if [ -n "$baseline" ]; then
    samples[baseline-tunnel]+="$(sandboxed "$baseline" -p) "
    samples[baseline-absolute]+="$(sandboxed "$baseline") "
  fi
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
host_bps=$(echo "${samples[host]}" | median)
printf '%s through the proxy, %s runs each (median MB/s; ratio to the host direct)\n' "$size" "$runs"
for c in "${cases[@]}"; do
  m=$(echo "${samples[$c]}" | median)
  printf '  %-18s %8.0f MB/s   %5.2fx\n' "$c" "$(echo "$m / 1000000" | bc -l)" "$(echo "$m / $host_bps" | bc -l)"
done
