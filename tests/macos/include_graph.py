#!/usr/bin/env python3
"""The macOS include graph of ccsb-run and ccsbd (B2, S7), checked on Linux.

Preprocesses examples/ccsb-run.cpp and examples/ccsbd/main.cpp with every
macOS choice of ccsb/launch/platform.hpp made (-DCCSB_LAUNCH_SIMULATE_MACOS)
and -E -dI, so only the #include directives of the branches really taken
are seen, each with the file it is in. Fails when one of the project's files
includes a Linux-only header (a Linux-only launcher header or a Linux
system header), except:
  * platform.hpp itself, THE boundary: its Linux branches are what the
    simulation runs in place of the Apple calls (its __APPLE__ branches);
  * the KNOWN files below and everything they include: still in the macOS
    graph, each with why and what would take it out. A KNOWN file that is
    no longer reached fails too, so the list only shrinks.
This is what a Mac's compiler would meet beyond the Apple calls; it does not
prove the Apple branches compile (only a Mac can).

usage: include_graph.py CXX SOURCE_DIR [PICOJSON_INCLUDE_DIR]
"""
import os
import re
import subprocess
import sys

LINUX_LAUNCHER = {
    "ccsb/launch/bwrap_driver.hpp", "ccsb/launch/userns_probe.hpp", "ccsb/launch/limits.hpp",
    "ccsb/launch/seccomp.hpp", "ccsb/launch/safe_path.hpp", "ccsb/launch/placeholders.hpp",
    "ccsb/launch/egressd.hpp", "ccsb/launch/identity.hpp", "ccsb/launch/run_dir.hpp",
    "ccsb/launch/seqpacket.hpp", "ccsb/confine/landlock.hpp", "ccsb/broker/kernel_probe.hpp",
}
LINUX_SYSTEM = re.compile(
    r"^(linux/.*|asm/.*|sys/prctl\.h|sys/signalfd\.h|sys/mount\.h|seccomp\.h|sys/syscall\.h|"
    r"sys/sysmacros\.h|sys/personality\.h|sys/epoll\.h|sys/eventfd\.h|sys/timerfd\.h|sys/inotify\.h|"
    r"sys/random\.h|sys/capability\.h)$")

# Files still in the macOS graph -> why, and what takes them out. Neither
# their own includes nor anything below them is checked (they are the
# Linux-only part that remains); each must still be reached.
KNOWN = {
    "ccsb/launch/host.hpp":
        "ccsb-run, ccsbd, request_builder.hpp and none_driver.hpp take their host facts from it, and it holds the "
        "Linux probe too (userns_probe.hpp's user-namespace trial, SYS_landlock_create_ruleset, /proc/self/exe); "
        "split the portable host facts from the Linux probe (or put the probe behind platform.hpp)",
    "ccsb/launch/limits.hpp":
        "session_request carries resource_limits (L7), declared in limits.hpp next to the cgroup code; "
        "declare the struct on its own",
    "ccsb/launch/safe_path.hpp":
        "ccsb-run's --events/--handle files are opened through open_output_file (openat2 RESOLVE_NO_SYMLINKS, "
        "O_PATH); a macOS branch (O_NOFOLLOW_ANY) behind platform.hpp",
}
SKIP_BELOW = {"ccsb/launch/platform.hpp"} | set(KNOWN)


def graph(cxx, src, picojson, tu):
    """{file: [included name, ...]} for every directive taken. -dI prints a
    directive in its includer even when the included file was seen before
    (#pragma once), so every edge is there, not only the first inclusion."""
    cmd = [cxx, "-std=c++20", "-E", "-dI", "-DCCSB_LAUNCH_SIMULATE_MACOS", "-DPICOJSON_USE_INT64",
           "-I", os.path.join(src, "include")]
    if picojson and os.path.realpath(picojson) not in ("/usr/include", "/usr/local/include"):
        cmd += ["-isystem", picojson]
    cmd.append(os.path.join(src, tu))
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


def main():
    cxx, src = sys.argv[1], sys.argv[2]
    picojson = sys.argv[3] if len(sys.argv) > 3 else ""
    bad, reached = [], set()
    for tu in ("examples/ccsb-run.cpp", "examples/ccsbd/main.cpp"):
        g = graph(cxx, src, picojson, tu)
        # Our files reachable from the translation unit without going
        # through platform.hpp or a KNOWN file.
        seen, todo = set(), [tu]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            for t in g.get(f, []):
                if t in KNOWN:
                    reached.add(t)
                    continue
                if t in SKIP_BELOW:
                    continue
                if t in LINUX_LAUNCHER or LINUX_SYSTEM.match(t):
                    bad.append(f"{tu}: {f} includes {t}")
                if t in g:
                    todo.append(t)
        for t in KNOWN:
            if any(t in v for v in g.values()):
                reached.add(t)
    for b in sorted(set(bad)):
        print("Linux-only in the macOS graph:", b)
    for k in sorted(KNOWN):
        if k in reached:
            print(f"still in the macOS graph (known): {k}: {KNOWN[k]}")
        else:
            print(f"KNOWN entry no longer reached, remove it from include_graph.py: {k}")
            bad.append(k)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
