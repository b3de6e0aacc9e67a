#!/usr/bin/env bash
# The KernelBench side of a GPU check in one device call (under 10 minutes):
# builds the library (the Debian -dev packages of .device/debs in a private
# sysroot, as gpu-check.sh does), then, each step with a time limit of its own:
#   1. scripts/sandbox_cuda_probe.py: can CUDA initialise inside the sandbox
#      (the "start" mode), and which grant it lacks;
#   2. the sandbox GPU tests (honest candidates in both modes, the cheats),
#      the torch.compile baseline's test, the region's and the attacks' GPU
#      tests (the mask's and the commitment's Triton kernels: bits and cost;
#      the cheats before the clock and their control) and bench_keystream;
#   2b. "candidates" (not in the default steps): the corpus's ModelNew
#      candidates against their expectations (KB_CANDIDATES_K: a pytest -k
#      filter on their ids, e.g. "decoy");
#   3. bench/gpu_idle_clock.py ("clock", not in the default steps): does an
#      idle GPU slow the batch after it, and does a spin undo it?
#      bench/bench_staging.py ("staging", not in the default steps either):
#      a batch's inputs through pageable host memory, registered, or IPC?
#      bench/profiler_after_cost.py ("profiler", not in the default steps):
#      do launches slow down after a torch.profiler session?
#      bench/process_placement.py ("placement", not in the default steps):
#      is a launch-bound call's speed the process's luck, and does pinning
#      the processes to the GPU's cores remove it?
#      bench/bench_in_flight.py ("inflight", not in the default steps):
#      candidates/s one at a time against several in flight per GPU, and the
#      speedups' spread (KB_INFLIGHT_ARGS, e.g. "--k 1 4 --candidates 16");
#      bench/kernelbench_timing_noise.py: identical code timed as identical?
#      (KB_NOISE_ARGS: its arguments, e.g. --repeats 5)
#   "upstream" (not in the default steps): bench/bench_kernelbench.py on the
#      upstream KernelBench problems device-snapshot.sh copied (KR_SNAP_UPSTREAM)
#      into upstream/, their Models, kreward's side only (KB_UPSTREAM_ARGS: e.g.
#      "--problems level1/19_ level2/1_"; KB_UPSTREAM_S: its seconds, default 240);
#   4. bench/bench_kernelbench.py with the time left: KB_ARGS (default: the
#      corpus problems not yet evaluated on a GPU, their Models only).
# Every step's time limit is cut to what is left of KB_TOTAL_S (default 540 s,
# under the device tool's 600 s a call: at ad4bbcc the fixed limits added up
# past it and the call was killed with the attacks half run). KB_STEPS picks
# steps (default "probe sandbox attacks noise bench"), KB_PROBE the probe's
# variants (default all), KB_SANDBOX_K a pytest -k filter for the sandbox tests.
# Logs and JSON go to $OUT. Run from the tree's root (device-snapshot.sh's .snap).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-kernelbench-out}; mkdir -p "$out"
# shellcheck source=scripts/device-build.sh
. scripts/device-build.sh
b=${BUILD_DIR:-/tmp/build-kb-$(pwd | md5sum | cut -c1-8)}
total=${KB_TOTAL_S:-540}
steps=" ${KB_STEPS:-probe sandbox attacks noise bench} "
device_build "$b" || exit 1
echo "== built $(cat .device/commit 2>/dev/null || git rev-parse --short HEAD) in $(elapsed) s"
export KREWARD_LIBRARY=$(ls $b/lib/libkreward.so.1) PYTHONPATH=bindings/python
if want probe; then
  echo "== sandbox probe"
  # shellcheck disable=SC2086
  timeout "$(limit 120)" python3 scripts/sandbox_cuda_probe.py ${KB_PROBE:-} 2>&1 | cut -c1-400 | tee $out/probe.log
fi
if want sandbox; then
  echo "== sandbox tests ($(elapsed) s)"
  timeout "$(limit 240)" python3 -m pytest -q -s -m gpu bindings/python/tests/kernelbench/test_sandbox_gpu.py \
    ${KB_SANDBOX_K:+-k "$KB_SANDBOX_K"} 2>&1 | tee $out/sandbox.log | grep -E '^\{|passed|failed' | cut -c1-300
fi
if want attacks; then
  echo "== torch.compile baseline, the commitment's kernel, the mask's kernel, the attacks ($(elapsed) s)"
  timeout "$(limit 300)" python3 -m pytest -q -s -m gpu \
    "bindings/python/tests/kernelbench/test_gpu.py::test_a_torch_compile_baseline_on_the_gpu" \
    bindings/python/tests/kernelbench/test_region.py \
    bindings/python/tests/kernelbench/test_attacks_gpu.py 2>&1 |
    tee "$out/compile-attacks.log" | grep -E "^\{|^\[|\[\(|us for 64 MB|passed|failed|xfail|^E " | cut -c1-400
  timeout "$(limit 90)" python3 bench/bench_keystream.py 2>&1 | tee "$out/keystream.log" | grep "^|"
fi
if want candidates; then
  echo "== corpus candidates (-k ${KB_CANDIDATES_K:-all}) ($(elapsed) s)"
  timeout "$(limit 240)" python3 -m pytest -q -s -m gpu bindings/python/tests/kernelbench/test_gpu.py \
    -k "test_candidates${KB_CANDIDATES_K:+ and ($KB_CANDIDATES_K)}" 2>&1 | tee $out/candidates.log |
    grep -E '^\{|passed|failed' | cut -c1-300
fi
if want clock; then
  echo "== an idle GPU before a batch ($(elapsed) s)"
  timeout "$(limit 120)" python3 bench/gpu_idle_clock.py 2>&1 | tee $out/clock.log
fi
if want profiler; then
  echo "== launches after a profiler session ($(elapsed) s)"
  timeout "$(limit 120)" python3 bench/profiler_after_cost.py 2>&1 | tee $out/profiler.log
fi
if want placement; then
  echo "== a launch-bound call's speed per process: free or pinned ($(elapsed) s)"
  # shellcheck disable=SC2086
  timeout "$(limit 180)" python3 bench/process_placement.py ${KB_PLACEMENT_ARGS:-} 2>&1 | tee $out/placement.log
fi
if want inflight; then
  echo "== candidates in flight per GPU: candidates/s and the speedups' spread ($(elapsed) s)"
  # shellcheck disable=SC2086
  timeout "$(limit 300)" python3 bench/bench_in_flight.py --json $out/inflight.json ${KB_INFLIGHT_ARGS:-} 2>&1 |
    tee $out/inflight.log
fi
if want staging; then
  echo "== a batch's staging: pageable, registered, CUDA IPC ($(elapsed) s)"
  timeout "$(limit 90)" python3 bench/bench_staging.py 2>&1 | tee $out/staging.log
  timeout "$(limit 90)" python3 bench/bench_staging.py --sandbox 2>&1 | tee -a $out/staging.log
fi
if want noise; then
  echo "== timing noise ($(elapsed) s)"
  # its JSON is written at the end: its own budget ends a minute before the limit
  lim=$(limit 240)
  # shellcheck disable=SC2086
  timeout -k 10 "$lim" python3 bench/kernelbench_timing_noise.py --budget-s $(( lim > 90 ? lim - 60 : 30 )) \
    --json $out/noise.json ${KB_NOISE_ARGS:-} 2>&1 | tee $out/noise.log
fi
if want upstream && [ -d upstream ]; then
  echo "== upstream KernelBench problems ($(elapsed) s)"
  lim=$(limit "${KB_UPSTREAM_S:-240}")
  # shellcheck disable=SC2086
  timeout $(( lim + 20 )) python3 bench/bench_kernelbench.py --problems-dir upstream --no-kernelbench \
    --budget-s $(( lim > 60 ? lim - 50 : 10 )) --json $out/upstream.json ${KB_UPSTREAM_ARGS:-} 2>&1 |
    tee $out/upstream.log | grep -E "^  level|phases|totals|not run" | cut -c1-330
elif want upstream; then
  echo "== upstream: no upstream/ here (device-snapshot.sh with KR_SNAP_UPSTREAM=<KernelBench/>)"
fi
left=$(( total - $(elapsed) - 30 ))
if want bench && [ $left -gt 30 ]; then
  echo "== bench_kernelbench ($(elapsed) s, $left s left)"
  # shellcheck disable=SC2086
  timeout $(( left + 20 )) python3 bench/bench_kernelbench.py --budget-s $left \
    --json $out/kb.json ${KB_ARGS:---all --models-only --problems level3/05 level1/25 level1/26 level1/27} \
    2>&1 | tee $out/kb.log | tail -30
fi
echo "== done in $(elapsed) s"
