#!/usr/bin/env python3
"""Compiles the macOS side of ccsb on Linux with Linux-only headers and calls
poisoned (B2, S7, X3): a syntax-only compile (-fsyntax-only) with every
macOS choice of ccsb/sys/platform.hpp made (-DCCSB_LAUNCH_SIMULATE_MACOS).

  headers  a stub include directory, searched first, where every Linux-only
           system header (include_graph.py LINUX_SYSTEM: <linux/*.h>,
           <asm/*.h>, <sys/prctl.h>, <sys/mount.h>, <seccomp.h>, ...) is an
           #error, except the ones the portable system and third-party
           headers the project includes reach themselves (glibc's
           <sys/ioctl.h> pulls <linux/ioctl.h>, Asio <sys/epoll.h>: on a Mac
           those are Darwin's own headers, not ours to choose);
  calls    after those portable headers and platform.hpp (THE boundary: its
           simulated branches are the Linux calls), `#pragma GCC poison` of
           the Linux-only calls and flags (POISONED): the launcher's macOS
           side and every egressd source a Mac builds may use none of them
           outside platform.hpp. egressd's own Linux-only calls (splice,
           pipe2, F_SETPIPE_SZ, MSG_NOSIGNAL, MSG_CMSG_CLOEXEC,
           SO_PROTOCOL) are in its *_linux.cpp files
           (io_platform_linux.cpp, confine_linux.cpp), which a Mac does not
           build and this test does not compile.

Compiled, all with both poisons: one translation unit including every
project header of the launcher's macOS graph (include_graph.py),
ccsb-run.cpp, ccsbd/main.cpp, and every egressd source a Mac builds
(include_graph.py macos_tus: egressd/*.cpp but *_linux.cpp). It first
checks that the poison bites (a stub and a poisoned call must each fail to
compile), so a broken set-up cannot pass.

What this proves: the macOS side compiles with no Linux-only header and no
listed Linux-only call outside platform.hpp. What it does not: Darwin's
headers differ from glibc's (a POSIX call glibc declares and Darwin lacks,
or declares differently, passes here), the __APPLE__ branches are never
compiled, and nothing is linked or run: only a Mac proves those.

usage: poisoned_headers.py CXX SOURCE_DIR OUT_DIR [PICOJSON_INCLUDE_DIR]
"""
import concurrent.futures
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import include_graph as ig  # noqa: E402

POISONED = [
    "pipe2", "accept4", "dup3", "SOCK_CLOEXEC", "SOCK_NONBLOCK", "MSG_NOSIGNAL", "SO_PEERCRED", "ucred",
    "O_PATH", "O_TMPFILE", "splice", "vmsplice", "tee", "prctl", "setresuid", "setresgid", "getresuid",
    "getresgid", "close_range", "memfd_create", "signalfd", "eventfd", "epoll_create1", "epoll_ctl",
    "epoll_wait", "timerfd_create", "inotify_init1", "unshare", "setns", "umount2", "syscall", "openat2",
    "getrandom", "sendfile", "ppoll", "get_current_dir_name", "open_how", "F_SETPIPE_SZ", "F_GETPIPE_SZ",
    "SPLICE_F_MOVE", "SPLICE_F_NONBLOCK", "SPLICE_F_MORE", "SPLICE_F_GIFT", "MSG_CMSG_CLOEXEC", "SO_PROTOCOL",
]


def search_dirs(cxx):
    run = subprocess.run([cxx, "-E", "-x", "c++", "-", "-v"], input="", capture_output=True, text=True)
    out, on = [], False
    for line in run.stderr.splitlines():
        if line.startswith("#include <...> search starts here:"):
            on = True
        elif line.startswith("End of search list."):
            break
        elif on:
            out.append(os.path.realpath(line.strip()))
    return out


def included_files(cxx, flags, text):
    """Every file a translation unit of `text` reads (-M), resolved."""
    run = subprocess.run([cxx, "-M", *flags, "-x", "c++", "-"], input=text, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"listing the portable headers' own includes failed:\n{run.stderr}")
    deps = run.stdout.replace("\\\n", " ").split(":", 1)[1].split()
    return {os.path.realpath(d) for d in deps}


def compile_ok(cxx, flags, path):
    run = subprocess.run([cxx, "-fsyntax-only", *flags, path], capture_output=True, text=True)
    return run.returncode == 0, run.stderr


def main():
    cxx, src, out = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
    picojson = sys.argv[4] if len(sys.argv) > 4 else ""
    stub = os.path.join(out, "poison")
    os.makedirs(stub, exist_ok=True)
    base = ig.compile_flags(src, picojson)

    # The macOS graph: project files per group, and the system headers the
    # project's files name.
    launcher_tus = ["tools/ccsb-run/ccsb-run.cpp", "tools/ccsbd/main.cpp"]
    egressd_tus = [t for t in ig.macos_tus(src) if t not in launcher_tus]
    launcher_headers, system = set(), set()
    for tu in ig.macos_tus(src):
        seen, bad, sys_hdrs = ig.walk(ig.graph(cxx, src, picojson, tu), tu)
        if bad:
            sys.exit("Linux-only includes in the macOS graph (include_graph.py lists them): " + repr(bad))
        system |= sys_hdrs
        if tu in launcher_tus:
            launcher_headers |= {f for f in seen if f.startswith("ccsb/")}

    # The stub directory: every Linux-only system header present on this
    # host, less what the portable headers reach on their own.
    dirs = search_dirs(cxx)
    portable = "".join(f"#include <{h}>\n" for h in sorted(system))
    reached = included_files(cxx, base, portable)
    poisoned = 0
    for d in dirs:
        for root, _, names in os.walk(d):
            for n in names:
                full = os.path.join(root, n)
                rel = os.path.relpath(full, d)
                if not ig.LINUX_SYSTEM.match(rel) or os.path.realpath(full) in reached:
                    continue
                target = os.path.join(stub, rel)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w") as f:
                    f.write(f'#error "<{rel}> is Linux-only and reached from the macOS side '
                            f'(tests/macos/poisoned_headers.py)"\n')
                poisoned += 1
    headers_only = ["-I", stub, *base]

    prelude = os.path.join(out, "prelude.hpp")
    with open(prelude, "w") as f:
        f.write(portable + '#include "ccsb/sys/platform.hpp"\n')
        f.write("#pragma GCC poison " + " ".join(sorted(set(POISONED))) + "\n")
    both = [*headers_only, "-include", prelude]

    # The poison must bite.
    probe_h = os.path.join(out, "probe_header.cpp")
    with open(probe_h, "w") as f:
        f.write("#include <linux/openat2.h>\n")
    probe_c = os.path.join(out, "probe_call.cpp")
    with open(probe_c, "w") as f:
        f.write("int probe(int* p) { return ::pipe2(p, 0); }\n")
    failures = []
    for path, flags, what in ((probe_h, headers_only, "<linux/openat2.h>"), (probe_c, both, "pipe2")):
        ok, _ = compile_ok(cxx, flags, path)
        if ok:
            failures.append(f"the poison does not bite: {what} compiled")

    all_headers = os.path.join(out, "launcher_headers.cpp")
    with open(all_headers, "w") as f:
        f.write("".join(f"#include <{h}>\n" for h in sorted(launcher_headers)))
    jobs = [(all_headers, both, "every header of the launcher's macOS graph")]
    jobs += [(os.path.join(src, t), both, t) for t in launcher_tus + egressd_tus]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda j: compile_ok(cxx, j[1], j[0]), jobs))
    for (path, flags, what), (ok, err) in zip(jobs, results):
        print(f"{'ok' if ok else 'FAILED'}: {what} (headers and calls poisoned)")
        if not ok:
            failures.append(f"{what}:\n" + "\n".join(err.splitlines()[:40]))
    print(f"{poisoned} Linux-only system headers poisoned, {len(set(POISONED))} calls and flags; "
          f"{len(launcher_headers)} launcher headers")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
