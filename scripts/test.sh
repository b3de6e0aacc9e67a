#!/usr/bin/env bash
# Builds libkreward and runs every test suite: unit (CPU), abi, gpu (skipped
# with a reason where no GPU exists) and the Python tests. Prints a summary
# line "N passed, N failed, N skipped" last; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1
build=${BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null || exit 1
ninja -C "$build" || exit 1
meson test -C "$build" --print-errorlogs --num-processes "${KR_TEST_JOBS:-2}"
# the Python binding against this build (GPU tests are marked and skip here)
KREWARD_LIBRARY="$PWD/$build/lib/libkreward.so.1" python3 -m pytest -q \
  bindings/python/tests examples/python/custom_term.py --junitxml="$build/pytest.xml"
python3 scripts/summary.py "$build/meson-logs/testlog.json" "$build/pytest.xml"
