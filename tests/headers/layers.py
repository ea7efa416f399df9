#!/usr/bin/env python3
"""The layers of ccsb's include graph (issue 29 item 4), checked with the
compiler's own dependency lists (-MM), so a header reached through another
counts as included:

  include/ccsb/launch/   the launcher: may stand on everything below;
  include/ccsb/sys/      the system layer (fds, the close-on-exec sweep,
                         seqpacket, the platform boundary, the L6 program):
                         shared by the launcher, the supervisor and egressd;
  the rest of include/   the pure core and the protocols (no launcher);
  init/, egressd/        the supervisor and the proxy: stand on sys/, the
                         core and the protocol headers, never on the
                         launcher.

Fails (exit 1) naming each file of the last three groups whose dependencies
reach include/ccsb/launch/. There is no list of exceptions.

usage: layers.py CXX SOURCE_DIR [PICOJSON_INCLUDE_DIR]
"""
import glob
import os
import subprocess
import sys

# The macros egressd is compiled with (egressd/CMakeLists.txt).
EGRESSD_DEFINES = ["-DASIO_STANDALONE", "-DASIO_NO_DEPRECATED", "-DASIO_NO_TYPEID", "-DASIO_DISABLE_STD_ALIGNED_ALLOC"]


def units(src):
    """Every file that must not reach the launcher, relative to SOURCE_DIR."""
    out = []
    for pattern in ("init/**/*.cpp", "init/**/*.hpp", "egressd/*.cpp", "egressd/*.hpp"):
        out += glob.glob(os.path.join(src, pattern), recursive=True)
    for h in glob.glob(os.path.join(src, "include/ccsb/**/*.hpp"), recursive=True):
        if not os.path.relpath(h, src).startswith("include/ccsb/launch/"):
            out.append(h)
    return sorted(os.path.relpath(p, src) for p in out)


def dependencies(cxx, src, picojson, unit):
    flags = ["-std=c++20", "-DPICOJSON_USE_INT64", *EGRESSD_DEFINES, "-I", os.path.join(src, "include"),
             "-I", os.path.join(src, "init"), "-I", os.path.join(src, "egressd")]
    if picojson and os.path.realpath(picojson) not in ("/usr/include", "/usr/local/include"):
        flags += ["-isystem", picojson]
    # -MG: a generated header (ccsb/precompiled_bpf.hpp) counts as a name.
    cmd = [cxx, "-x", "c++", "-MM", "-MG", *flags, os.path.join(src, unit)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"listing the dependencies of {unit} failed:\n{run.stderr}")
    text = run.stdout.replace("\\\n", " ")
    return [os.path.realpath(d) for d in text.split(":", 1)[1].split()]


def main():
    cxx, src = sys.argv[1], os.path.realpath(sys.argv[2])
    picojson = sys.argv[3] if len(sys.argv) > 3 else ""
    launcher = os.path.join(src, "include", "ccsb", "launch") + os.sep
    bad = 0
    all_units = units(src)
    for unit in all_units:
        reached = sorted({os.path.relpath(d, src) for d in dependencies(cxx, src, picojson, unit) if d.startswith(launcher)})
        if reached:
            bad += 1
            print(f"{unit} stands on the launcher: {', '.join(reached)}")
    print(f"{len(all_units)} files of init/, egressd/ and include/ccsb/ outside launch/ checked; {bad} reach the launcher")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
