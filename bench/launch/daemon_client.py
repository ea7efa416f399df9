#!/usr/bin/env python3
"""daemon_bench's Python client: what a server written in Python pays for a
warm exec through ccsbd (S8), with the standard library only.

    daemon_client.py SOCKET WORKDIR PROFILE

Connects, reads the hello, launches one session (WORKDIR bound and the
working directory) and prints "ready". Then, for each line "N" on stdin, runs
N sequential execs of /bin/true, each timed from the request's send to its
`exit` event (time.perf_counter), and prints the N times in ms on one line.
An empty stdin (EOF) destroys the session and exits. Any error line or an
exit code other than 0 ends the client with a message and status 1.
"""
import json
import os
import socket
import sys
import time


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def next(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("daemon_client: the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        e = json.loads(line)
        if e.get("event") == "error":
            sys.exit("daemon_client: %s" % line.decode())
        return e


def main():
    path, work, profile = sys.argv[1:4]
    c = Client(path)
    c.next()  # hello
    sid = "bench-py-%d" % os.getpid()
    c.send({"op": "launch", "id": 0, "profile": profile,
            "spec": {"sessionId": sid, "workspaceId": "bench", "bindMounts": [{"hostPath": work}],
                     "guestWorkdir": work}})
    while c.next().get("event") != "ready":
        pass
    print("ready", flush=True)
    rid = 0
    for request in sys.stdin:
        times = []
        for _ in range(int(request)):
            rid += 1
            t = time.perf_counter()
            c.send({"op": "exec", "id": rid, "sessionId": sid, "argv": ["/bin/true"]})
            x = None
            while True:
                e = c.next()
                if e["event"] == "exec" and e.get("id") == rid:
                    x = e["execId"]
                elif e["event"] == "exit" and x is not None and e.get("execId") == x:
                    break
            times.append((time.perf_counter() - t) * 1000.0)
            if e["exitCode"] != 0:
                sys.exit("daemon_client: /bin/true exited %d" % e["exitCode"])
        print(" ".join("%.4f" % v for v in times), flush=True)
    c.send({"op": "destroy", "id": rid + 1, "sessionId": sid})
    while c.next().get("event") != "handle":
        pass


if __name__ == "__main__":
    main()
