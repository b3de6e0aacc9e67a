#!/usr/bin/env bash
# The whole GPU check in one call, for a GPU machine without package
# registries (see docs/gpu-machine.md): unpacks the Debian -dev packages
# carried in .device/debs into a private sysroot, builds, runs the unit, abi
# and gpu suites and the Python GPU tests, runs the benchmarks, and prints a
# short summary last. Logs and tables go to $OUT (or ./gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
# shellcheck source=scripts/device-build.sh
. scripts/device-build.sh
# a build dir of its own per source tree: a warm machine may hold another tree's
build=${BUILD_DIR:-/tmp/build-$(pwd | md5sum | cut -c1-8)}
# the commit: recorded in .device/commit by device-snapshot.sh (the device copy
# may carry no .git, or one that is not this tree's); else git's
if [ -f .device/commit ]; then
  commit=$(cat .device/commit); dirty=""
else
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  dirty=""
  git status --porcelain 2>/dev/null | grep -qv '^??' && dirty="+dirty"
fi
{
  echo "== gpu-check at commit $commit$dirty on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  [ -f "$build/build.ninja" ] || meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
  ninja -C "$build" >/dev/null || { ninja -C "$build" | tail -30; echo "BUILD FAILED"; }
  "$build/tools/kreward" info
  # KR_GPU_TESTS=0: benchmarks only; KR_GPU_SUITES="gpu": only those suites
  # (the unit suite runs in CI; device time is short)
  [ "${KR_GPU_TESTS:-1}" = 0 ] ||
    meson test -C "$build" --print-errorlogs --num-processes 1 \
      $(for s in ${KR_GPU_SUITES:-unit abi gpu}; do printf -- '--suite %s ' "$s"; done)
} 2>&1 | tee "$out/tests.log"
cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
# what a user sees for one good and one wrong candidate
for c in fast wrong; do
  "$build/tools/kreward" evaluate examples/problems/l2_softmax/problem.json \
    examples/problems/l2_softmax/candidates/$c.cu 2>&1 | tee -a "$out/evaluate.log"
done
logs=("$build/meson-logs/testlog.json")
# KR_PYTEST_ARGS="-k 'not kernelbench' bindings/python/tests": another selection
[ "${KR_GPU_TESTS:-1}" = 0 ] || device_wheels
if [ "${KR_GPU_TESTS:-1}" != 0 ] && [ -d bindings/python/tests ] &&
   python3 -c 'import pytest' 2>/dev/null; then
  KREWARD_LIBRARY=$(ls "$build"/lib/libkreward.so.1) PYTHONPATH=bindings/python${PYTHONPATH:+:$PYTHONPATH} \
    eval python3 -m pytest -q -s -m gpu ${KR_PYTEST_ARGS:-bindings/python/tests} --junitxml="$out/pytest-gpu.xml" 2>&1 \
    | tee "$out/pytest.log" | tail -5
  logs+=("$out/pytest-gpu.xml")
  [ "${KR_GPU_BENCH:-1}" = 0 ] || KREWARD_LIBRARY=$(ls "$build"/lib/libkreward.so.1) \
    PYTHONPATH=bindings/python timeout 300 python3 bench/timing_vs_do_bench.py 2>&1 \
    | tee -a "$out/bench.log" | tail -12
fi
[ "${KR_GPU_BENCH:-1}" = 0 ] && echo "== benchmarks skipped (KR_GPU_BENCH=0)"
# KR_GPU_BENCHES="bench_pool bench_timing" runs only those (device time is short)
benches=$(find "$build/bench" -maxdepth 1 -type f -executable -name 'bench_*' | sort)
[ -n "${KR_GPU_BENCHES:-}" ] && benches=$(for n in $KR_GPU_BENCHES; do echo "$build/bench/$n"; done)
[ "${KR_GPU_BENCH:-1}" = 0 ] && benches=""
for b in $benches; do
  echo "== $(basename "$b")" | tee -a "$out/bench.log"
  # KR_ARGS_bench_pool="--scaling" and the like: a benchmark's own arguments
  args_var="KR_ARGS_$(basename "$b")"
  # shellcheck disable=SC2086
  timeout 300 "$b" ${!args_var:-} 2>&1 | tee -a "$out/bench.log" | tail -40
done
# the defences' cost: this tree against the one before them (old/, put there
# by device-snapshot.sh), in the same run
if [ -d old ] && [ "${KR_GPU_BENCH:-1}" != 0 ] && [ "${KR_DEFENCE_BENCH:-1}" != 0 ]; then
  echo "== bench_defence_cost (old = 324416e)" | tee -a "$out/bench.log"
  old_build=/tmp/build-old-$(pwd | md5sum | cut -c1-8)
  device_build "$old_build" old &&
    timeout 500 python3 bench/bench_defence_cost.py --old "old:$(ls "$old_build"/lib/libkreward.so* | head -1)" \
      --new ".:$(ls "$build"/lib/libkreward.so.1)" 2>&1 | tee -a "$out/bench.log" | tail -8
fi
echo "== summary (commit $commit$dirty)"
python3 scripts/summary.py "${logs[@]}"
