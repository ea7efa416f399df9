#!/usr/bin/env bash
# The main job, end to end: a command runs sandboxed with its own egressd.
# It shows, under the default dispatch profile: (1) an allowed connection
# through the proxy, (2) a denied one, reported as a violation event, (3) a
# denied secret read, and (4) a denied creation of a *.pem file inside the
# writable worktree (P7, enforced by the creation-rule broker, X1), reported
# as a file-write-create violation, while an ordinary file is written.
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
echo "== 4. creation rules: echo key > server.pem; echo notes > notes.txt"
echo key > server.pem || echo "(creation denied, as it should be)"
echo notes > notes.txt && echo "(notes.txt written)"
JOB

# A root launcher runs the sandbox as the worktree's owner, never as host
# root (L1): as root, hand the demo worktree to nobody, as a server would hand
# a worktree to its agent user.
if [ "$(id -u)" -eq 0 ]; then chmod 755 "$demo"; chown -R 65534:65534 "$demo/work"; fi

echo "\$ ccsb-run --bind HOME:ro --allow allowed.demo.test --events events.jsonl -- sh job.sh"
cd "$demo/work"
HOME="$demo/home" "$bin/ccsb-run" --bind "$demo/work" --bind "$demo/home:ro" \
  --allow allowed.demo.test \
  --egress-opt --resolve --egress-opt "allowed.demo.test=127.0.0.1" \
  --egress-opt --allow-upstream --egress-opt "127.0.0.1/32" \
  --events "$demo/events.jsonl" -- sh job.sh || true
echo
echo "== events reported by the session (violations and exit):"
grep -E '"event":"(violation|exit|ready|starting)"' "$demo/events.jsonl" || true
echo
echo "== on the host afterwards: ls work/"
ls "$demo/work"
