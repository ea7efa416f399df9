#!/usr/bin/env bash
# ctest driver: runs the README's first command on a fresh clone.
#   run_demo.sh <ccsb source dir (a git checkout)>
# Asserts on the demo's stable markers, the "== 1. allowed", "== 2. denied",
# "== 3. secret" and "== 4. creation rules" sections, not on its exact
# wording elsewhere.
set -euo pipefail
src="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }

head=$(git -C "$src" rev-parse HEAD) || fail "$src is not a git checkout"
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "note: $src has uncommitted changes; they are not part of this test (a clone has only HEAD $head)"
fi
# The clone goes below the working directory (ctest's: this test's build
# directory), inside the checkout scripts/test.sh made its compile cache's
# base, so the demo's build of the same sources is answered from that cache.
tmp=$(mktemp -d "$PWD/ccsb-fresh-clone.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git clone --quiet "$src" "$tmp/ccsb" || fail "git clone $src failed"
[ "$(git -C "$tmp/ccsb" rev-parse HEAD)" = "$head" ] || fail "the clone is not at $head"
[ ! -e "$tmp/ccsb/build" ] || fail "a fresh clone must not contain build/"

# The command exactly as the README gives it, with nothing from the caller's
# environment that changes where the demo builds.
cd "$tmp/ccsb"
set +e
env -u CCSB_BUILD_DIR bash scripts/demo.sh >"$tmp/demo.out" 2>&1
rc=$?
set -e
echo "--- bash scripts/demo.sh on a fresh clone of $head: exit $rc"
cat "$tmp/demo.out"
echo "---"

# section N: from the line starting "== N." up to the next "== " line.
section() { awk -v n="== $1." 'index($0, "== ") == 1 { on = (index($0, n) == 1) } on' "$tmp/demo.out"; }
events() { awk 'index($0, "== ") == 1 { on = (index($0, "== events") == 1) } on' "$tmp/demo.out"; }

[ "$rc" -eq 0 ] || fail "bash scripts/demo.sh exited $rc"
s1=$(section 1) s2=$(section 2) s3=$(section 3) ev=$(events)
[[ "$s1" == "== 1. allowed"* ]] || fail "no '== 1. allowed' section"
[[ "$s2" == "== 2. denied"* ]] || fail "no '== 2. denied' section"
[[ "$s3" == "== 3. secret"* ]] || fail "no '== 3. secret' section"
grep -qx "hello from the allowed site" <<<"$s1" || fail "1: the allowed fetch did not return the page"
grep -q "refused by egressd" <<<"$s2" || fail "2: the denied connection was not refused"
grep '"event":"violation"' <<<"$ev" | grep -q '"target":"exfil.example.net:443"' ||
  fail "2: no violation event for the denied connection"
grep -q "read denied" <<<"$s3" || fail "3: the secret read was not denied"
! grep -q "demo-secret-4711" "$tmp/demo.out" || fail "3: the secret leaked"
s4=$(section 4)
[[ "$s4" == "== 4. creation rules"* ]] || fail "no '== 4. creation rules' section"
grep -q "creation denied" <<<"$s4" || fail "4: server.pem was created (P7/X1)"
grep -q "notes.txt written" <<<"$s4" || fail "4: an ordinary file could not be written"
grep '"event":"violation"' <<<"$ev" | grep '"action":"file-write-create"' | grep -q 'server.pem' ||
  fail "4: no file-write-create violation for server.pem"
echo "fresh clone demo ok"
