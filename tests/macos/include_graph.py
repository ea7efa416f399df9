#!/usr/bin/env python3
"""The macOS include graph of ccsb-run, ccsbd and egressd (B2, S7, X3),
checked on Linux.

Preprocesses the macOS translation units (MACOS_TUS: tools/ccsb-run/ccsb-run.cpp,
tools/ccsbd/main.cpp, and every egressd/*.cpp but the *_linux.cpp ones,
which a Mac does not build: egressd/CMakeLists.txt) with every macOS choice
of ccsb/sys/platform.hpp made (-DCCSB_LAUNCH_SIMULATE_MACOS) and -E -dI,
so only the #include directives of the branches really taken are seen, each
with the file it is in. Fails (exit 1) when any of the project's files in
that graph includes a Linux-only header: a Linux-only launcher header
(LINUX_LAUNCHER, anything under ccsb/launch/linux/, any *_linux.* file) or a
Linux system header (LINUX_SYSTEM). There is no list of exceptions: a new
Linux-only include reachable from the macOS side fails CI.

What this proves: the #include lines a Mac's preprocessor takes name no
Linux-only header. What it does not: that the Apple branches compile, or
that no Linux-only call declared in a portable header (pipe2, splice,
MSG_NOSIGNAL under _GNU_SOURCE) is used: poisoned_headers.py compiles the
macOS side with those poisoned; only a Mac compiles the Apple branches.

usage: include_graph.py CXX SOURCE_DIR [PICOJSON_INCLUDE_DIR]
"""
import glob
import os
import re
import subprocess
import sys

# ccsb/confine/landlock.hpp is not here: the Landlock ruleset is pure data of
# the bwrap plan (render/bwrap/plan.hpp), which --print-profile renders on
# every platform; applying it is init/confine/apply_landlock (Linux only).
LINUX_LAUNCHER = {
    "ccsb/launch/bwrap_driver.hpp", "ccsb/launch/userns_probe.hpp", "ccsb/launch/limits.hpp",
    "ccsb/sys/seccomp.hpp", "ccsb/launch/placeholders.hpp", "ccsb/launch/egressd.hpp",
    "ccsb/launch/identity.hpp", "ccsb/launch/run_dir.hpp", "ccsb/sys/seqpacket.hpp",
    "ccsb/launch/etc_view.hpp", "ccsb/launch/etc_view_walk.hpp",
    "ccsb/broker/kernel_probe.hpp", "egressd/seccomp_allowlist.hpp",
}
LINUX_LAUNCHER_DIRS = ("ccsb/launch/linux/",)
LINUX_SYSTEM = re.compile(
    r"^(linux/.*|asm/.*|asm-generic/.*|sys/prctl\.h|sys/signalfd\.h|sys/mount\.h|seccomp\.h|sys/syscall\.h|"
    r"sys/sysmacros\.h|sys/personality\.h|sys/epoll\.h|sys/eventfd\.h|sys/timerfd\.h|sys/inotify\.h|"
    r"sys/random\.h|sys/capability\.h|sys/fsuid\.h|sys/sendfile\.h|mntent\.h|pty\.h)$")

# The macros egressd is compiled with (egressd/CMakeLists.txt).
EGRESSD_DEFINES = ["-DASIO_STANDALONE", "-DASIO_NO_DEPRECATED", "-DASIO_NO_TYPEID", "-DASIO_DISABLE_STD_ALIGNED_ALLOC"]


def macos_tus(src):
    """The translation units a Mac builds for ccsb-run, ccsbd and egressd."""
    egressd = sorted(os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "egressd", "*.cpp"))
                     if not p.endswith("_linux.cpp"))
    return ["tools/ccsb-run/ccsb-run.cpp", "tools/ccsbd/main.cpp"] + egressd


def is_linux_only(name):
    return (name in LINUX_LAUNCHER or name.startswith(LINUX_LAUNCHER_DIRS) or
            re.search(r"_linux\.(hpp|cpp|h)$", name) is not None or LINUX_SYSTEM.match(name) is not None)


def compile_flags(src, picojson):
    """The flags of a macOS-choice compile of the project on Linux."""
    flags = ["-std=c++20", "-DCCSB_LAUNCH_SIMULATE_MACOS", "-DPICOJSON_USE_INT64", *EGRESSD_DEFINES,
             "-I", os.path.join(src, "include"), "-I", os.path.join(src, "egressd")]
    if picojson and os.path.realpath(picojson) not in ("/usr/include", "/usr/local/include"):
        flags += ["-isystem", picojson]
    return flags


def graph(cxx, src, picojson, tu, extra=()):
    """{file: [included name, ...]} for every directive taken, the project's
    files named relative to include/ (or to SOURCE_DIR). -dI prints a
    directive in its includer even when the included file was seen before
    (#pragma once), so every edge is there, not only the first inclusion."""
    cmd = [cxx, "-E", "-dI", *extra, *compile_flags(src, picojson), os.path.join(src, tu)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"preprocessing {tu} failed:\n{run.stderr}")
    root = os.path.realpath(src) + "/"
    inc = root + "include/"

    def name(path):
        if path.startswith(inc):
            return path[len(inc):]
        return path[len(root):] if path.startswith(root) else None  # None: not ours

    g, cur = {}, None
    for line in run.stdout.splitlines():
        m = re.match(r'# \d+ "([^"]+)"', line)
        if m:
            cur = None if m.group(1).startswith("<") else name(os.path.realpath(m.group(1)))
            continue
        m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
        if not m or cur is None:
            continue
        target = m.group(2)
        if m.group(1) == '"' and not target.startswith("ccsb/"):
            local = os.path.normpath(os.path.join(os.path.dirname(cur), target))
            if os.path.exists(os.path.join(root, local)):
                target = local
        g.setdefault(cur, []).append(target)
    return g


def walk(g, tu):
    """(project files reached from tu, [(includer, Linux-only name)],
    system headers the project's files include)."""
    seen, bad, system, todo = set(), [], set(), [tu]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for t in g.get(f, []):
            if is_linux_only(t):
                bad.append((f, t))
            if t in g or t.startswith("ccsb/"):
                todo.append(t)
            else:
                system.add(t)
    return seen, bad, system


def main():
    cxx, src = sys.argv[1], sys.argv[2]
    picojson = sys.argv[3] if len(sys.argv) > 3 else ""
    bad, files = [], set()
    tus = macos_tus(src)
    for tu in tus:
        seen, b, _ = walk(graph(cxx, src, picojson, tu), tu)
        files |= seen
        bad += [f"{tu}: {f} includes {t}" for f, t in b]
    for b in sorted(set(bad)):
        print("Linux-only in the macOS graph:", b)
    print(f"{len(files)} project files in the macOS graph of {len(tus)} translation units; "
          f"{len(set(bad))} Linux-only includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
