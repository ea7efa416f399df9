#!/usr/bin/env bash
# Prints the README's index of requirement ids to the test files that name
# them (from the [ID] tags of TEST_CASEs).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -rhoE '\[(B|S|P|M|L|N|T|E|X)[0-9]+\]' tests --include='*.cpp' | sort -u | tr -d '[]' |
  sort -t: -k1,1 -V | while read -r id; do
    files=$(grep -rlE "\[$id\]" tests --include='*.cpp' | sort | sed 's/^/`/; s/$/`/' | paste -sd, - | sed 's/,/, /g')
    echo "| $id | $files |"
  done
