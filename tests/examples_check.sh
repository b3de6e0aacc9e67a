#!/usr/bin/env bash
# unit: every example problem parses and passes its static checks, every
# manifest entry exists and compiles with a plan that fits (the suite run
# compile-only: KREWARD_DEVICE=none).
set -uo pipefail
kreward=$1 root=$2
status=0
for p in "$root"/examples/problems/*/problem.json; do
  out=$(KREWARD_DEVICE=none "$kreward" problem check --static "$p" 2>&1) || { echo "$out"; status=1; }
  echo "$out" | grep -q "^warning" && { echo "$p:"; echo "$out" | grep "^warning"; status=1; }
done
n=$(ls -d "$root"/examples/problems/*/ | wc -l)
[ "$n" -ge 12 ] || { echo "only $n example problems (want at least 12)"; status=1; }
KREWARD_DEVICE=none "$kreward" suite "$root/examples/problems" || status=1
exit $status
