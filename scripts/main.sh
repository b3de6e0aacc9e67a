#!/usr/bin/env bash
# The main job: builds libkreward and evaluates the bundled example suite
# (examples/problems: 13 problems over four levels, each with a fast, a slow
# and a wrong candidate). On a GPU machine every candidate is compiled,
# verified, timed against its reference and scored; without a GPU each one
# is compiled and its launch plan checked, and the summary says that
# verification and timing need an NVIDIA GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --build >&2 || exit 1  # no pytest: the main job runs no Python tests
build=${BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null || exit 1
ninja -C "$build" >/dev/null || { ninja -C "$build"; exit 1; }
exec "$build/tools/kreward" suite examples/problems "$@"
