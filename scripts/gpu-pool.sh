#!/usr/bin/env bash
# The pool's throughput on a GPU machine in one device call: builds (the
# Debian -dev packages of .device/debs in a private sysroot, as
# gpu-check.sh does), then runs bench_pool with KR_PROFILE=1 once per value
# of KR_WAIT_SPINS (the engine's poll-before-sleep, microseconds; default
# "2000") and prints each run's table and where a candidate's time went
# (scripts/profile_summary.py). KR_POOL_ARGS: bench_pool's arguments; KR_SOAK:
# a soak after them (below).
# Logs go to $OUT. Run from the tree's root (device-snapshot.sh's .snap).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-pool-out}; mkdir -p "$out"
# shellcheck source=scripts/device-build.sh
. scripts/device-build.sh
b=${BUILD_DIR:-/tmp/build-$(pwd | md5sum | cut -c1-8)}
t0=$(date +%s)
device_build "$b" || exit 1
echo "== bench_pool at $(cat .device/commit 2>/dev/null || git rev-parse --short HEAD), built in $(( $(date +%s) - t0 )) s"
for spin in ${KR_WAIT_SPINS:-2000}; do
  echo "== KR_WAIT_SPIN_US=$spin: bench_pool ${KR_POOL_ARGS:---per-problem 16 --skip-in-process}"
  # shellcheck disable=SC2086
  KR_WAIT_SPIN_US=$spin KR_PROFILE=1 KR_SOURCE_ROOT=$PWD timeout ${KR_POOL_TIMEOUT:-240} \
    $b/bench/bench_pool ${KR_POOL_ARGS:---per-problem 16 --skip-in-process} \
    2> "$out/pool-$spin.err" | tee "$out/pool-$spin.log"
  grep -v '^kreward profile' "$out/pool-$spin.err" | tail -5
  python3 scripts/profile_summary.py "$out/pool-$spin.err"
done
# KR_SOAK=N: then a soak of N evaluations of vector_add candidates, 7 % faulting and 3 %
# hanging (hangs cut at 0.25 s), memory printed every 1000 (KR_SOAK_TIMEOUT, default 330 s:
# about 7,000 fit on an H200 at f4c03cd)
if [ -n "${KR_SOAK:-}" ]; then
  echo "== soak of $KR_SOAK"
  KR_SOURCE_ROOT=$PWD timeout "${KR_SOAK_TIMEOUT:-330}" "$b/bench/bench_pool" --problems 1 \
    --per-problem 100 --soak "$KR_SOAK" --fault-percent 7 --hang-percent 3 --hang-timeout 0.25 \
    --skip-in-process 2> "$out/soak.err" | tee "$out/soak.log" | grep -E "soak|^\| pool"
fi
echo "== done in $(( $(date +%s) - t0 )) s"
