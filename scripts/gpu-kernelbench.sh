#!/usr/bin/env bash
# The KernelBench side of a GPU check in one device call (under 10 minutes):
# builds the library (the Debian -dev packages of .device/debs in a private
# sysroot, as gpu-check.sh does), then, each step with a time limit of its own:
#   1. scripts/sandbox_cuda_probe.py: can CUDA initialise inside the sandbox
#      (the "start" mode), and which grant it lacks;
#   2. the sandbox GPU tests (honest candidates in both modes, the cheats),
#      the torch.compile baseline's test and the attacks' GPU tests (the
#      commitment's Triton kernel: bits and cost; the prepare hole, xfail);
#   3. bench/kernelbench_timing_noise.py: identical code timed as identical?
#   4. bench/bench_kernelbench.py with the time left: KB_ARGS (default: the
#      corpus problems not yet evaluated on a GPU, their Models only).
# Logs and JSON go to $OUT. Run from the tree's root (device-snapshot.sh's .snap).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-kernelbench-out}; mkdir -p "$out"
# shellcheck source=scripts/device-build.sh
. scripts/device-build.sh
b=${BUILD_DIR:-/tmp/build-kb-$(pwd | md5sum | cut -c1-8)}
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
device_build "$b" || exit 1
echo "== built $(cat .device/commit 2>/dev/null || git rev-parse --short HEAD) in $(elapsed) s"
export KREWARD_LIBRARY=$(ls $b/lib/libkreward.so.1) PYTHONPATH=bindings/python
echo "== sandbox probe"
timeout 120 python3 scripts/sandbox_cuda_probe.py 2>&1 | cut -c1-400 | tee $out/probe.log
echo "== sandbox tests ($(elapsed) s)"
timeout 240 python3 -m pytest -q -s -m gpu bindings/python/tests/test_kernelbench_sandbox_gpu.py 2>&1 |
  tee $out/sandbox.log | grep -E '^\{|passed|failed' | cut -c1-300
echo "== torch.compile baseline, the commitment's kernel, the attacks ($(elapsed) s)"
timeout 400 python3 -m pytest -q -s -m gpu \
  "bindings/python/tests/test_kernelbench_gpu.py::test_a_torch_compile_baseline_on_the_gpu" \
  bindings/python/tests/test_kernelbench_attacks_gpu.py \
  bindings/python/tests/test_kernelbench_region.py 2>&1 |
  tee "$out/compile-attacks.log" | grep -E "^\{|^\[|us for 64 MB|passed|failed|xfail" | cut -c1-300
echo "== timing noise ($(elapsed) s)"
timeout 240 python3 bench/kernelbench_timing_noise.py --budget-s 180 --json $out/noise.json 2>&1 | tee $out/noise.log
left=$(( ${KB_TOTAL_S:-560} - $(elapsed) - 30 ))
echo "== bench_kernelbench ($(elapsed) s, $left s left)"
# shellcheck disable=SC2086
[ $left -gt 30 ] && timeout $(( left + 30 )) python3 bench/bench_kernelbench.py --budget-s $left \
  --json $out/kb.json ${KB_ARGS:---all --models-only --problems level3/05 level1/25 level1/26 level1/27} \
  2>&1 | tee $out/kb.log | tail -30
echo "== done in $(elapsed) s"
