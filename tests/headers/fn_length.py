#!/usr/bin/env python3
"""No function in include/ccsb/ is longer than MAX lines (issue 29, STYLE.md:
small functions that each decide one thing).

A brace-counting scan, not a parser: comments, string and character literals
(raw strings included) are blanked first, then every brace pair whose head
ends like a function signature (a closing parenthesis, optionally followed by
const, noexcept, override, final, mutable or a trailing return type) and is
not a control statement or a lambda counts, when no other function encloses
it (a lambda's lines count towards the function that holds it; a class's
member functions count each on their own). The length is the lines from the
opening to the closing brace, both included.

Fails (exit 1) naming each function over the limit, longest first. There is
no list of exceptions.

usage: fn_length.py SOURCE_DIR [MAX]   (MAX defaults to 80)
"""
import os
import re
import sys

CONTROL = re.compile(r'\b(if|for|while|switch|catch|else|do)\s*(\(.*\))?\s*$')
SIGNATURE_END = re.compile(r'\)\s*(const|noexcept|override|final|mutable|->\s*[\w:<>,\s\*&]+|\s)*$')


def blank(src):
    """Comments and literals replaced by empty ones, line breaks kept."""
    keep_lines = lambda m: '\n' * m.group(0).count('\n')
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'/\*.*?\*/', keep_lines, src, flags=re.S)
    src = re.sub(r'R"(\w*)\((.*?)\)\1"', lambda m: '""' + keep_lines(m), src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    src = re.sub(r"'(\\.|[^'\\\n])*'", "''", src)
    return src


def functions(path):
    """(length, first line, head) of every outermost function body in path."""
    src = blank(open(path, encoding='utf-8').read())
    stack, out, line = [], [], 1
    for idx, ch in enumerate(src):
        if ch == '\n':
            line += 1
        elif ch == '{':
            pre = src[max(0, idx - 300):idx].rstrip()
            head = pre[max(pre.rfind(';'), pre.rfind('{'), pre.rfind('}')) + 1:].strip()
            is_fn = (bool(SIGNATURE_END.search(head)) and not CONTROL.search(head.split('\n')[-1])
                     and not re.match(r'^(if|for|while|switch|catch|else)\b', head))
            is_lambda = '](' in head.replace(' ', '') or head.startswith('[')
            stack.append((line, is_fn and not is_lambda, head))
        elif ch == '}' and stack:
            start, is_fn, head = stack.pop()
            if is_fn and not any(f for _, f, _ in stack):
                out.append((line - start + 1, start, ' '.join(head.split())[:100]))
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = os.path.join(sys.argv[1], 'include', 'ccsb')
    limit = int(sys.argv[2]) if len(sys.argv) == 3 else 80
    over = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(('.hpp', '.h', '.cpp')):
                p = os.path.join(d, f)
                over += [(n, os.path.relpath(p, sys.argv[1]), s, h) for n, s, h in functions(p) if n > limit]
    for n, p, s, h in sorted(over, reverse=True):
        print(f'{p}:{s}: {n} lines (limit {limit}): {h}')
    if over:
        print(f'{len(over)} function(s) in include/ccsb/ over {limit} lines: split each into named steps')
        return 1
    print(f'every function in include/ccsb/ is at most {limit} lines')
    return 0


if __name__ == '__main__':
    sys.exit(main())
