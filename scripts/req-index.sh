#!/usr/bin/env bash
# Prints the index of requirement ids (docs/requirements.md) to the test
# files whose TEST_CASEs carry them as tags ([N3] ...).
set -euo pipefail
cd "$(dirname "$0")/.."
# One line per TEST_CASE ("file:declaration"), joined with the next line for
# declarations whose tags wrap.
cases=$(find tests -name '*.cpp' -print0 | sort -z |
  xargs -0 awk '/TEST_CASE\(/ { decl = FILENAME ":" $0; getline nxt; print decl " " nxt }')
echo "$cases" | grep -oE '\[(B|S|P|M|L|N|T|E|X)[0-9]+\]' | tr -d '[]' | sort -u -V | while read -r id; do
  files=$(echo "$cases" | grep -F "[$id]" | cut -d: -f1 | sort -u | sed 's/^/`/; s/$/`/' | paste -sd, - | sed 's/,/, /g')
  echo "| $id | $files |"
done
