#!/usr/bin/env python3
"""S8: the real ccsbd, driven by a client in another language (this one).

Each case starts its own ccsbd on a socket in a fresh directory, with a
worktree owned by uid 65534 when the test runs as root (L1: a root launcher
runs the sandbox as the worktree's owner), and speaks the protocol of
docs/ccsbd-protocol.md to it with the real bwrap, ccsb-init and egressd.

    ccsbd_test.py --bin-dir DIR CASE

A case that cannot run (no root for the peer test, no bwrap, a daemon that
does not start) fails; nothing is skipped.
"""

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

SANDBOX_UID = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # reachable by uid 65534 (a pyenv shim under /root is not)


class Failure(Exception):
    pass


def check(cond, what, *context):
    if not cond:
        raise Failure(what + "".join("\n  " + str(c) for c in context))


class Client:
    """One connection: request lines out, reply and event lines in."""

    def __init__(self, path, hello=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.seen = []  # every line received, parsed
        if hello:
            h = self.next(10)
            check(h["event"] == "hello" and h["protocol"] == 1, "the first line is hello, protocol 1", h)
            self.hello = h

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw((json.dumps(obj) + "\n").encode())

    def next(self, timeout=30):
        """The next line as a dict; None at EOF."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            check(left > 0, "no line from ccsbd within %ss" % timeout, self.seen[-5:])
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        obj = json.loads(line.decode("utf-8"))
        self.seen.append(obj)
        return obj

    def until(self, pred, timeout=60):
        """Lines up to and including the first that satisfies pred."""
        got = []
        end = time.monotonic() + timeout
        while True:
            e = self.next(max(0.1, end - time.monotonic()))
            check(e is not None, "ccsbd closed the connection", got[-5:])
            got.append(e)
            if pred(e):
                return got

    def request(self, obj, timeout=60):
        """Sends obj with a fresh id and returns (its direct reply, the lines before it)."""
        rid = "r-" + secrets.token_hex(4)
        obj = dict(obj, id=rid)
        self.send(obj)
        got = self.until(lambda e: e.get("id") == rid, timeout)
        return got[-1], got[:-1]


class Fixture:
    def __init__(self, bin_dir):
        self.bin_dir = bin_dir
        self.base = tempfile.mkdtemp(prefix="ccsbd-test-")
        os.chmod(self.base, 0o755)
        self.work = os.path.join(self.base, "work")
        os.mkdir(self.work)
        os.mkdir(os.path.join(self.work, "sub"))
        if os.geteuid() == 0:
            for d in (self.work, os.path.join(self.work, "sub")):
                os.chown(d, SANDBOX_UID, SANDBOX_UID)
        self.sock = os.path.join(self.base, "ccsbd.sock")
        self.log_path = os.path.join(self.base, "ccsbd.log")
        self.proc = None

    def start(self, extra=()):
        exe = os.path.join(self.bin_dir, "ccsbd")
        check(os.access(exe, os.X_OK), "ccsbd is built at " + exe)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [exe, "--listen", "unix:" + self.sock, "--no-path-toolchains", *extra],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            check(self.proc.poll() is None, "ccsbd exited at start-up", self.log())
            if "listening on unix:" in self.log():
                return
            time.sleep(0.05)
        raise Failure("ccsbd did not listen within 30 s\n" + self.log())

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()

    def client(self, hello=True):
        return Client(self.sock, hello)

    def spec(self, sid=None):
        return {"sessionId": sid or "d-" + secrets.token_hex(6), "workspaceId": "ccsbd-test",
                "bindMounts": [{"hostPath": self.work}], "guestWorkdir": self.work}

    def launch(self, c, profile="spec", sid=None):
        spec = self.spec(sid)
        reply, before = c.request({"op": "launch", "spec": spec, "profile": profile}, timeout=120)
        check(reply["event"] == "ready", "launch -> ready", reply, self.log())
        check(reply["sessionId"] == spec["sessionId"], "ready names the session", reply)
        check(reply["handle"]["state"] == "warm" and reply["handle"]["backend"] == "native",
              "the handle is warm and native", reply["handle"])
        check(any(e["event"] == "starting" for e in before), "a starting event came first", before)
        return spec["sessionId"], reply["handle"]

    def stop_daemon(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stop(self):
        self.stop_daemon()
        shutil.rmtree(self.base, ignore_errors=True)


def exec_and_wait(c, sid, argv, timeout=60, **extra):
    """exec, then its events up to its exit: (execId, stdout, stderr, exit code, all its events)."""
    reply, _ = c.request(dict({"op": "exec", "sessionId": sid, "argv": argv}, **extra))
    check(reply["event"] == "exec", "exec -> exec reply with an execId", reply)
    x = reply["execId"]
    evs = [e for e in c.until(lambda e: e.get("execId") == x and e["event"] == "exit", timeout) if e.get("execId") == x]
    out = "".join(e["data"] for e in evs if e["event"] == "stdout")
    err = "".join(e["data"] for e in evs if e["event"] == "stderr")
    return x, out, err, evs[-1]["exitCode"], evs


def expect_error(reply, field, code=None):
    check(reply["event"] == "error", "an error reply", reply)
    check(reply["error"]["field"] == field, "the error names field %r" % field, reply)
    if code:
        check(reply["error"]["code"] == code, "the error code is %s" % code, reply)


# --- process tree helpers --------------------------------------------------

def proc_stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    rest = s[s.rindex(")") + 2:].split()
    return comm, int(rest[1]), rest[19]  # comm, ppid, starttime


def descendants(root):
    """(pid, comm, starttime) of every process below root."""
    table = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st:
                table[int(d)] = st
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for pid, (comm, ppid, start) in table.items():
            if ppid == p:
                out.append((pid, comm, start))
                todo.append(pid)
    return out


def alive(entries):
    left = []
    for pid, comm, start in entries:
        st = proc_stat(pid)
        if st and st[2] == start and not st[0].startswith("<defunct"):
            try:
                with open("/proc/%d/status" % pid) as f:
                    if "\nState:\tZ" in f.read():
                        continue
            except FileNotFoundError:  # it exited between the two reads
                continue
            left.append((pid, comm))
    return left


# --- cases ---------------------------------------------------------------------

def case_sessions(fx):
    """launch, sequential execs, two concurrent execs with their own events, handle, destroy."""
    c = fx.client()
    check(c.hello["startup"].startswith("agent sandbox ON"), "hello carries the B4 line", c.hello)
    sid, _ = fx.launch(c)
    ids = []
    x, out, err, code, _ = exec_and_wait(c, sid, ["/bin/sh", "-c", "echo one; id -u"])
    check(code == 0 and out.startswith("one\n"), "first exec", out, err)
    if os.geteuid() == 0:
        check(out.split()[1] == str(SANDBOX_UID), "the sandbox runs as the worktree's owner", out)
    else:
        check(out.split()[1] == str(os.geteuid()), "an unprivileged launcher's sandbox runs as itself", out)
    ids.append(x)
    x, out, err, code, _ = exec_and_wait(c, sid, ["/bin/sh", "-c", "echo two >&2; exit 7"])
    check(code == 7 and err == "two\n" and out == "", "second exec: stderr and its exit code", out, err, code)
    ids.append(x)
    x, out, err, code, _ = exec_and_wait(c, sid, ["/bin/sh", "-c", 'pwd; echo "$GREETING"'],
                                         workdir=os.path.join(fx.work, "sub"), env={"GREETING": "hello"})
    check(code == 0 and out == os.path.join(fx.work, "sub") + "\nhello\n", "workdir and env of an exec", out, err)
    ids.append(x)
    check(ids == sorted(ids) and len(set(ids)) == 3, "execIds are distinct and increasing", ids)

    # Two at once: both start before either ends, each with its own events.
    script = "echo %s-start; sleep 1; echo %s-end"
    c.send({"op": "exec", "id": "A", "sessionId": sid, "argv": ["/bin/sh", "-c", script % ("A", "A")]})
    c.send({"op": "exec", "id": "B", "sessionId": sid, "argv": ["/bin/sh", "-c", script % ("B", "B")]})
    replies = {}
    evs = []

    def take(e):
        if e["event"] == "exec":
            check(e["execId"] not in [v.get("execId") for v in evs], "the exec reply precedes its events", e, evs)
            replies[e["id"]] = e["execId"]
        else:
            evs.append(e)
        return len(replies) == 2 and sum(1 for v in evs if v["event"] == "exit") == 2

    c.until(take, 60)
    xa, xb = replies["A"], replies["B"]
    check(xa != xb, "concurrent execs have their own execIds", replies)
    for name, x in (("A", xa), ("B", xb)):
        mine = "".join(e["data"] for e in evs if e.get("execId") == x and e["event"] == "stdout")
        check(mine == "%s-start\n%s-end\n" % (name, name), "exec %s has only its own output" % name, mine, evs)
    starts = [i for i, e in enumerate(evs) if e["event"] == "stdout" and "-start" in e["data"]]
    first_exit = min(i for i, e in enumerate(evs) if e["event"] == "exit")
    check(len(starts) == 2 and max(starts) < first_exit, "both ran at the same time", evs)

    # E3 holds for additions: a refused variable is named.
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["true"], "env": {"LD_PRELOAD": "/x.so"}})
    expect_error(reply, "env.LD_PRELOAD", "invalid_argument")
    reply, _ = c.request({"op": "handle", "sessionId": sid})
    check(reply["event"] == "handle" and reply["handle"]["state"] == "warm", "handle op", reply)
    # S7: suspend freezes where the host offers a freezer (cgroup v2) and is
    # a typed error elsewhere; either way the answer is exact.
    reply, _ = c.request({"op": "suspend", "sessionId": sid})
    if reply["event"] == "error":
        expect_error(reply, "suspend", "unsupported")
        check("freezer" in reply["error"]["message"], "the refusal says why", reply)
        reply, _ = c.request({"op": "resume", "sessionId": sid})
        expect_error(reply, "session", "illegal_transition")
    else:
        check(reply["event"] == "handle" and reply["handle"]["state"] == "suspended", "suspend", reply)
        reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["true"]})
        expect_error(reply, "session", "illegal_transition")
        reply, _ = c.request({"op": "resume", "sessionId": sid})
        check(reply["event"] == "handle" and reply["handle"]["state"] == "warm", "resume", reply)
    _, out, _, code, _ = exec_and_wait(c, sid, ["echo", "still"])
    check(code == 0 and out == "still\n", "the session serves after suspend/resume", out)
    reply, _ = c.request({"op": "destroy", "sessionId": sid}, timeout=60)
    check(reply["event"] == "handle" and reply["handle"]["state"] == "destroyed", "destroy", reply)
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["true"]})
    expect_error(reply, "sessionId", "invalid_argument")


def case_io(fx):
    """stdin (streamed and given with the exec), kill, timeout, a pseudo-terminal and resize."""
    c = fx.client()
    sid, _ = fx.launch(c)
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["cat"]})
    x = reply["execId"]
    reply, _ = c.request({"op": "stdin", "sessionId": sid, "execId": x, "data": "abc\n"})
    check(reply["event"] == "ok" and reply["execId"] == x, "stdin -> ok", reply)
    c.until(lambda e: e.get("execId") == x and e["event"] == "stdout" and "abc" in e["data"])
    reply, _ = c.request({"op": "stdin", "sessionId": sid, "execId": x, "eof": True})
    check(reply["event"] == "ok", "eof -> ok", reply)
    end = c.until(lambda e: e.get("execId") == x and e["event"] == "exit")
    check(end[-1]["exitCode"] == 0, "cat ends at end of input", end)
    reply, _ = c.request({"op": "stdin", "sessionId": sid, "execId": x, "data": "late"})
    expect_error(reply, "execId")

    _, out, _, code, _ = exec_and_wait(c, sid, ["wc", "-l"], stdin="l1\nl2\nl3\n")
    check(code == 0 and out.strip() == "3", "stdin given with the exec, then end of input", out)

    # Killed once it runs ("up"): a kill that overtakes the command's own
    # start is ccsb-init's business, not the protocol's.
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["/bin/sh", "-c", "echo up; exec sleep 60"]})
    x = reply["execId"]
    c.until(lambda e: e.get("execId") == x and e["event"] == "stdout")
    reply, before = c.request({"op": "kill", "sessionId": sid, "execId": x})
    check(reply["event"] == "ok", "kill -> ok", reply)
    evs = [e for e in before + c.until(lambda e: e.get("execId") == x and e["event"] == "exit", 30)
           if e.get("execId") == x]
    check([e["event"] for e in evs][-2:] == ["killed", "exit"] and evs[-2]["reason"] == "stop"
          and evs[-1]["exitCode"] == 137, "kill: killed (stop), then exit 137", evs)

    t0 = time.monotonic()
    _, _, _, code, evs = exec_and_wait(c, sid, ["sleep", "60"], timeoutMs=500, timeout=30)
    check(code == 137 and any(e["event"] == "killed" and e["reason"] == "timeout" for e in evs),
          "timeoutMs: killed (timeout), exit 137", evs)
    check(time.monotonic() - t0 < 20, "the timeout fired in time")

    _, out, _, code, _ = exec_and_wait(c, sid, ["/bin/sh", "-c", "tty; stty size"], pty={"rows": 30, "cols": 100})
    check(code == 0 and "/dev/pts/" in out and "30 100" in out, "pty: a terminal of the asked size", out)
    # Resized once it runs ("up"): the session takes input and sizes for a
    # terminal only after the supervisor handed its master back.
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["/bin/sh", "-c", "echo up; read x; stty size"],
                          "pty": {"rows": 24, "cols": 80}})
    x = reply["execId"]
    c.until(lambda e: e.get("execId") == x and e["event"] == "stdout" and "up" in e["data"])
    reply, _ = c.request({"op": "resize", "sessionId": sid, "execId": x, "rows": 40, "cols": 120})
    check(reply["event"] == "ok", "resize -> ok", reply)
    c.request({"op": "stdin", "sessionId": sid, "execId": x, "data": "go\r"})
    evs = [e for e in c.until(lambda e: e.get("execId") == x and e["event"] == "exit") if e.get("execId") == x]
    out = "".join(e["data"] for e in evs if e["event"] == "stdout")
    check("40 120" in out, "resize reached the terminal", out)
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["sleep", "5"]})
    reply, _ = c.request({"op": "resize", "sessionId": sid, "execId": reply["execId"], "rows": 10, "cols": 10})
    expect_error(reply, "pty")
    c.request({"op": "destroy", "sessionId": sid})


def case_violation(fx):
    """dispatch profile: creating a .pem is denied, reported as a violation carrying the execId."""
    c = fx.client()
    sid, _ = fx.launch(c, profile="dispatch")
    _, out, _, code, evs = exec_and_wait(
        c, sid, ["/bin/sh", "-c", "echo k > server.pem; echo rc=$?; echo n > notes.txt"])
    x = evs[0]["execId"]
    v = [e for e in evs if e["event"] == "violation"]
    check(v and v[0]["execId"] == x and v[0]["violation"]["action"] == "file-write-create"
          and v[0]["violation"]["target"].endswith("/server.pem"), "a file-write-create violation with execId", evs)
    check("rc=0" not in out, "the creation failed inside", out)
    check(not os.path.exists(os.path.join(fx.work, "server.pem")), "no server.pem on the host")
    check(os.path.exists(os.path.join(fx.work, "notes.txt")), "notes.txt was written")
    c.request({"op": "destroy", "sessionId": sid})


def case_bad_requests(fx):
    """every malformed request gets a typed error naming the field; the connection goes on."""
    c = fx.client()
    spec = fx.spec()

    def bad(raw, field, code=None, rid=None):
        c.send_raw(raw if isinstance(raw, bytes) else (json.dumps(raw) + "\n").encode())
        e = c.next(10)
        check(e is not None, "the connection stays open after %r" % raw)
        expect_error(e, field, code)
        if rid is not None:
            check(e.get("id") == rid, "the error echoes the id", e)
        return e

    bad(b"not json\n", "$", "invalid_argument")
    e = bad(b'{"op":"list","id":"\xff"}\n', "$", "invalid_argument")
    check("UTF-8" in e["error"]["message"], "invalid UTF-8 is named", e)
    bad(b"[1,2]\n", "$", "wrong_type")
    bad(b'{"op":"list","op":"list"}\n', "op", "invalid_argument")
    bad(b"[" * 100 + b"]" * 100 + b"\n", "$", "invalid_argument")
    bad({"id": 5}, "op", "missing_field", rid=5)
    bad({"op": "fly", "id": "f"}, "op", "invalid_argument", rid="f")
    bad({"op": "list", "id": [1]}, "id", "wrong_type")
    bad({"op": "exec", "id": "x", "sessionId": "s"}, "argv", "missing_field", rid="x")
    bad({"op": "exec", "sessionId": "s", "argv": "ls"}, "argv", "wrong_type")
    bad({"op": "exec", "sessionId": "s", "argv": ["ls", 3]}, "argv[1]", "wrong_type")
    bad({"op": "exec", "sessionId": "s", "argv": ["ls"], "timeoutMs": -1}, "timeoutMs", "invalid_argument")
    bad({"op": "exec", "sessionId": "s", "argv": ["ls"], "pty": {"rows": 0, "cols": 80}}, "pty.rows", "invalid_argument")
    bad({"op": "exec", "sessionId": "s", "argv": ["ls"], "workdir": "rel"}, "workdir", "invalid_argument")
    bad({"op": "exec", "sessionId": "s", "argv": ["ls"], "env": {"A": 1}}, "env.A", "wrong_type")
    bad({"op": "exec", "sessionId": "s", "argv": ["ls"], "timeout": 5}, "timeout", "invalid_argument")
    bad({"op": "stdin", "sessionId": "s", "execId": 0, "data": ""}, "execId", "invalid_argument")
    bad({"op": "resize", "sessionId": "s", "execId": 1, "rows": 70000, "cols": 1}, "rows", "invalid_argument")
    bad({"op": "kill", "sessionId": "nope", "execId": 1}, "sessionId", "invalid_argument")
    bad({"op": "launch", "spec": dict(spec, bindMounts=[{"hostPath": "rel"}])}, "spec.bindMounts[0].hostPath",
        "invalid_argument")
    bad({"op": "launch", "spec": {"workspaceId": "w"}}, "spec.sessionId", "missing_field")
    bad({"op": "launch", "spec": spec, "profile": "bogus"}, "profile", "invalid_argument")
    bad({"op": "launch", "spec": spec, "backend": "microvm"}, "backend", "backend_unavailable")
    # A line over 1 MiB: one error, then the connection resynchronises at its newline.
    c.send_raw(b'{"op":"list","pad":"' + b"a" * (1536 * 1024))
    e = c.next(10)
    expect_error(e, "$", "invalid_argument")
    check("longer than" in e["error"]["message"], "the overlong line is named", e)
    c.send_raw(b'"}\n{"op":"list","id":"after"}\n')
    e = c.next(10)
    check(e["event"] == "sessions" and e["id"] == "after", "the next line is served", e)
    # The daemon is alive for everyone.
    fx.client().close()


def case_launch_failure(fx):
    """a launch the host refuses: an error naming the spec field; a start that fails: exit 125, then the error."""
    c = fx.client()
    reply, _ = c.request({"op": "launch", "spec": dict(fx.spec(), bindMounts=[{"hostPath": fx.base + "/missing"}])})
    expect_error(reply, "spec.bindMounts[0].hostPath", "invalid_argument")
    # An egressd that exits at once: the session fails while it starts.
    fx.stop_daemon()
    fx.start(["--egressd", "/bin/false"])
    c = fx.client()
    sid = "f-" + secrets.token_hex(4)
    for _ in range(2):  # a failed session is gone: its id can be launched again
        reply, before = c.request({"op": "launch", "spec": fx.spec(sid)}, timeout=60)
        expect_error(reply, reply["error"]["field"])
        check(reply["op"] == "launch" and reply["sessionId"] == sid, "the launch's error names the session", reply)
        check([e["event"] for e in before] == ["starting", "exit"] and before[1]["exitCode"] == 125
              and "execId" not in before[1], "starting, then exit 125, then the error", before)
        check("egressd" in reply["error"]["message"], "the error says what failed", reply)
        reply, _ = c.request({"op": "list"})
        check(reply["sessions"] == [], "no session is left", reply)


def case_peer(fx):
    """the socket is 0600; a peer of another uid is refused by SO_PEERCRED even when the mode lets it in."""
    check(os.geteuid() == 0, "the peer test needs root (to run a client as uid %d)" % SANDBOX_UID)
    check(os.access(SYSTEM_PYTHON, os.X_OK), SYSTEM_PYTHON + " is needed to run a client as another uid")
    st = os.lstat(fx.sock)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid(),
          "the socket is the daemon's, mode 0600", oct(st.st_mode), st.st_uid)
    peer = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except PermissionError:\n"
        "    print('EACCES'); sys.exit(0)\n"
        "s.settimeout(10)\n"
        "data=b''\n"
        "while True:\n"
        "    c=s.recv(65536)\n"
        "    if not c: break\n"
        "    data+=c\n"
        "sys.stdout.write(data.decode())\n")

    def as_nobody():
        r = subprocess.run(["setpriv", "--reuid", str(SANDBOX_UID), "--regid", str(SANDBOX_UID), "--clear-groups",
                            SYSTEM_PYTHON, "-c", peer, fx.sock], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "the uid-%d client ran" % SANDBOX_UID, r.stdout, r.stderr)
        return r.stdout

    check(as_nobody().strip() == "EACCES", "mode 0600 keeps another uid out")
    os.chmod(fx.sock, 0o666)  # a mode mistake: SO_PEERCRED still refuses
    out = as_nobody()
    lines = [json.loads(l) for l in out.splitlines()]
    check(len(lines) == 1, "one line, then the connection is closed", out)
    expect_error(lines[0], "peer", "invalid_argument")
    check(str(SANDBOX_UID) in lines[0]["error"]["message"], "the error names the peer's uid", lines[0])
    check("refused a peer of uid %d" % SANDBOX_UID in fx.log(), "the daemon logs the refusal", fx.log())
    c = fx.client()
    reply, _ = c.request({"op": "list"})
    check(reply["event"] == "sessions", "the daemon's own uid is still served", reply)


def case_reattach(fx):
    """a client that disconnects leaves its sessions running; a new connection lists, attaches and goes on."""
    c = fx.client()
    sid, handle = fx.launch(c)
    bwrap_pid = handle["details"]["pid"]
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["sleep", "60"]})
    x = reply["execId"]
    c.close()
    time.sleep(0.5)
    check(proc_stat(bwrap_pid) is not None, "the sandbox outlives the connection")
    c2 = fx.client()
    reply, _ = c2.request({"op": "list"})
    found = [h for h in reply["sessions"] if h["sessionId"] == sid]
    check(found and found[0]["state"] == "active", "list shows the session, its exec still running", reply)
    reply, _ = c2.request({"op": "attach", "sessionId": sid})
    check(reply["event"] == "handle" and reply["op"] == "attach", "attach -> handle", reply)
    reply, _ = c2.request({"op": "kill", "sessionId": sid, "execId": x})
    check(reply["event"] == "ok", "kill of the earlier exec", reply)
    evs = c2.until(lambda e: e.get("execId") == x and e["event"] == "exit")
    check(evs[-1]["exitCode"] == 137, "its exit reaches the attached connection", evs)
    _, out, _, code, _ = exec_and_wait(c2, sid, ["echo", "again"])
    check(code == 0 and out == "again\n", "a new exec in the same session", out)
    reply, _ = c2.request({"op": "detach", "sessionId": sid})
    check(reply["event"] == "ok", "detach -> ok", reply)
    reply, _ = c2.request({"op": "destroy", "sessionId": sid})
    check(reply["handle"]["state"] == "destroyed", "destroy", reply)


def tree_of_sessions(fx, n):
    c = fx.client()
    for _ in range(n):
        sid, _ = fx.launch(c)
        reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["sleep", "120"]})
        check(reply["event"] == "exec", "a long exec runs", reply)
    time.sleep(0.5)
    tree = descendants(fx.proc.pid)
    names = {comm for _, comm, _ in tree}
    for need in ("bwrap", "egressd", "ccsb-init", "sleep"):
        check(any(n.startswith(need) for n in names), "the daemon's tree has %s" % need, sorted(names))
    return c, tree


def wait_gone(tree, seconds=15):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = alive(tree)
        if not left:
            return
        time.sleep(0.1)
    raise Failure("processes of the daemon's sessions outlived it: %r" % alive(tree))


def case_sigkill(fx):
    """SIGKILL of the daemon takes every session with it: no bwrap, egressd, ccsb-init or command remains."""
    _, tree = tree_of_sessions(fx, 2)
    os.kill(fx.proc.pid, signal.SIGKILL)
    fx.proc.wait(10)
    wait_gone(tree)


def case_sigterm(fx):
    """SIGTERM destroys every session (its execs' exits still reach the client) and exits 0."""
    c, tree = tree_of_sessions(fx, 1)
    os.kill(fx.proc.pid, signal.SIGTERM)
    evs = c.until(lambda e: e["event"] == "exit", 30)
    check(evs[-1]["exitCode"] == 137 and "execId" in evs[-1], "the running exec's exit is sent", evs)
    check(fx.proc.wait(30) == 0, "ccsbd exits 0 after SIGTERM", fx.log())
    check(not os.path.exists(fx.sock), "the socket is removed")
    wait_gone(tree)


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--unprivileged", action="store_true",
                    help="run the daemon and this client as uid 65534 (L1: an unprivileged launcher)")
    a = ap.parse_args()
    if a.unprivileged and os.geteuid() == 0:
        # The programs and this script are copied to a directory of their own,
        # so the build tree's permissions do not matter; then the whole case
        # runs again as uid 65534 (daemon, client and sandbox alike).
        tmp = tempfile.mkdtemp(prefix="ccsbd-unpriv-")
        try:
            os.chmod(tmp, 0o755)
            for prog in ("ccsbd", "ccsb-init", "egressd"):
                shutil.copy2(os.path.join(a.bin_dir, prog), tmp)
            me = os.path.join(tmp, "ccsbd_test.py")
            shutil.copy2(os.path.abspath(__file__), me)
            os.chmod(me, 0o755)
            r = subprocess.run(["setpriv", "--reuid", str(SANDBOX_UID), "--regid", str(SANDBOX_UID), "--clear-groups",
                                "/usr/bin/python3", me, "--bin-dir", tmp, "--unprivileged", a.case])
            return r.returncode
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if a.unprivileged and os.geteuid() != SANDBOX_UID:
        print("FAIL: --unprivileged runs as uid %d (started as root) or as that uid itself" % SANDBOX_UID)
        return 1
    check_tools = [t for t in ("bwrap", "setpriv") if shutil.which(t) is None]
    if check_tools:
        print("FAIL: missing on PATH: " + ", ".join(check_tools))
        return 1
    fx = Fixture(a.bin_dir)
    try:
        fx.start()
        CASES[a.case](fx)
    except Failure as f:
        print("FAIL (%s): %s" % (a.case, f))
        print("--- ccsbd log ---\n" + (fx.log() if os.path.exists(fx.log_path) else "(none)"))
        return 1
    finally:
        fx.stop()
    print("PASS: " + a.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
