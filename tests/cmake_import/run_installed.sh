#!/usr/bin/env bash
# ctest driver: installs the build (cmake --install) into a scratch prefix and
# runs the INSTALLED ccsb-run end to end, so the test fails when an install
# rule is missing (issue 7 item 19: egressd was not installed).
#   run_installed.sh <cmake> <ccsb build dir> <scratch dir>
#
# The job inside the sandbox makes one allowed and one denied HTTP fetch
# (curl --fail: egressd answers a denial with 403) through the installed
# egressd (N1). Both names resolve to a local web server
# (egressd's --resolve), so only the allowlist tells them apart; the denied one
# must fail, never reach the server, and be reported as a violation event
# (N7, S5).
set -euo pipefail
cmake="$1" bin_dir="$2" work="$3"
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/home" "$work/job" "$work/site"
prefix="$work/prefix"
"$cmake" --install "$bin_dir" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }

# ccsb-run finds its helpers next to itself unless told otherwise; make sure
# nothing from the caller's environment points elsewhere (the build tree).
unset CCSB_EGRESSD CCSB_INIT
run="$prefix/bin/ccsb-run"
[ -x "$run" ] || fail "cmake --install did not install $run"

# The upstream: a web server on 127.0.0.1 that prints its port once it listens
# (no polling; EOF if it dies first) and logs every request it serves.
body="hello from the installed egressd $$"
echo "$body" >"$work/site/index.html"
coproc WEB {
  exec python3 -u -c '
import functools, http.server, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
print(s.server_address[1])
s.serve_forever()
' "$work/site" 2>"$work/server.log"
}
web_pid=$WEB_PID
trap 'kill "$web_pid" 2>/dev/null || true' EXIT
port=""
read -r port <&"${WEB[0]}" || true
[ -n "$port" ] || { cat "$work/server.log" >&2; fail "the local web server did not start"; }

cat >"$work/job/job.sh" <<JOB
curl -fsS --max-time 60 -o allowed.out "http://allowed.pkg.test:$port/index.html" 2>allowed.err
echo "allowed rc=\$?"
curl -fsS --max-time 60 -o denied.out "http://denied.pkg.test:$port/index.html" 2>denied.err
echo "denied rc=\$?"
JOB

# A root launcher runs the sandbox as the job directory's owner, never as
# host root (L1): hand it to nobody, as a server hands a worktree to its agent.
if [ "$(id -u)" -eq 0 ]; then chown -R 65534:65534 "$work/job"; fi
cd "$work/job"
set +e
HOME="$work/home" "$run" --profile spec --bind "$work/job" \
  --allow allowed.pkg.test \
  --egress-opt --resolve --egress-opt "allowed.pkg.test=127.0.0.1" \
  --egress-opt --resolve --egress-opt "denied.pkg.test=127.0.0.1" \
  --egress-opt --allow-upstream --egress-opt "127.0.0.1/32" \
  --events "$work/events.jsonl" -- sh job.sh >"$work/run.out" 2>"$work/run.err"
rc=$?
set -e
echo "--- ccsb-run exit $rc, stdout:"; cat "$work/run.out"
echo "--- stderr:"; cat "$work/run.err"
echo "--- events:"; cat "$work/events.jsonl" 2>/dev/null || true
echo "--- inside: allowed.err / denied.err:"; cat allowed.err denied.err 2>/dev/null || true
echo "--- upstream requests:"; cat "$work/server.log"

[ "$rc" -eq 0 ] || fail "the installed ccsb-run exited $rc"
grep -qx "allowed rc=0" "$work/run.out" || fail "the allowed fetch failed"
[ "$(cat allowed.out)" = "$body" ] || fail "the allowed fetch returned another body"
grep -q "^denied rc=0$" "$work/run.out" && fail "the denied fetch succeeded"
grep -qE "^denied rc=[0-9]+$" "$work/run.out" || fail "the job did not run its denied fetch"
! grep -qF "$body" denied.out 2>/dev/null || fail "the denied fetch got the body"
[ "$(grep -c '"GET /index.html' "$work/server.log")" -eq 1 ] ||
  fail "the upstream must see exactly one request (the allowed one)"
grep '"event":"violation"' "$work/events.jsonl" | grep -q "\"target\":\"denied.pkg.test:$port\"" ||
  fail "no violation event for denied.pkg.test:$port"
if grep '"event":"violation"' "$work/events.jsonl" | grep -q 'allowed.pkg.test'; then
  fail "the allowed connection was reported as a violation"
fi
echo "installed ccsb-run ok"
