#!/usr/bin/env bash
# The main job, end to end: a command runs sandboxed with its own egressd.
# It shows (1) an allowed connection through the proxy, (2) a denied one,
# reported as a violation event, (3) a denied secret read, and (4) the
# default dispatch profile being refused on plain bubblewrap (L4).
#
# Everything stays on this machine: the "allowed" site is a local web server
# that egressd is told to resolve (--resolve), and HOME is a throwaway
# directory with a fake SSH key, so no real secret is ever touched.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build="${CCSB_BUILD_DIR:-build/demo}"
echo "building ccsb-run, ccsb-init and egressd in $build ..."
mkdir -p "$build"   # the log sits next to it ($build.log); a fresh clone has no build/
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCSB_TESTS=OFF -DCCSB_BENCH=OFF &&
       cmake --build "$build" -j"$(nproc)" --target ccsb-run ccsb-init egressd; } >"$build.log" 2>&1; then
  tail -40 "$build.log"; exit 1
fi
bin="$(cd "$build/bin" && pwd)"

demo="$(mktemp -d /tmp/ccsb-demo.XXXXXX)"
cleanup() { [ -n "${web_pid:-}" ] && kill "$web_pid" 2>/dev/null; rm -rf "$demo"; }
trap cleanup EXIT
mkdir -p "$demo/home/.ssh" "$demo/work" "$demo/site"
echo "-----BEGIN OPENSSH PRIVATE KEY----- demo-secret-4711" > "$demo/home/.ssh/id_ed25519"
chmod 700 "$demo/home/.ssh"; chmod 600 "$demo/home/.ssh/id_ed25519"
echo "hello from the allowed site" > "$demo/site/index.html"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$demo/site" >/dev/null 2>&1 &
web_pid=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done

cat > "$demo/work/job.sh" <<JOB
echo "== 1. allowed: curl http://allowed.demo.test:$port/"
curl -sS --max-time 10 "http://allowed.demo.test:$port/" || echo "(failed)"
echo "== 2. denied: curl https://exfil.example.net/"
curl -sS --max-time 10 -o /dev/null "https://exfil.example.net/" || echo "(refused by egressd, as it should be)"
echo "== 3. secret: cat \$HOME/.ssh/id_ed25519"
cat "\$HOME/.ssh/id_ed25519" || echo "(read denied, as it should be)"
JOB

echo "\$ ccsb-run --profile spec --bind HOME:ro --allow allowed.demo.test --events events.jsonl -- sh job.sh"
cd "$demo/work"
HOME="$demo/home" "$bin/ccsb-run" --profile spec --bind "$demo/work" --bind "$demo/home:ro" \
  --allow allowed.demo.test \
  --egress-opt --resolve --egress-opt "allowed.demo.test=127.0.0.1" \
  --egress-opt --allow-upstream --egress-opt "127.0.0.1/32" \
  --events "$demo/events.jsonl" -- sh job.sh || true
echo
echo "== events reported by the session (violations and exit):"
grep -E '"event":"(violation|exit|ready|starting)"' "$demo/events.jsonl" || true
echo
echo "== 4. the default dispatch profile on plain bubblewrap (L4):"
HOME="$demo/home" "$bin/ccsb-run" --bind "$demo/work" -- true && echo "(unexpectedly ran)" || echo "(exit $?: refused, fail closed)"
