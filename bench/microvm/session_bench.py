#!/usr/bin/env python3
"""The microvm backend's cost beside the native sandbox's, in one run (X4).

Starts the real ccsbd and, through its protocol (docs/ccsbd-protocol.md),
one native and one microvm session of the same worktree, then measures each:

  * launch to ready (microvm: QEMU's boot, the guest agent, the 9p shares);
  * the exec round trip of `true` in the warm session (exec request to its
    exit event), median and min of RUNS;
  * small-file creates/s in the worktree (a writable bind: 9p in the guest)
    and bulk write and read MB/s of one file there, timed inside the session
    by the command itself, so the exec round trip is not in them.

    session_bench.py --bin-dir DIR [--runs N] [--files N] [--mbytes N]

TCG unless /dev/kvm is usable (the launch's "microvmAccel" says which).
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

SCRIPT_FILES = r'''
n=$1; s=$(date +%s%N)
i=0; while [ $i -lt $n ]; do : > small.$i; i=$((i+1)); done
e=$(date +%s%N); rm -f small.*; echo "files $(( (e - s) / 1000 ))"
'''
SCRIPT_BULK = r'''
mb=$1; s=$(date +%s%N)
dd if=/dev/zero of=bulk.bin bs=1M count=$mb conv=fsync status=none
m=$(date +%s%N)
dd if=bulk.bin of=/dev/null bs=1M status=none
e=$(date +%s%N); rm -f bulk.bin; echo "write $(( (m - s) / 1000 )) read $(( (e - m) / 1000 ))"
'''


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.ids = 0
        hello = self.next()
        assert hello.get("event") == "hello", hello

    def next(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("ccsbd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, obj):
        self.ids += 1
        obj = dict(obj, id=self.ids)
        self.sock.sendall((json.dumps(obj) + "\n").encode())
        while True:
            e = self.next()
            if e.get("id") == self.ids:
                return e

    def run(self, sid, argv):
        """exec and wait for its exit: (seconds from request to exit, stdout)."""
        t = time.monotonic()
        r = self.request({"op": "exec", "sessionId": sid, "argv": argv})
        if r.get("event") != "exec":
            raise SystemExit("exec refused: %s" % r)
        out = ""
        while True:
            e = self.next()
            if e.get("execId") != r["execId"]:
                continue
            if e["event"] == "stdout":
                out += e["data"]
            if e["event"] == "exit":
                if e.get("exitCode") != 0:
                    raise SystemExit("%s exited %s: %s" % (argv, e.get("exitCode"), e))
                return time.monotonic() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--mbytes", type=int, default=64)
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin_dir)
    accel = "kvm" if os.access("/dev/kvm", os.W_OK) else "tcg"
    base = tempfile.mkdtemp(prefix="ccsb-microvm-bench-")
    os.chmod(base, 0o755)
    work = os.path.join(base, "work")
    os.mkdir(work)
    run = os.path.join(base, "run")
    os.mkdir(run, 0o700)
    if os.geteuid() == 0:
        os.chown(work, 65534, 65534)
    sock = os.path.join(run, "ccsbd.sock")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/nonexistent", "LANG": "C"}
    log = open(os.path.join(base, "ccsbd.log"), "w")
    daemon = subprocess.Popen([os.path.join(bin_dir, "ccsbd"), "--listen", "unix:" + sock], env=env, cwd=work,
                              stderr=log)
    try:
        for _ in range(300):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        c = Client(sock)
        spec = {"workspaceId": "bench", "bindMounts": [{"hostPath": work}], "guestWorkdir": work}
        rows = {}
        for backend in ("native", "microvm"):
            sid = "bench-" + backend
            launch = {"op": "launch", "spec": dict(spec, sessionId=sid), "backend": backend}
            if backend == "microvm":
                launch["microvmAccel"] = accel
            t = time.monotonic()
            r = c.request(launch)
            ready = time.monotonic() - t
            if r.get("event") != "ready":
                raise SystemExit("%s launch failed: %s" % (backend, r))
            c.run(sid, ["true"])  # the first exec reads the binary in
            trips = [c.run(sid, ["true"])[0] for _ in range(a.runs)]
            _, out = c.run(sid, ["/bin/sh", "-c", SCRIPT_FILES, "sh", str(a.files)])
            files_us = int(out.split()[1])
            _, out = c.run(sid, ["/bin/sh", "-c", SCRIPT_BULK, "sh", str(a.mbytes)])
            w = out.split()
            rows[backend] = {
                "ready": ready,
                "exec_median": statistics.median(trips),
                "exec_min": min(trips),
                "creates": a.files / (files_us / 1e6),
                "write": a.mbytes / (int(w[1]) / 1e6),
                "read": a.mbytes / (int(w[3]) / 1e6),
            }
            c.request({"op": "destroy", "sessionId": sid})
    finally:
        daemon.terminate()
        daemon.wait(60)
        log.close()
        shutil.rmtree(base, ignore_errors=True)

    n, v = rows["native"], rows["microvm"]
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print("microvm (%s) vs native, one ccsbd, the same worktree; load average %s; %d exec runs, %d files, %d MB"
          % (accel, load, a.runs, a.files, a.mbytes))
    print("%-34s %12s %12s %9s" % ("", "native", "microvm", "ratio"))

    def row(name, key, unit, scale=1.0, fmt="%.1f"):
        nv, vv = n[key] * scale, v[key] * scale
        print("%-34s %12s %12s %8.1fx" % (name, (fmt % nv) + unit, (fmt % vv) + unit, vv / nv if nv else 0))

    row("launch to ready", "ready", " s", fmt="%.2f")
    row("exec round trip of true, median", "exec_median", " ms", 1000)
    row("exec round trip of true, min", "exec_min", " ms", 1000)
    row("small-file creates/s (bind)", "creates", "", fmt="%.0f")
    row("bulk write MB/s (bind, fsync)", "write", "")
    row("bulk read MB/s (bind)", "read", "")


if __name__ == "__main__":
    main()
