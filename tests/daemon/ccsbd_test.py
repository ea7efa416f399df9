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
import struct
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


def peer_credentials(sock):
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def verify_daemon(sock, hello, daemon_pid=None):
    """S8: the client's check that it reached the real daemon (docs/ccsbd-protocol.md,
    "Is it the daemon?"): the hello's pid and uid are the socket's peer
    credentials, the uid is the client's own and, when the client knows the
    daemon's pid (it started it), the pid is that one."""
    pid, uid, _ = peer_credentials(sock)
    check(isinstance(hello.get("pid"), int) and isinstance(hello.get("uid"), int), "hello carries pid and uid", hello)
    check(hello["pid"] == pid and hello["uid"] == uid,
          "the hello's pid/uid are the socket's peer credentials (SO_PEERCRED %d/%d)" % (pid, uid), hello)
    check(uid == os.geteuid(), "the daemon runs as the client's uid", uid)
    if daemon_pid is not None:
        check(pid == daemon_pid, "the socket is served by the daemon this test started (pid %d), not pid %d"
              % (daemon_pid, pid), hello)


class Client:
    """One connection: request lines out, reply and event lines in."""

    def __init__(self, path, hello=True, daemon_pid=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.seen = []  # every line received, parsed
        if hello:
            h = self.next(10)
            check(h["event"] == "hello" and h["protocol"] == 1, "the first line is hello, protocol 1", h)
            verify_daemon(self.sock, h, daemon_pid)
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
        self.bin_dir = os.path.abspath(bin_dir)
        self.base = tempfile.mkdtemp(prefix="ccsbd-test-")
        os.chmod(self.base, 0o755)
        self.work = os.path.join(self.base, "work")
        os.mkdir(self.work)
        os.mkdir(os.path.join(self.work, "sub"))
        if os.geteuid() == 0:
            for d in (self.work, os.path.join(self.work, "sub")):
                os.chown(d, SANDBOX_UID, SANDBOX_UID)
        # The socket in a directory of its own: no session may bind it, an
        # ancestor of it or anything inside it (S8).
        run = os.path.join(self.base, "run")
        os.mkdir(run, 0o700)
        self.sock = os.path.join(run, "ccsbd.sock")
        self.log_path = os.path.join(self.base, "ccsbd.log")
        self.proc = None
        self.tokens = {}

    def start(self, extra=(), env=None):
        exe = os.path.join(self.bin_dir, "ccsbd")
        check(os.access(exe, os.X_OK), "ccsbd is built at " + exe)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [exe, "--listen", "unix:" + self.sock, "--no-path-toolchains", *extra],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
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
        return Client(self.sock, hello, self.proc.pid if self.proc else None)

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
        self.tokens[spec["sessionId"]] = reply.get("token")
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
    expect_error(reply, "sessionId", "handle_destroyed")


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
    bad({"op": "kill", "sessionId": "nope", "execId": 1}, "sessionId", "unknown_session")
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

    os.chmod(os.path.dirname(fx.sock), 0o711)  # the socket's own mode is what is tested here
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
    check("token" not in json.dumps(reply), "list shows no token", reply)
    reply, _ = c2.request({"op": "attach", "sessionId": sid, "token": fx.tokens[sid]})
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


# --- S8: the daemon tells its sandboxes from its clients --------------------------

# A client a sandboxed command runs: it connects to the daemon's socket and,
# served, launches a session with backend none whose command writes MARKER on
# the host. "@@key=JSON" lines say how far it got.
SANDBOX_CLIENT = r"""
import json, socket, sys
sock_path, marker, work = sys.argv[1:4]
def out(k, v):
    print("@@%s=%s" % (k, json.dumps(v)), flush=True)
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
try:
    s.connect(sock_path)
except OSError as e:
    out("connect", e.__class__.__name__)
    sys.exit(0)
out("connect", "ok")
f = s.makefile("rwb")
def line():
    try:
        l = f.readline()
    except OSError:
        return None
    return json.loads(l) if l else None
def send(o):
    f.write((json.dumps(o) + "\n").encode())
    f.flush()
first = line()
out("first", first)
if not (first and first.get("event") == "hello"):
    out("after", line())
    sys.exit(0)
send({"op": "launch", "id": 1, "backend": "none", "profile": "dispatch",
      "spec": {"sessionId": "from-inside", "workspaceId": "x", "bindMounts": [{"hostPath": work}], "guestWorkdir": work}})
e = line()
while e is not None and e.get("id") != 1:
    e = line()
out("launch", e)
if e and e.get("event") == "ready":
    send({"op": "exec", "id": 2, "sessionId": "from-inside", "argv": ["/bin/sh", "-c", "echo ran-on-the-host > " + marker]})
    e = line()
    while e is not None and e.get("event") != "exit":
        e = line()
    out("exec", e)
"""


def at_at(text):
    got = {}
    for l in text.splitlines():
        if l.startswith("@@") and "=" in l:
            k, v = l[2:].split("=", 1)
            got[k] = json.loads(v)
    return got


def outside_dir():
    """A host directory no session binds, writable by the sandbox's uid (for the marker)."""
    d = tempfile.mkdtemp(prefix="ccsbd-outside-")
    os.chmod(d, 0o777)
    return d


def client_script(fx):
    path = os.path.join(fx.work, "client.py")
    with open(path, "w") as f:
        f.write(SANDBOX_CLIENT)
    os.chmod(path, 0o644)
    return path


def case_sandboxed_peer(fx):
    """a command inside a sandbox that reaches the socket is refused (field peer), with every profile; nothing runs on the host."""
    run = os.path.join(fx.bin_dir, "ccsb-run")
    check(os.access(run, os.X_OK), "ccsb-run is built at " + run)
    outside = outside_dir()
    script = client_script(fx)
    try:
        # 1. Sandboxes ccsb-run made, with the socket's directory bound in (an
        #    unprivileged launcher's sandbox runs as the daemon's uid: only the
        #    namespaces tell it from the daemon's clients; a root launcher's
        #    never runs as uid 0, L1), and, for the same check with a root
        #    daemon, namespaces made with unshare(1) as the daemon's uid.
        unshare = ["unshare", "--mount", "--pid", "--fork"]
        if os.geteuid() != 0:
            unshare[1:1] = ["--user", "--map-root-user"]
        runs = [("ccsb-run --profile " + p, [run, "--profile", p, "--bind", fx.base, "--no-pty", "--no-path-toolchains",
                                             "--"]) for p in ("dispatch", "spec", "terminal")]
        runs.append((" ".join(unshare), unshare))
        sb_home = os.path.join(outside, "home")  # the terminal profile's writable HOME, the sandbox's own
        os.mkdir(sb_home)
        if os.geteuid() == 0:
            os.chown(sb_home, SANDBOX_UID, SANDBOX_UID)
        run_env = dict(os.environ, HOME=sb_home)
        if os.geteuid() == 0:
            # The root daemon's sandboxes run as uid 65534: with the modes
            # loosened they reach the socket and the daemon itself refuses.
            os.chmod(os.path.dirname(fx.sock), 0o711)
            os.chmod(fx.sock, 0o666)
        reached = []
        for what, prefix in runs:
            marker = os.path.join(outside, "marker-" + secrets.token_hex(4))
            argv = prefix + [SYSTEM_PYTHON, script, fx.sock, marker, fx.work]
            r = subprocess.run(argv, cwd=fx.work, env=run_env, capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
            got = at_at(r.stdout)
            check(r.returncode == 0 and "connect" in got, what + ": the client ran", r.returncode, r.stdout, r.stderr)
            check("launch" not in got and not os.path.exists(marker), what + ": nothing ran on the host", got)
            if got["connect"] != "ok":
                # Kept out before the daemon is asked: no native profile allows
                # a connect to a host Unix socket (L3, the broker).
                check(got["connect"] == "PermissionError", what + ": kept out by a permission", got)
                continue
            reached.append(what)
            expect_error(got.get("first"), "peer", "invalid_argument")
            msg = got["first"]["error"]["message"]
            if os.geteuid() == 0 and what.startswith("ccsb-run"):
                check("uid" in msg or "inside a sandbox" in msg, what + ": the refusal says why", got)
            else:
                check("inside a sandbox" in msg, what + ": the refusal names the sandbox", got)
            check(got.get("after") is None, what + ": then the connection is closed", got)
            check("launch" not in got and not os.path.exists(marker), what + ": nothing ran on the host", got)
        check("refused a peer" in fx.log(), "the daemon logs each refusal", fx.log())
        print("reached the socket and refused: %s" % reached)
        check(runs[-1][0] in reached, "the unshare(1) peer reached the socket", reached)
        # Every native profile runs the broker (L3): no ccsb-run sandbox reaches
        # the socket, so the unshare(1) peer is what exercises the daemon's own
        # namespace check.
        check(not any(w.startswith("ccsb-run") for w in reached),
              "no ccsb-run sandbox reached the socket (L3 in every native profile)", reached)

        # A peer that is gone before the daemon looks (the daemon stopped
        # while it connected and exited) cannot be placed: refused, and the
        # daemon goes on.
        before = fx.log().count("ccsbd: refused a peer")
        os.kill(fx.proc.pid, signal.SIGSTOP)
        try:
            subprocess.run([SYSTEM_PYTHON, "-c", "import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])",
                            fx.sock], check=True, timeout=30)
        finally:
            os.kill(fx.proc.pid, signal.SIGCONT)
        fx.client().close()
        check(fx.log().count("ccsbd: refused a peer") == before + 1, "a peer that exited first is refused", fx.log())

        # 2. Sessions of the daemon itself, every profile: their binds do not
        #    show the socket, so the command cannot even reach it (the
        #    terminal profile's HOME: one the sandbox's uid owns).
        fx.stop_daemon()
        fx.start(env=run_env)
        c = fx.client()
        for profile in ("dispatch", "spec", "terminal"):
            marker = os.path.join(outside, "marker-daemon-" + profile)
            spec = fx.spec()
            req = {"op": "launch", "spec": spec, "profile": profile}
            if profile == "terminal":
                req["backend"] = "native"
            reply, _ = c.request(req, timeout=120)
            check(reply["event"] == "ready" and reply["handle"]["backend"] == "native",
                  "a %s session of the daemon" % profile, reply, fx.log())
            sid = spec["sessionId"]
            _, out, err, code, _ = exec_and_wait(c, sid, [SYSTEM_PYTHON, script, fx.sock, marker, fx.work], timeout=90)
            got = at_at(out)
            check(code == 0 and "connect" in got, "the client ran in the %s session" % profile, out, err)
            print("a %s session of the daemon: %s" % (profile, got))
            check(got["connect"] != "ok" or (got.get("first") or {}).get("event") == "error",
                  "a %s session cannot drive the daemon" % profile, got)
            check("launch" not in got and not os.path.exists(marker), "nothing ran on the host (%s)" % profile, got)
            c.request({"op": "destroy", "sessionId": sid})
        reply, _ = c.request({"op": "list"})
        check(reply["sessions"] == [], "no session was launched from inside", reply)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def case_socket_binds(fx):
    """a launch whose mounts reach the socket's directory (at, above, below, by symlink, T2's HOME) is refused; the client verifies the daemon."""
    fx.stop_daemon()
    home = os.path.join(fx.base, "home")
    sockdir = os.path.join(home, ".ccsbd")
    os.makedirs(sockdir)
    os.chmod(home, 0o755)
    os.chmod(sockdir, 0o700)
    inner = os.path.join(sockdir, "inner")
    os.mkdir(inner)
    link = os.path.join(fx.base, "home-link")
    os.symlink(home, link)
    fx.sock = os.path.join(sockdir, "ccsbd.sock")
    fx.start(env=dict(os.environ, HOME=home))
    real = os.lstat(fx.sock)
    c = fx.client()
    attempts = [
        ("spec", None, [{"hostPath": home, "readOnly": True}], "spec.bindMounts[0].hostPath"),
        ("dispatch", None, [{"hostPath": sockdir}], "spec.bindMounts[0].hostPath"),
        ("dispatch", None, [{"hostPath": fx.work}, {"hostPath": inner}], "spec.bindMounts[1].hostPath"),
        ("spec", None, [{"hostPath": link}], "spec.bindMounts[0].hostPath"),
        ("dispatch", None, [{"hostPath": fx.base, "readOnly": True}], "spec.bindMounts[0].hostPath"),
        ("terminal", "native", [{"hostPath": fx.work}], "profile"),
        # A state directory (writable, not a bind of the spec) inside the socket's directory.
        ("dispatch", None, [{"hostPath": fx.work}], "spec.runnerStateDirs[0]", {"runnerStateDirs": [inner]}),
    ]
    for profile, backend, binds, field, *extra in attempts:
        spec = dict(fx.spec(), bindMounts=binds, guestWorkdir=binds[0]["hostPath"], **(extra[0] if extra else {}))
        req = {"op": "launch", "spec": spec, "profile": profile}
        if backend:
            req["backend"] = backend
        reply, before = c.request(req, timeout=120)
        what = "%s %s" % (profile, [b["hostPath"] for b in binds])
        if reply["event"] == "ready":
            c.request({"op": "destroy", "sessionId": spec["sessionId"]})
        expect_error(reply, field, "invalid_argument")
        check("socket" in reply["error"]["message"], what + ": the refusal names the socket", reply)
        check(not before, what + ": refused before anything started", before)
    reply, _ = c.request({"op": "list"})
    check(reply["sessions"] == [], "no session is left", reply)
    # A bind beside the socket's directory is served.
    sid, _ = fx.launch(c, profile="dispatch")
    c.request({"op": "destroy", "sessionId": sid})
    now = os.lstat(fx.sock)
    check((now.st_dev, now.st_ino) == (real.st_dev, real.st_ino), "the socket is the daemon's own still")
    fx.client().close()

    # An impostor at the socket's path (what a session that could write there
    # would do): the hello it forges names the daemon's pid, the socket's peer
    # credentials do not; the client's check catches it.
    os.rename(fx.sock, fx.sock + ".real")
    imp = socket.socket(socket.AF_UNIX)
    imp.bind(fx.sock)
    imp.listen(1)
    forged = {"event": "hello", "protocol": 1, "pid": fx.proc.pid, "uid": os.geteuid(), "nativeAvailable": True,
              "startup": c.hello["startup"]}
    cl = socket.socket(socket.AF_UNIX)
    cl.connect(fx.sock)
    srv, _ = imp.accept()
    srv.sendall((json.dumps(forged) + "\n").encode())
    line = json.loads(cl.makefile("rb").readline())
    try:
        verify_daemon(cl, line, fx.proc.pid)
        raise Failure("the client accepted an impostor's hello")
    except Failure as f:
        check("peer credentials" in str(f) or "not pid" in str(f), "the impostor is caught by SO_PEERCRED", f)
    for s_ in (cl, srv, imp):
        s_.close()
    os.unlink(fx.sock)
    os.rename(fx.sock + ".real", fx.sock)

    # Start-up refusals: a socket directory another user can write.
    fx.stop_daemon()
    shared = os.path.join(fx.base, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    exe = os.path.join(fx.bin_dir, "ccsbd")
    r = subprocess.run([exe, "--listen", "unix:" + os.path.join(shared, "s.sock")], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 125 and "writable by another user" in r.stderr, "a socket directory of mode 0777 is refused",
          r.returncode, r.stderr)
    check(not os.path.exists(os.path.join(shared, "s.sock")), "no socket is left behind")
    if os.geteuid() == 0:
        etc_dir = tempfile.mkdtemp(prefix="ccsbd-test-", dir="/etc")
        try:
            r = subprocess.run([exe, "--listen", "unix:" + os.path.join(etc_dir, "s.sock")], capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 125 and "visible in every sandbox" in r.stderr, "a socket under /etc is refused",
                  r.returncode, r.stderr)
            check(not os.path.exists(os.path.join(etc_dir, "s.sock")), "no socket is left behind in /etc")
        finally:
            shutil.rmtree(etc_dir, ignore_errors=True)


def case_capability(fx):
    """a second connection cannot act on a session it was not given; with the token it can."""
    a = fx.client()
    sid, _ = fx.launch(a)
    sid2, _ = fx.launch(a)
    tok = fx.tokens[sid] or ""
    reply, _ = a.request({"op": "exec", "sessionId": sid, "argv": ["/bin/sh", "-c", "echo up; exec sleep 60"]})
    x = reply["execId"]
    a.until(lambda e: e.get("execId") == x and e["event"] == "stdout")
    b = fx.client()
    ops = [{"op": o, "sessionId": sid} for o in ("attach", "handle", "detach", "suspend", "resume", "destroy")] + [
        {"op": "exec", "sessionId": sid, "argv": ["true"]},
        {"op": "stdin", "sessionId": sid, "execId": x, "data": "x"},
        {"op": "resize", "sessionId": sid, "execId": x, "rows": 10, "cols": 10},
        {"op": "kill", "sessionId": sid, "execId": x},
    ]
    for q in ops:
        reply, before = b.request(q)
        expect_error(reply, "token", "missing_field")
        check(not before, "nothing else reached the second connection", before)
        for wrong in ("0" * 32, tok[:-1] or "0", fx.tokens[sid2] or "1"):
            reply, _ = b.request(dict(q, token=wrong))
            expect_error(reply, "token", "invalid_argument")
    reply, _ = a.request({"op": "handle", "sessionId": sid})
    check(reply["handle"]["state"] == "active", "the session and its exec are untouched", reply)
    check(not [e for e in b.seen if e.get("sessionId") == sid and e["event"] != "error"],
          "the second connection saw none of the session's events", b.seen)
    check(len(tok) == 32 and all(ch in "0123456789abcdef" for ch in tok) and tok != fx.tokens[sid2],
          "ready carried the session's token: 128 bits as 32 hex digits, one per session", tok, fx.tokens[sid2])
    # Given the token, it acts, and keeps the right on this connection.
    reply, _ = b.request({"op": "attach", "sessionId": sid, "token": tok})
    check(reply["event"] == "handle" and reply["op"] == "attach", "attach with the token", reply)
    reply, _ = b.request({"op": "kill", "sessionId": sid, "execId": x})
    check(reply["event"] == "ok", "kill once the token was presented", reply)
    evs = b.until(lambda e: e.get("execId") == x and e["event"] == "exit")
    check(evs[-1]["exitCode"] == 137, "the exit reaches the attached connection", evs)
    _, out, _, code, _ = exec_and_wait(b, sid, ["echo", "from-b"])
    check(code == 0 and out == "from-b\n", "exec with the capability", out)
    reply, _ = b.request({"op": "destroy", "sessionId": sid})
    check(reply["handle"]["state"] == "destroyed", "destroy with the capability", reply)
    # The token of one session is not another's.
    reply, _ = b.request({"op": "destroy", "sessionId": sid2, "token": tok})
    expect_error(reply, "token", "invalid_argument")
    reply, _ = a.request({"op": "destroy", "sessionId": sid2})
    check(reply["handle"]["state"] == "destroyed", "the launching connection holds its session", reply)


def path_without_bwrap():
    """A PATH directory with a link to every program of the system's bin directories except bwrap."""
    d = tempfile.mkdtemp(prefix="ccsbd-path-")
    os.chmod(d, 0o755)
    for bindir in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(bindir):
            continue
        for name in os.listdir(bindir):
            if name == "bwrap" or os.path.lexists(os.path.join(d, name)):
                continue
            os.symlink(os.path.join(bindir, name), os.path.join(d, name))
    check(shutil.which("bwrap", path=d) is None and shutil.which("sh", path=d), "the PATH has sh and no bwrap", d)
    return d


def case_no_bwrap(fx):
    """B5 for the tools: without bwrap on PATH, ccsbd and ccsb-run refuse unless asked for none explicitly."""
    pathdir = path_without_bwrap()
    env = dict(os.environ, PATH=pathdir)
    marker = os.path.join(fx.work, "marker")
    try:
        fx.stop_daemon()
        fx.start(env=env)
        c = fx.client()
        check("bubblewrap" in c.hello["startup"] and not c.hello["nativeAvailable"], "B4 names the missing package",
              c.hello)
        for profile in ("dispatch", "spec"):
            spec = fx.spec()
            reply, before = c.request({"op": "launch", "spec": spec, "profile": profile}, timeout=60)
            if reply["event"] == "ready":
                exec_and_wait(c, spec["sessionId"], ["/bin/sh", "-c", "echo ran > " + marker])
                c.request({"op": "destroy", "sessionId": spec["sessionId"]})
            expect_error(reply, "backend", "backend_unavailable")
            msg = reply["error"]["message"]
            check("bubblewrap" in msg and "--fallback none" in msg, "the refusal names the package and the way out",
                  reply)
            check(not before, "nothing started (%s)" % profile, before)
        check(not os.path.exists(marker), "nothing ran on the host")
        # An explicit backend none is a choice: served, and the badge says so.
        spec = fx.spec()
        reply, _ = c.request({"op": "launch", "spec": spec, "backend": "none"}, timeout=60)
        check(reply["event"] == "ready" and reply["handle"]["backend"] == "none", "backend none when asked", reply)
        c.request({"op": "destroy", "sessionId": spec["sessionId"]})
        fx.stop_daemon()
        fx.start(["--fallback", "none"], env=env)
        c = fx.client()
        spec = fx.spec()
        reply, _ = c.request({"op": "launch", "spec": spec}, timeout=60)
        check(reply["event"] == "ready" and reply["handle"]["backend"] == "none", "--fallback none steps down", reply)
        c.request({"op": "destroy", "sessionId": spec["sessionId"]})

        run = os.path.join(fx.bin_dir, "ccsb-run")
        check(os.access(run, os.X_OK), "ccsb-run is built at " + run)
        cmd = ["--", "/bin/sh", "-c", "echo ran > " + marker]
        for profile in ("dispatch", "spec", "terminal"):
            r = subprocess.run([run, "--profile", profile, *cmd], cwd=fx.work, env=env, capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            check(r.returncode == 125, "ccsb-run --profile %s without bwrap exits 125" % profile, r.returncode, r.stderr)
            check("bubblewrap" in r.stderr and "--fallback none" in r.stderr, "it names the package and the way out",
                  r.stderr)
            check("session backend" not in r.stderr and not os.path.exists(marker), "nothing ran on the host", r.stderr)
        for extra in (["--fallback", "none"], ["--backend", "none"], ["--sandbox", "off"]):
            r = subprocess.run([run, *extra, *cmd], cwd=fx.work, env=env, capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            check(r.returncode == 0 and os.path.exists(marker), "ccsb-run %s runs on the host" % " ".join(extra),
                  r.returncode, r.stderr)
            check("session backend: none" in r.stderr, "and says so", r.stderr)
            os.unlink(marker)
    finally:
        shutil.rmtree(pathdir, ignore_errors=True)


def session_cgroups(run_dir):
    """The host's cgroup directories named after the session's run dir (v2 and every v1 hierarchy)."""
    name = os.path.basename(run_dir)
    out = []
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        if top.count("/") > 10:
            dirs[:] = []
            continue
        if name in dirs:
            out.append(os.path.join(top, name))
    return out


def read_text(path):
    with open(path) as f:
        return f.read().strip()


def case_limits(fx):
    """L7: launch's "limits" reach the session: a CPU cap in its cgroup, the other limits in details; bad limits name the field."""
    c = fx.client()
    # Malformed limits are refused before anything starts, naming the field.
    for lim, field in (({"cpus": "1.5x"}, "limits.cpus"), ({"cpus": 0.0001}, "limits.cpus"), ({"cpus": -1}, "limits.cpus"),
                       ({"cpus": True}, "limits.cpus"), ({"memory": "lots"}, "limits.memory"),
                       ({"pids": 0}, "limits.pids"), ({"cpu": 1}, "limits.cpu")):
        reply, _ = c.request({"op": "launch", "spec": fx.spec(), "profile": "spec", "limits": lim})
        expect_error(reply, field)
    reply, _ = c.request({"op": "list"})
    check(reply["sessions"] == [], "no session was started by a malformed launch", reply)
    want = {"cpus": 0.5, "pids": 64, "memory": "512M", "tmpSize": 33554432}
    if os.geteuid() != 0:
        # An unprivileged daemon gets no cgroup here: no CPU separation (said
        # in details), and a cap asked for is refused rather than dropped.
        sid, handle = fx.launch(c)
        d = handle["details"]
        check(d.get("limits") == "rlimit" and d.get("cpu") == "none" and "cpuMax" not in d,
              "an unprivileged session without cgroups reports no CPU separation", d)
        reply, before = c.request({"op": "launch", "spec": fx.spec(), "profile": "spec", "limits": want}, timeout=60)
        expect_error(reply, "cpus", "unsupported")
        check("CPU cap" in reply["error"]["message"], "the error says the cap cannot be applied", reply)
        return
    spec = fx.spec()
    reply, _ = c.request({"op": "launch", "spec": spec, "profile": "spec", "limits": want}, timeout=120)
    check(reply["event"] == "ready", "launch with limits -> ready", reply, fx.log())
    d = reply["handle"]["details"]
    check(d.get("cpu") in ("cgroup-v1", "cgroup-v2") and d.get("cpuMax") == "50000 100000", "the cap in details", d)
    check(d.get("pidsMax") == 64 and d.get("memoryBytes") == 512 << 20 and d.get("tmpBytes") == 32 << 20,
          "the other limits in details", d)
    quotas = []
    for cg in session_cgroups(d["runDir"]):
        if os.path.exists(cg + "/cpu.max"):
            quotas.append(read_text(cg + "/cpu.max"))
        elif os.path.exists(cg + "/cpu.cfs_quota_us"):
            quotas.append(read_text(cg + "/cpu.cfs_quota_us") + " " + read_text(cg + "/cpu.cfs_period_us"))
    check(quotas == ["50000 100000"], "the session's cpu cgroup on the host holds the cap", quotas)
    reply, _ = c.request({"op": "destroy", "sessionId": spec["sessionId"]})
    check(reply["handle"]["state"] == "destroyed", "destroy", reply)


def case_untrusted_helpers(fx):
    """L8: a helper others can write, or a launch whose writable bind holds one, is a typed error naming it."""
    d = tempfile.mkdtemp(prefix="ccsbd-helpers-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        bin_dir = os.path.join(d, "bin")
        os.mkdir(bin_dir, 0o755)
        egressd = os.path.join(bin_dir, "egressd")
        shutil.copy2(os.path.join(fx.bin_dir, "egressd"), egressd)
        os.chmod(egressd, 0o755)
        fx.stop_daemon()
        fx.start(["--egressd", egressd])
        c = fx.client()
        # As installed (the launcher's, nobody else may write it): it runs.
        sid, _ = fx.launch(c)
        reply, _ = c.request({"op": "destroy", "sessionId": sid}, timeout=60)
        check(reply["event"] == "handle", "destroy", reply)
        # Its directory writable by others: refused, naming egressd, its path and why.
        os.chmod(bin_dir, 0o777)
        reply, _ = c.request({"op": "launch", "spec": fx.spec(), "profile": "spec"}, timeout=60)
        expect_error(reply, "egressd", "unenforceable")
        check(bin_dir in reply["error"]["message"] and "writable by others" in reply["error"]["message"],
              "the error names the directory and why", reply)
        # A writable bind over the helpers' tree: refused, naming the bind.
        os.chmod(bin_dir, 0o755)
        spec = fx.spec()
        spec["bindMounts"].append({"hostPath": d})
        reply, _ = c.request({"op": "launch", "spec": spec, "profile": "spec"}, timeout=60)
        expect_error(reply, "spec.bindMounts", "unenforceable")
        check(("writable bind \"%s\"" % d) in reply["error"]["message"] and "egressd" in reply["error"]["message"],
              "the error names the bind and the helper", reply)
        reply, _ = c.request({"op": "list"})
        check(all(s.get("sessionId") != spec["sessionId"] for s in reply["sessions"]), "nothing was launched", reply)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_create_allow(fx):
    """P7 exceptions in launch's spec (createAllow), refused patterns named; unknown spec keys warned, strict refuses."""
    c = fx.client()
    spec = dict(fx.spec(), createAllow=[".venv/**"])
    reply, _ = c.request({"op": "launch", "spec": spec, "profile": "dispatch"}, timeout=120)
    check(reply["event"] == "ready", "launch with createAllow -> ready", reply, fx.log())
    sid = spec["sessionId"]
    check(reply["handle"]["details"].get("createAllow") == [fx.work + "/.venv/**"],
          "the handle's details name the exception", reply["handle"])
    check("warnings" not in reply, "a spec of known keys has no warnings", reply)
    _, out, _, code, evs = exec_and_wait(
        c, sid, ["/bin/sh", "-c", "mkdir -p .venv && echo c > .venv/cacert.pem; echo in=$?; "
                 "(echo k > key.pem) 2>/dev/null; echo out=$?"])
    check("in=0" in out and "out=0" not in out, "inside the exception allowed, outside denied", out)
    check(os.path.exists(os.path.join(fx.work, ".venv", "cacert.pem")), ".venv/cacert.pem exists on the host")
    check(not os.path.exists(os.path.join(fx.work, "key.pem")), "no key.pem on the host")
    v = [e for e in evs if e["event"] == "violation"]
    check(len(v) == 1 and v[0]["violation"]["target"] == os.path.join(fx.work, "key.pem"),
          "one violation, for key.pem", evs)
    c.request({"op": "destroy", "sessionId": sid})
    # Refused patterns, each naming its field.
    for allow, field in ((["**"], "spec.createAllow[0]"), ([".venv/**", ".git/**"], "spec.createAllow[1]"),
                         (["../x.pem"], "spec.createAllow[0]"), ([fx.work + "/**"], "spec.createAllow[0]"),
                         (["/elsewhere/**"], "spec.createAllow[0]")):
        reply, _ = c.request({"op": "launch", "spec": dict(fx.spec(), createAllow=allow), "profile": "dispatch"})
        expect_error(reply, field, "invalid_pattern")
    # S1: an unknown spec key is a warning on ready, naming its path; "strict" refuses it.
    typo = dict(fx.spec(), protectedPath=[fx.work + "/sub"])
    reply, _ = c.request({"op": "launch", "spec": typo, "profile": "dispatch"}, timeout=120)
    check(reply["event"] == "ready", "a spec with an unknown key launches", reply, fx.log())
    check(reply.get("warnings") == [{"field": "spec.protectedPath", "message":
                                     "spec.protectedPath is not a spec field and is ignored (did you mean protectedPaths?)"}],
          "ready warns about spec.protectedPath", reply)
    check("spec.protectedPath is not a spec field" in fx.log(), "the daemon logs the warning", fx.log())
    c.request({"op": "destroy", "sessionId": typo["sessionId"]})
    reply, _ = c.request({"op": "launch", "spec": dict(typo, sessionId="strict-1"), "profile": "dispatch",
                          "strict": True})
    expect_error(reply, "spec.protectedPath", "invalid_argument")
    check("did you mean protectedPaths?" in reply["error"]["message"], "the refusal suggests the field", reply)
    reply, _ = c.request({"op": "launch", "spec": fx.spec(), "strict": "yes"})
    expect_error(reply, "strict", "wrong_type")
    # A launch request's own unknown key was and stays a typed error naming it.
    reply, _ = c.request({"op": "launch", "spec": fx.spec(), "stirct": True})
    expect_error(reply, "stirct", "invalid_argument")
    c.close()
    # ccsbd --strict: every launch refuses unknown spec keys.
    fx.stop_daemon()
    fx.start(extra=["--strict"])
    c = fx.client()
    reply, _ = c.request({"op": "launch", "spec": dict(typo, sessionId="strict-2"), "profile": "dispatch"})
    expect_error(reply, "spec.protectedPath", "invalid_argument")
    check("ccsbd --strict" in reply["error"]["message"], "the refusal names the daemon's --strict", reply)
    sid, _ = fx.launch(c, profile="dispatch")
    c.request({"op": "destroy", "sessionId": sid})


# --- S8 (issue 28 item 5): launch says everything ccsb-run can ---------------------------

class Upstream:
    """An HTTP server on the host's loopback: reachable from a session only through its egressd, and only when the
    launch lets the loopback range through (egress.allowUpstream)."""

    def __init__(self):
        import http.server
        import threading

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"upstream-ok\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


# A GET through a CONNECT tunnel of the session's HTTP proxy (egressd,
# 127.0.0.1:3128 inside): prints the proxy's status line and the body.
PROXY_GET = r"""
import json, socket, sys
host = sys.argv[1]
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, host)).encode())
r = b""
while b"\r\n\r\n" not in r:
    d = s.recv(4096)
    if not d:
        break
    r += d
status = r.split(b"\r\n")[0].decode(errors="replace")
print("@@status=" + json.dumps(status))
if " 200 " in status:
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    r = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        r += d
    print("@@body=" + json.dumps(r.partition(b"\r\n\r\n")[2].decode(errors="replace").strip()))
"""


def launch_ready(fx, c, req, what):
    reply, before = c.request(dict(req, op="launch"), timeout=120)
    check(reply["event"] == "ready", what + ": launch -> ready", reply, fx.log())
    return reply["sessionId"], reply


def case_launch_settings(fx):
    """every per-session setting of ccsb-run in launch: egress (allowUpstream, resolve), env, runAs, limits; the same checks as ccsb-run's flags."""
    c = fx.client()
    up = Upstream()
    script = os.path.join(fx.work, "get.py")
    with open(script, "w") as f:
        f.write(PROXY_GET)
    os.chmod(script, 0o644)
    target = "upstream.test:%d" % up.port
    try:
        # Without allowUpstream the name resolves (egress.resolve) into the
        # loopback range egressd refuses: a violation whose reason is a typed
        # field (item 6: not only inside the raw egressd line).
        spec = dict(fx.spec(), egressAllowlist=["upstream.test"])
        sid, _ = launch_ready(fx, c, {"spec": spec, "profile": "dispatch",
                                      "egress": {"resolve": ["upstream.test=127.0.0.1"]}}, "resolve only")
        _, out, err, code, evs = exec_and_wait(c, sid, [SYSTEM_PYTHON, script, target])
        got = at_at(out)
        check("200" not in got.get("status", "") and "upstream-ok" not in out, "loopback refused without allowUpstream",
              out, err)
        # egressd's violations carry no execId and may follow the exit.
        v = [e["violation"] for e in c.seen if e.get("sessionId") == sid and e["event"] == "violation"]
        if not v:
            v = [c.until(lambda e: e.get("sessionId") == sid and e["event"] == "violation", 30)[-1]["violation"]]
        check(v and v[0]["action"] == "network-outbound" and v[0]["target"] == target, "a network violation", evs)
        check(isinstance(v[0].get("reason"), str) and "loopback" in v[0]["reason"],
              "the violation's reason is a typed field", v[0])
        c.request({"op": "destroy", "sessionId": sid})
        # With allowUpstream the same request reaches the host's server.
        spec = dict(fx.spec(), egressAllowlist=["upstream.test"])
        sid, _ = launch_ready(fx, c, {"spec": spec, "profile": "dispatch",
                                      "egress": {"allowUpstream": ["127.0.0.1/32"],
                                                 "resolve": ["upstream.test=127.0.0.1"]}}, "allowUpstream")
        _, out, err, code, _ = exec_and_wait(c, sid, [SYSTEM_PYTHON, script, target])
        got = at_at(out)
        check(" 200 " in got.get("status", "") and got.get("body") == "upstream-ok",
              "allowUpstream + resolve: the upstream answers through egressd", out, err, fx.log())
        c.request({"op": "destroy", "sessionId": sid})
    finally:
        up.close()

    # env: seen by every exec of the session; a refused name is a typed error naming env.NAME.
    sid, _ = launch_ready(fx, c, {"spec": fx.spec(), "profile": "dispatch",
                                  "env": {"AGENT_NAME": "Agent Smith", "GREETING": "hi"}}, "env")
    _, out, err, code, _ = exec_and_wait(c, sid, ["/bin/sh", "-c", 'echo "$GREETING/$AGENT_NAME"'])
    check(code == 0 and out == "hi/Agent Smith\n", "launch env is the session's", out, err)
    c.request({"op": "destroy", "sessionId": sid})
    for env, field in (({"LD_PRELOAD": "/x.so"}, "env.LD_PRELOAD"), ({"AWS_SECRET_ACCESS_KEY": "k"}, "env.AWS_SECRET_ACCESS_KEY"),
                       ({"GIT_AUTHOR_NAME": "x"}, "env.GIT_AUTHOR_NAME"),
                       ({"A": 1}, "env.A"), ({"": "x"}, "env.")):
        reply, before = c.request({"op": "launch", "spec": fx.spec(), "env": env})
        expect_error(reply, field)
        check(not before, "refused before anything started", before)

    # egress: bad values and options a session may not set, named by field.
    for eg, field in (({"allowUpstream": ["127.0.0.1/8"]}, "egress.allowUpstream[0]"),
                      ({"allowUpstream": ["10.0.0.0/8", "nope"]}, "egress.allowUpstream[1]"),
                      ({"resolve": ["upstream.test"]}, "egress.resolve[0]"),
                      ({"resolve": ["127.0.0.1=127.0.0.1"]}, "egress.resolve[0]"),
                      ({"dnsServer": "1.1.1.1"}, "egress.dnsServer"),
                      ({"maxTunnels": 5}, "egress.maxTunnels"), ({"noConfine": True}, "egress.noConfine"),
                      ({"allowUpstream": "127.0.0.0/8"}, "egress.allowUpstream")):
        reply, _ = c.request({"op": "launch", "spec": fx.spec(), "egress": eg})
        expect_error(reply, field)
    # ccsb-run's --egress-opt goes through the same check, and refuses the same.
    run = os.path.join(fx.bin_dir, "ccsb-run")
    for opts, needle in ((["--egress-opt", "--allow-upstream 127.0.0.1/8"], "egress.allowUpstream[0]"),
                         (["--egress-opt", "--max-tunnels", "--egress-opt", "5"], "--egress-opt")):
        r = subprocess.run([run, "--no-pty", *opts, "--", "true"], cwd=fx.work, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        check(r.returncode == 125 and needle in r.stderr, "ccsb-run %s is refused naming %s" % (opts, needle),
              r.returncode, r.stderr)

    # runAs: a root daemon runs the session as the uid asked for; an
    # unprivileged one refuses another uid (L1), before anything starts.
    for bad_as in ("abc", "1:x", -1, "4294967295"):
        reply, _ = c.request({"op": "launch", "spec": fx.spec(), "runAs": bad_as})
        expect_error(reply, "runAs")
    if os.geteuid() == 0:
        sid, _ = launch_ready(fx, c, {"spec": fx.spec(), "profile": "dispatch", "runAs": "65534:65534"}, "runAs")
        _, out, err, code, _ = exec_and_wait(c, sid, ["/bin/sh", "-c", "id -u; id -g"])
        check(code == 0 and out.split() == ["65534", "65534"], "runAs 65534: the sandbox runs as it", out, err)
        c.request({"op": "destroy", "sessionId": sid})
        reply, before = c.request({"op": "launch", "spec": fx.spec(), "runAs": 0})
        expect_error(reply, "runAs", "invalid_argument")
        check(not before, "runAs 0 is refused before anything started", before)
    else:
        reply, before = c.request({"op": "launch", "spec": fx.spec(), "runAs": "0"})
        expect_error(reply, "runAs", "invalid_argument")
        check("root launcher" in reply["error"]["message"] and not before, "the refusal says why", reply, before)

    # limits: the flags' syntax ("64K" pids as ccsb-run --pids 64K); a memory
    # limit that kills (cgroup: the OOM killer, a `killed` event with cause
    # memory_limit before exit 137; rlimits: the allocation fails).
    sid, reply = launch_ready(fx, c, {"spec": fx.spec(), "profile": "spec",
                                      "limits": {"memory": "96M", "pids": "1K"}}, "limits")
    d = reply["handle"]["details"]
    check(d.get("memoryBytes") == 96 << 20 and d.get("pidsMax") == 1024, "the limits in details", d)
    _, out, err, code, evs = exec_and_wait(
        c, sid, [SYSTEM_PYTHON, "-c", "b = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')"],
        timeout=120)
    kills = [e for e in evs if e["event"] == "killed"]
    if d.get("limits") in ("cgroup-v1", "cgroup-v2"):
        check(code == 137 and [e["event"] for e in evs][-2:] == ["killed", "exit"]
              and kills[-1]["reason"] == "memory_limit" and kills[-1]["signal"] == 9,
              "the memory limit's kill is a killed event (memory_limit), then exit 137", evs[-3:], err[-500:])
    else:
        check(code != 0 and "survived" not in out and not kills, "rlimits: the allocation fails, nothing is killed",
              code, out, err[-500:], kills)
    _, out, _, code, _ = exec_and_wait(c, sid, ["echo", "after"])
    check(code == 0 and out == "after\n", "the session serves after the kill", out)
    c.request({"op": "destroy", "sessionId": sid})
    reply, _ = c.request({"op": "list"})
    check(reply["sessions"] == [], "no session is left", reply)


# --- S8 (issue 28 item 6): the shapes of errors and events --------------------------------

def case_error_shapes(fx):
    """replies without an id carry their line, unknown and destroyed sessions differ, exit 127 says why, kill takes a signal, destroy says killed."""
    c = fx.client()
    # (1) Lines 1-4: a pipelining client matches each reply by id, else by line.
    c.send_raw(b'not json\n{"op":"list"}\n\n{"op":"list","id":"L3"}\n{"op":"exec","sessionId":"x"}\n')
    got = [c.next(10) for _ in range(4)]
    check(got[0]["event"] == "error" and "id" in got[0] and got[0]["id"] is None and got[0]["line"] == 1,
          "an unparseable line: id null and line 1", got[0])
    check(got[1]["event"] == "sessions" and got[1]["id"] is None and got[1]["line"] == 2,
          "a request without id: its reply carries line 2", got[1])
    check(got[2]["event"] == "sessions" and got[2]["id"] == "L3" and "line" not in got[2],
          "an empty line is not counted; a reply with an id has no line", got[2])
    check(got[3]["event"] == "error" and got[3]["id"] is None and got[3]["line"] == 4
          and got[3]["error"]["field"] == "argv", "a refused request without id: line 4", got[3])
    # (2) Unknown vs destroyed.
    reply, _ = c.request({"op": "handle", "sessionId": "never-launched"})
    expect_error(reply, "sessionId", "unknown_session")
    sid, _ = fx.launch(c)
    # (3) A command that cannot start: the reason on the exit itself.
    _, _, _, code, evs = exec_and_wait(c, sid, ["no-such-command-ccsb"])
    check(code == 127 and evs[-1].get("reason") == "not_found" and evs[-1].get("message"),
          "exit 127 carries reason not_found and a message", evs[-1])
    script = os.path.join(fx.work, "nx")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho x\n")
    os.chmod(script, 0o644)
    _, _, _, code, evs = exec_and_wait(c, sid, [script])
    check(code == 126 and evs[-1].get("reason") == "not_executable", "exit 126 carries reason not_executable", evs[-1])
    _, _, _, code, evs = exec_and_wait(c, sid, ["true"])
    check(code == 0 and "reason" not in evs[-1], "a command that ran has no reason", evs[-1])
    # (6) kill with a signal, a pipe exec and a terminal exec; unknown names refused.
    trap = "trap 'echo got-%s; exit %d' %s; echo up; while :; do sleep 0.1; done"
    for sig, pty, rc in (("SIGTERM", None, 3), ("INT", {"rows": 24, "cols": 80}, 4), ("SIGHUP", None, 5)):
        name = sig if sig.startswith("SIG") else "SIG" + sig
        extra = {"pty": pty} if pty else {}
        reply, _ = c.request(dict({"op": "exec", "sessionId": sid,
                                   "argv": ["/bin/sh", "-c", trap % (name, rc, name[3:])]}, **extra))
        x = reply["execId"]
        c.until(lambda e: e.get("execId") == x and e["event"] == "stdout" and "up" in e["data"])
        reply, before = c.request({"op": "kill", "sessionId": sid, "execId": x, "signal": sig})
        check(reply["event"] == "ok", "kill %s -> ok" % sig, reply)
        evs = [e for e in before + c.until(lambda e: e.get("execId") == x and e["event"] == "exit", 30)
               if e.get("execId") == x]
        k = [e for e in evs if e["event"] == "killed"]
        out = "".join(e["data"] for e in evs if e["event"] == "stdout")
        check(k and k[0]["signal"] == signal.Signals[name].value and k[0]["reason"] == "stop",
              "killed names the signal sent", k)
        check(("got-" + name) in out and evs[-1]["exitCode"] == rc, "the command's trap ran (%s)" % sig, out, evs[-1])
    reply, _ = c.request({"op": "exec", "sessionId": sid, "argv": ["sleep", "60"]})
    x = reply["execId"]
    reply, _ = c.request({"op": "kill", "sessionId": sid, "execId": x, "signal": "SIGSTOPX"})
    expect_error(reply, "signal", "invalid_argument")
    reply, _ = c.request({"op": "kill", "sessionId": sid, "execId": x, "signal": 9})
    expect_error(reply, "signal", "wrong_type")
    # (4) destroy with a running exec: killed (destroyed), then its exit 137, then the handle.
    reply, before = c.request({"op": "destroy", "sessionId": sid}, timeout=60)
    mine = [e for e in before if e.get("execId") == x]
    check([e["event"] for e in mine] == ["killed", "exit"] and mine[0]["reason"] == "destroyed"
          and mine[1]["exitCode"] == 137, "destroy: killed (destroyed), then exit 137", before)
    check(reply["event"] == "handle" and reply["handle"]["state"] == "destroyed", "destroy -> handle", reply)
    # (2) A destroyed session is not an unknown one.
    for q in ({"op": "exec", "sessionId": sid, "argv": ["true"]}, {"op": "handle", "sessionId": sid},
              {"op": "destroy", "sessionId": sid}):
        reply, _ = c.request(q)
        expect_error(reply, "sessionId", "handle_destroyed")


# --- S8 (issue 28 item 6): the protocol document and the daemon agree ----------------

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "ccsbd-protocol.md")
S5_ORDER = {"starting": [], "stdout": ["data"], "stderr": ["data"], "exit": ["exitCode", "reason", "message"],
            "killed": ["reason", "signal"], "violation": ["violation"]}
OUTPUT = ("stdout", "stderr")


def doc_json(text):
    """A line of the document as JSON: `{...}` is an elided object, `...,`/`,...` elided members."""
    text = text.replace("{...}", "{}").replace("{...,", "{").replace(",...}", "}")
    return json.loads(text, object_pairs_hook=lambda pairs: dict(pairs))


def doc_blocks():
    with open(DOC) as f:
        text = f.read()
    blocks, cur, inside = [], None, False
    for l in text.splitlines():
        if l.startswith("```"):
            if inside:
                blocks.append(cur)
            inside, cur = not inside, []
        elif inside:
            cur.append(l)
    return text, blocks


def key_order_ok(obj):
    keys = list(obj)
    if not keys or keys[0] != "event":
        return False
    if obj["event"] in S5_ORDER:
        want = ["sessionId"] + (["execId"] if "execId" in obj else []) + S5_ORDER[obj["event"]]
        return keys[1:] == [k for k in want if k in obj]
    return keys[1:] == sorted(keys[1:])


def case_doc(fx):
    """docs/ccsbd-protocol.md against a live daemon: its session example replayed line by line, its key order, every error code it lists produced."""
    check(os.geteuid() == 0, "the document's example is a root daemon's (a freezer for suspend)")
    text, blocks = doc_blocks()
    # 1. Every reply line the document shows has the key order it states.
    shown = 0
    for b in blocks:
        for l in b:
            if l.startswith("< {"):
                obj = doc_json(l[2:])
                check(key_order_ok(obj), "the document's line has the stated key order", l)
                shown += 1
    check(shown > 40, "the document shows its replies", shown)

    # 2. The session example, replayed.
    example = next(b for b in blocks if b and b[0].startswith("< {\"event\":\"hello\""))
    steps, cur = [], None
    for l in example[1:]:
        if l.startswith("> "):
            cur = (l[2:], [])
            steps.append(cur)
        elif l.startswith("< "):
            cur[1].append(doc_json(l[2:].replace("/srv/wt", fx.work)))
    c = fx.client()
    check(list(c.hello) == list(doc_json(example[0][2:])), "hello's keys as documented", c.hello)
    want_out, got_out, stray = {}, {}, []
    for sent, expected in steps:
        raw = sent.replace("/srv/wt", fx.work)
        c.send_raw(raw.encode() + b"\n")
        todo = [e for e in expected if e["event"] not in OUTPUT]
        for e in expected:
            if e["event"] in OUTPUT:
                k = (e["execId"], e["event"])
                want_out[k] = want_out.get(k, "") + e["data"]
        need = {k: len(v) for k, v in want_out.items()}
        end = time.monotonic() + 60
        while todo or any(len(got_out.get(k, "")) < n for k, n in need.items()):
            e = c.next(max(0.1, end - time.monotonic()))
            check(e is not None, "the daemon answered " + sent, todo)
            if e["event"] in OUTPUT:
                k = (e["execId"], e["event"])
                got_out[k] = got_out.get(k, "") + e["data"]
                continue
            match = [d for d in todo if d["event"] == e["event"] and d.get("id") == e.get("id")
                     and d.get("execId") == e.get("execId")]
            if not match:
                stray.append((sent, e))
                continue
            d = match[0]
            todo.remove(d)
            check(list(e) == list(d), "the keys of the reply to %s as documented" % sent, d, e)
            for f in ("id", "line", "op", "execId", "exitCode", "reason", "signal", "sessionId"):
                check(e.get(f) == d.get(f), "%s of the reply to %s as documented" % (f, sent), d, e)
            for f in ("code", "field"):
                if "error" in d:
                    check(e["error"][f] == d["error"][f], "error.%s of the reply to %s" % (f, sent), d, e)
            if d["event"] == "exit" and "message" in d:
                check(e["message"] == d["message"], "the exit's message as documented", d, e)
            if "state" in d.get("handle", {}):
                check(e["handle"]["state"] == d["handle"]["state"], "the handle's state after " + sent, d, e)
            if d["event"] == "violation":
                check(e["violation"] == d["violation"], "the violation as documented", d, e)
    check(not stray, "no line the document does not show", stray)
    check(got_out == want_out, "the output as documented", want_out, got_out)

    # 3. Every error code the document lists is one the daemon answers with.
    codes = []
    section = text[text.index("| code | when |"):]
    for l in section.splitlines()[2:]:
        if not l.startswith("| `"):
            break
        codes.append(l.split("`")[1])
    spec = fx.spec
    producers = {
        "invalid_argument": lambda: c.request({"op": "fly"}),
        "missing_field": lambda: c.request({"op": "exec", "sessionId": "x"}),
        "wrong_type": lambda: c.request({"op": "exec", "sessionId": "x", "argv": "ls"}),
        "invalid_pattern": lambda: c.request({"op": "launch", "spec": dict(spec(), createAllow=["**"])}),
        "unknown_session": lambda: c.request({"op": "handle", "sessionId": "never"}),
        "handle_destroyed": lambda: c.request({"op": "handle", "sessionId": "s1"}),
        "backend_unavailable": lambda: c.request({"op": "launch", "spec": spec(), "backend": "microvm"}),
        "unenforceable": lambda: c.request({"op": "launch", "spec": dict(spec(), bindMounts=[
            {"hostPath": fx.work}, {"hostPath": fx.bin_dir}])}, timeout=120),
        "illegal_transition": lambda: with_session(fx, c, lambda sid: c.request({"op": "resume", "sessionId": sid})),
        "unsupported": lambda: with_session(fx, c, lambda sid: c.request({"op": "suspend", "sessionId": sid}),
                                            backend="none"),
        "io_error": lambda: with_daemon(fx, ["--egressd", "/bin/false"],
                                        lambda c2: c2.request({"op": "launch", "spec": spec()}, timeout=120)),
    }
    check(codes and all(k in producers for k in codes), "every documented code has a producer here", codes)
    for code in codes:
        reply, _ = producers[code]()
        check(reply["event"] == "error" and reply["error"]["code"] == code, "the daemon answers " + code, reply)


def with_session(fx, c, f, backend=None):
    req = {"op": "launch", "spec": fx.spec(), "profile": "spec"}
    if backend:
        req["backend"] = backend
    reply, _ = c.request(req, timeout=120)
    check(reply["event"] == "ready", "a session for the producer", reply)
    try:
        return f(reply["sessionId"])
    finally:
        c.request({"op": "destroy", "sessionId": reply["sessionId"]})


def with_daemon(fx, extra, f):
    fx.stop_daemon()
    fx.start(extra)
    try:
        return f(fx.client())
    finally:
        fx.stop_daemon()
        fx.start()


# --- issue 28 "Done means": an agent's session driven through ccsbd ------------------

class Registry:
    """A stand-in for a package registry on the host's loopback: one package whose tarball ships .pem test files."""

    def __init__(self, host):
        import hashlib
        import http.server
        import io
        import tarfile
        import threading
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, data in (("package/package.json", b'{"name":"pempkg","version":"1.0.0","main":"index.js"}'),
                               ("package/index.js", b"module.exports = 42;\n"),
                               ("package/test/test_cert.pem", b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
                               ("package/test/test_key.pem", b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        tgz = buf.getvalue()
        import base64
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
        self.hits = []
        reg = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                reg.hits.append(self.path)
                port = self.server.server_address[1]
                if self.path.rstrip("/") == "/pempkg":
                    body = json.dumps({"name": "pempkg", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
                        "name": "pempkg", "version": "1.0.0", "main": "index.js",
                        "dist": {"tarball": "http://%s:%d/pempkg/-/pempkg-1.0.0.tgz" % (host, port),
                                 "shasum": hashlib.sha1(tgz).hexdigest(), "integrity": integrity}}}}).encode()
                    ctype = "application/json"
                elif self.path == "/pempkg/-/pempkg-1.0.0.tgz":
                    body, ctype = tgz, "application/octet-stream"
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def host_git(repo, *args):
    r = subprocess.run(["git", "-c", "safe.directory=*", "-C", repo, *args], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "host git " + " ".join(args), r.stdout, r.stderr)
    return r.stdout.strip()


def case_agent_session(fx):
    """the dispatch profile through ccsbd: a linked worktree of a protected checkout commits on its branch, a venv and an npm install (a loopback registry stand-in, .pem test files) with createAllow and egress settings."""
    repos = os.path.join(fx.base, "repos")
    orig, wt = os.path.join(repos, "orig"), os.path.join(repos, "agent1")
    os.makedirs(orig)
    host_git(orig, "init", "-q", "-b", "main")
    with open(os.path.join(orig, "README"), "w") as f:
        f.write("protected\n")
    host_git(orig, "add", "README")
    host_git(orig, "-c", "user.name=host", "-c", "user.email=host@example.invalid", "commit", "-q", "-m", "base")
    host_git(orig, "worktree", "add", "-q", "-b", "agent1", wt)
    main_before = host_git(orig, "rev-parse", "main")
    if os.geteuid() == 0:
        for top, dirs, files in os.walk(repos):
            for n in [top] + [os.path.join(top, x) for x in dirs + files]:
                os.lchown(n, SANDBOX_UID, SANDBOX_UID)
    reg = Registry("registry.test")
    try:
        c = fx.client()
        # What a user configures: the allowlist, the exceptions, and (for a
        # registry on a loopback address) the egress settings.
        spec = {"sessionId": "agent-" + secrets.token_hex(4), "workspaceId": "ccsbd-test", "bindMounts": [{"hostPath": wt}],
                "guestWorkdir": wt, "egressAllowlist": ["registry.test"],
                "createAllow": [".venv/**", "node_modules/**"]}
        sid, _ = launch_ready(fx, c, {"spec": spec, "profile": "dispatch",
                                      "egress": {"resolve": ["registry.test=127.0.0.1"],
                                                 "allowUpstream": ["127.0.0.1/32"]}}, "agent session")
        g = "git -c user.name=agent -c user.email=agent@example.invalid"
        _, out, err, code, _ = exec_and_wait(
            c, sid, ["/bin/sh", "-c", "echo work > f && git add f && %s commit -q -m agent-work && git rev-parse HEAD" % g])
        check(code == 0, "git commit in the linked worktree", out, err)
        head = out.strip()
        _, out, err, code, _ = exec_and_wait(c, sid, [SYSTEM_PYTHON, "-m", "venv", ".venv"], timeout=300)
        check(code == 0, "python3 -m venv .venv", out, err[-2000:])
        _, out, err, code, _ = exec_and_wait(c, sid, [".venv/bin/python", "-c", "import sys; print(sys.prefix)"])
        check(code == 0 and out.strip() == os.path.join(wt, ".venv"), "the venv runs", out, err)
        _, out, err, code, _ = exec_and_wait(
            c, sid, ["npm", "install", "--no-audit", "--no-fund", "--registry", "http://registry.test:%d/" % reg.port,
                     "pempkg"], timeout=300)
        check(code == 0, "npm install through egressd", out, err[-2000:], reg.hits)
        c.request({"op": "destroy", "sessionId": sid})
        # No denial: the session's git configuration keeps git from trying its
        # auto-maintenance lock in the original's object directory after the
        # commit (ccsb/session_environment.hpp session_git_config).
        v = [e["violation"] for e in c.seen if e.get("sessionId") == sid and e["event"] == "violation"]
        check(not v, "no denial in the session", v)
        for p in (".venv/bin/python", ".venv/pyvenv.cfg", "node_modules/pempkg/index.js",
                  "node_modules/pempkg/test/test_cert.pem", "node_modules/pempkg/test/test_key.pem"):
            check(os.path.lexists(os.path.join(wt, p)), p + " exists on the host")
        certs = [os.path.join(t, n) for t, _, ns in os.walk(os.path.join(wt, ".venv")) for n in ns if n == "cacert.pem"]
        check(certs, "pip's vendored cacert.pem is in the venv (P7 exception .venv/**)")
        check(host_git(orig, "rev-parse", "agent1") == head, "the host sees the commit on agent1")
        check(host_git(orig, "rev-parse", "main") == main_before, "main is unchanged")
        check(host_git(orig, "log", "-1", "--format=%s", "agent1") == "agent-work", "the commit's message")
    finally:
        reg.close()


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
            for prog in ("ccsbd", "ccsb-init", "egressd", "ccsb-run"):
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
