#!/usr/bin/env python3
"""The README's map matches the tree (issue 29 item 6).

The map is the table between `<!-- map: begin -->` and `<!-- map: end -->`
in README.md; the first cell of each row names a path in backquotes. Fails
(exit 1) naming each mapped path that does not exist, each top-level
directory of the tree that the map does not name, each relative link of the
README whose target does not exist, and a README without the
markers or with an empty map. The tree is what git tracks or would track
when SOURCE_DIR is a git checkout (a build directory is not the tree), else
every directory but `.git` and the build directories.

With --self-test it first checks that the check fails where it must: the
README's map with a row for a path that does not exist, and the map without
one of the tree's top-level directories.

usage: readme_map.py [--self-test] SOURCE_DIR
"""
import os
import re
import subprocess
import sys

BEGIN, END = "<!-- map: begin -->", "<!-- map: end -->"
ROW = re.compile(r"\|\s*`([^`]+)`\s*\|")


def mapped_paths(text):
    if BEGIN not in text or END not in text:
        return None
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [m.group(1) for m in map(ROW.match, table.splitlines()) if m]


def top_level_dirs(src):
    run = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True)
    if run.returncode == 0 and run.stdout:
        files = run.stdout.decode("utf-8", "surrogateescape").split("\0")
        return sorted({f.split("/", 1)[0] for f in files if "/" in f})
    return sorted(d for d in os.listdir(src)
                  if os.path.isdir(os.path.join(src, d)) and d != ".git" and not re.match(r"_?build", d))


def problems(src, text):
    paths = mapped_paths(text)
    if paths is None:
        return [f"README.md has no map (the {BEGIN} and {END} lines)"]
    if not paths:
        return ["the README's map names no path"]
    out = [f"the map names {p}, which does not exist" for p in paths if not os.path.exists(os.path.join(src, p))]
    named_tops = {p.strip("/").split("/", 1)[0] for p in paths}
    out += [f"the top-level directory {d}/ is not in the map" for d in top_level_dirs(src) if d not in named_tops]
    links = sorted(set(re.findall(r"\]\(([^)#:]+)\)", text)))
    out += [f"the README links to {l}, which does not exist" for l in links if not os.path.exists(os.path.join(src, l))]
    return out


def self_test(src, text):
    """The check catches a mapped path that does not exist and a top-level directory left out."""
    failures = []
    ghost = text.replace(END, "| `no-such-dir/` | a path the tree does not have |\n" + END, 1)
    if not any("no-such-dir/" in p for p in problems(src, ghost)):
        failures.append("a map naming no-such-dir/ passed")
    tops = top_level_dirs(src)
    if not tops:
        failures.append("the tree has no top-level directory")
    else:
        left_out = tops[0]
        rows = [l for l in text.split("\n") if not (ROW.match(l) and ROW.match(l).group(1).strip("/").split("/", 1)[0] == left_out)]
        if not any(f"{left_out}/ is not in the map" in p for p in problems(src, "\n".join(rows))):
            failures.append(f"a map without {left_out}/ passed")
    return failures


def main():
    args = sys.argv[1:]
    selftest = "--self-test" in args
    args = [a for a in args if a != "--self-test"]
    if len(args) != 1:
        sys.exit(__doc__)
    src = os.path.realpath(args[0])
    text = open(os.path.join(src, "README.md"), encoding="utf-8").read()
    bad = self_test(src, text) if selftest else []
    for f in bad:
        print(f"self-test: {f}")
    found = problems(src, text)
    for p in found:
        print(p)
    print(f"{len(mapped_paths(text) or [])} mapped paths checked against {src}; {len(found)} problem(s)"
          + (f", {len(bad)} self-test failure(s)" if selftest else ""))
    return 1 if found or bad else 0


if __name__ == "__main__":
    sys.exit(main())
