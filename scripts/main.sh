#!/usr/bin/env bash
# The main job: builds libkreward and evaluates the bundled suites: the
# kreward problems (examples/problems: 13 problems over four levels, each
# with a fast, a slow and a wrong candidate) and, where torch is installed,
# the KernelBench corpus's candidates (examples/kernelbench: honest ones and
# cheats). On a GPU machine every candidate is compiled, verified, timed
# against its reference and scored; without a GPU each kreward candidate is
# compiled and its launch plan checked, each KernelBench problem imported,
# and the summaries say that verification and timing need an NVIDIA GPU.
# Progress goes to stderr; the tables to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
say() { echo "main: $*" >&2; }
say "checking the build dependencies (scripts/deps.sh --build)"
bash scripts/deps.sh --build >&2 || exit 1  # no pytest: the main job runs no Python tests
build=${BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  say "configuring $build (meson setup)"
  meson setup "$build" >/dev/null || exit 1
fi
say "building libkreward, kreward-worker and the kreward CLI in $build (the first time takes a minute or two)"
ninja -C "$build" >/dev/null || { ninja -C "$build"; exit 1; }
say "evaluating the kreward problems: $build/tools/kreward suite examples/problems"
"$build/tools/kreward" suite examples/problems "$@"
status=$?
if python3 -c 'import torch' 2>/dev/null; then
  say "evaluating the KernelBench candidates: $build/tools/kreward suite examples/kernelbench"
  "$build/tools/kreward" suite examples/kernelbench || status=1
else
  say "KernelBench candidates not evaluated: they run on torch, which this Python lacks" \
      "(pip install torch; then $build/tools/kreward suite examples/kernelbench)"
fi
exit $status
