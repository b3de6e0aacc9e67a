#!/usr/bin/env bash
# A GPU round in one device call (under the device tool's 10 minutes): builds
# the tree (scripts/device-build.sh's sysroot), then runs the steps GR_STEPS
# names, in the order it names them, each under a limit of its own cut to what is left of
# GR_TOTAL_S (default 570 s), so a slow step cannot take the others' logs with
# it when the call is killed:
#   gpu          the meson gpu suite's C tests and the bundled suite (GR_GPU_TESTS)
#   adversarial  tests/adversarial/run.py --require-gpu (GR_ADV_ONLY: one case)
#   py           the C path's Python GPU tests (not kernelbench/, not vet/)
#   fastref      the problems' fast references (test_fast_reference_gpu.py)
#   rail         both kinds in one batch through the Evaluator, TRL and verl,
#                and behind kreward serve (OpenRLHF, slime, KernelGYM's reference_code)
#   vet          the vetting GPU tests
#   vetcorpus    kreward problems vet on GR_VET_PATHS (default: the bundled corpus;
#                upstream/ too where device-snapshot.sh put it), -j GR_VET_JOBS
#                (12), GR_VET_ARGS (--no-compile ...), under GR_VET_LIMIT s (400);
#                resumes from vet-resume/vet.jsonl (KR_SNAP_VET_RESUME),
#                brings back vet.jsonl and summary.md
#   kb           the KernelBench GPU tests: sandbox, attacks, region, corpus
#                (GR_KB_TESTS: a selection of them; GR_KB_LIMIT s, 300)
#   pool         bench_pool --per-problem 16 --profile (and GR_POOL_ARGS)
#   poolab       the same without the in-process row, first with GR_POOLAB_OFF
#                set (default: the problems' fast references and the GPU
#                workers' problem affinity turned off, KR_FAST_REFERENCE=0
#                KR_POOL_AFFINITY=0), then without
#   timing       bench_timing (error against CUPTI, run-to-run CV)
#   evalbatch    bench/bench_evaluator.py --profile: the trainer's path, kreward.Evaluator
#                pool against in process (GR_EVAL_ARGS)
#   geninfo      bench_inputs (the generator's GB/s per dtype and distribution,
#                the check kernels' read GB/s), the generic generator kernel
#                (KR_GEN_SPECIALISED=0) then the default; then
#                ncu (where the machine lets it read counters) on one launch of
#                each of GR_GEN_ROWS (e.g. "f32:mix-uniform")
#   profstart    bench/profiler_start_cost.py (attribution's cost: torch.profiler, CUPTI alone)
#   kbbatch      bench/bench_kernelbench_batch.py (GR_KBBATCH_ARGS: its variants, sizes; GR_KBBATCH_LIMIT s, 300)
#   kbtimed      bench/kb_timed_profile.py: the caller's timed phases under cProfile,
#                inputs made apart (as before) against in place (GR_TIMED_ARGS)
#   kbfirst      bench/kb_first_go_probe.py: a worker's requests in one process
#                (no IPC, no sandbox), its first batch under cProfile (GR_FIRST_ARGS)
#   wstart       bench/bench_worker_start.py: a ModelNew worker's start by exec
#                and forked from the zygote, per start and per candidate
#   kbbench      bench/bench_kernelbench.py with the time left (GR_KB_ARGS)
#   kbprobe      bench/kb_timing_probe.py: where a ModelNew timed batch's per-call
#                time goes (host against GPU, per batch) and the proposed fixes'
#                A/B, unpinned then pinned to GR_PROBE_PIN (default "3"); JSON back
#   defence      bench/bench_defence_cost.py: this tree against old/ (the tree
#                before the defences, device-snapshot.sh's KR_SNAP_OLD=1)
# Every step's log goes to $OUT/<step>.log; the last lines are a summary per
# step. Default steps: "gpu adversarial py kb vet".
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-round-out}; mkdir -p "$out"
# shellcheck source=scripts/device-build.sh
. scripts/device-build.sh
b=${BUILD_DIR:-/tmp/build-round-$(pwd | md5sum | cut -c1-8)}
total=${GR_TOTAL_S:-570}
steps=" ${GR_STEPS:-gpu adversarial py kb vet} "
commit=$(cat .device/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
summary=()
note() { summary+=("$1"); echo "== $1"; }
device_build "$b" || exit 1
note "built $commit in $(elapsed) s on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
export KREWARD_LIBRARY=$(ls $b/lib/libkreward.so.1) PYTHONPATH=bindings/python
device_wheels
pyt() {  # pyt STEP LIMIT ARGS...: pytest -m gpu, its last line into the summary
  local step=$1 lim; lim=$(limit "$2"); shift 2
  timeout -k 5 "$lim" python3 -m pytest -q -s -m gpu -p no:cacheprovider "$@" > "$out/$step.log" 2>&1
  local rc=$?
  grep -E "^(FAILED|ERROR) " "$out/$step.log" | cut -c1-300
  note "$step (rc $rc, limit $lim s, at $(elapsed) s): $(grep -E '(passed|failed|skipped|error)' "$out/$step.log" | tail -1)"
}
step_gpu() {
  lim=$(limit 240)
  # shellcheck disable=SC2046
  timeout -k 5 "$lim" meson test -C "$b" --no-rebuild --print-errorlogs --num-processes 1 \
    ${GR_GPU_TESTS:-$(for t in program generator checks verify bench sanity fault fault_late fault_reference hang hang_refused pool counters; do printf 'gpu_%s ' $t; done) gpu_suite} \
    > "$out/gpu.log" 2>&1
  rc=$?
  cp "$b/meson-logs/testlog.txt" "$out/gpu-testlog.txt" 2>/dev/null  # every test's whole output
  grep -E "^ *[0-9]+/[0-9]+ " "$out/gpu.log" | grep -v " OK " | cut -c1-200
  note "gpu suite (rc $rc, limit $lim s, at $(elapsed) s): $(grep -E '^(Ok|Fail|Skipped|Timeout):' "$out/gpu.log" | tr -s ' ' | tr '\n' ' ')"
}
step_adversarial() {
  lim=$(limit 240)
  timeout -k 5 "$lim" python3 tests/adversarial/run.py "$b/tools/kreward" . --require-gpu \
    ${GR_ADV_ONLY:+--only "$GR_ADV_ONLY"} > "$out/adversarial.log" 2>&1
  rc=$?
  grep -viE "^ok|^pass" "$out/adversarial.log" | cut -c1-300 | tail -25
  note "adversarial (rc $rc, limit $lim s, at $(elapsed) s): $(tail -1 "$out/adversarial.log")"
}
step_py() {
  pyt py 200 bindings/python/tests --ignore=bindings/python/tests/kernelbench --ignore=bindings/python/tests/vet
}
step_fastref() {
  pyt fastref 150 bindings/python/tests/test_fast_reference_gpu.py
}
step_rail() {
  pyt rail 300 bindings/python/tests/test_rail_gpu.py \
    bindings/python/tests/test_serve_gpu.py::test_server_both_kinds_on_the_gpu
}
step_vet() {
  pyt vet 200 bindings/python/tests/vet/test_vet_gpu.py
}
step_vetcorpus() {
  lim=$(limit "${GR_VET_LIMIT:-400}")
  local run=/tmp/vet-run-$(pwd | md5sum | cut -c1-8) paths=${GR_VET_PATHS:-}
  [ -n "$paths" ] || paths="examples/kernelbench/level1 examples/kernelbench/level2 examples/kernelbench/level3 examples/problems$([ -d upstream ] && echo " upstream")"
  mkdir -p "$run"
  # imports made ahead on another machine (device-snapshot.sh's KR_SNAP_IMPORT_CACHE)
  [ -d import-cache ] && export KREWARD_IMPORT_CACHE=$PWD/import-cache
  # an earlier run's log, in a folder marked as a vetting run's (vet/output.py)
  [ -f vet-resume/vet.jsonl ] && [ ! -f "$run/vet.jsonl" ] && cp vet-resume/vet.jsonl "$run/"
  [ -f "$run/vet.jsonl" ] && echo "a kreward problems vet run's folder" > "$run/.kreward-vet"
  # the log copied out every 10 s: a call killed mid-run still brings back what finished
  ( while sleep 10; do cp "$run/vet.jsonl" "$out/" 2>/dev/null; done ) &
  local copier=$!
  # shellcheck disable=SC2086
  timeout -k 10 "$lim" python3 -m kreward.vet $paths --out "$run" -j "${GR_VET_JOBS:-12}" --quiet ${GR_VET_ARGS:-} \
    > "$out/vetcorpus.log" 2>&1
  rc=$?
  kill "$copier" 2>/dev/null
  cp "$run/vet.jsonl" "$run/summary.md" "$out/" 2>/dev/null
  tail -20 "$run/summary.md" 2>/dev/null
  note "vetcorpus (rc $rc, limit $lim s, at $(elapsed) s): $(grep -c . "$run/vet.jsonl" 2>/dev/null) records in vet.jsonl"
}
step_kb() {
  # shellcheck disable=SC2086
  pyt kb "${GR_KB_LIMIT:-300}" ${GR_KB_TESTS:-bindings/python/tests/kernelbench}
}
step_pool() {
  lim=$(limit 150)
  # shellcheck disable=SC2086
  timeout -k 5 "$lim" "$b/bench/bench_pool" --per-problem 16 --profile ${GR_POOL_ARGS:-} > "$out/pool.log" 2>&1
  rc=$?; tail -25 "$out/pool.log"
  note "pool (rc $rc, at $(elapsed) s): $(grep -iE "candidates/s" "$out/pool.log" | head -3 | tr -s ' ' | tr '\n' ';')"
}
step_poolab() {
  local side
  for side in off on; do
    lim=$(limit 150)
    # shellcheck disable=SC2046
    env $([ $side = off ] && echo ${GR_POOLAB_OFF:-KR_FAST_REFERENCE=0 KR_POOL_AFFINITY=0}) timeout -k 5 "$lim" "$b/bench/bench_pool" \
      --per-problem 16 --profile --skip-in-process ${GR_POOL_ARGS:-} > "$out/pool-$side.log" 2>&1
    rc=$?; grep -A12 "per problem" "$out/pool-$side.log" | head -28
    note "pool, ${GR_POOLAB_OFF:-KR_FAST_REFERENCE=0 KR_POOL_AFFINITY=0} $([ $side = off ] && echo set || echo unset) (rc $rc, at $(elapsed) s): $(grep -E '^\| pool' "$out/pool-$side.log" | head -2 | tr -s ' ' | tr '\n' ';')"
  done
}
step_timing() {
  lim=$(limit 120)
  timeout -k 5 "$lim" "$b/bench/bench_timing" > "$out/timing.log" 2>&1
  rc=$?; tail -20 "$out/timing.log"
  note "timing (rc $rc, at $(elapsed) s)"
}
step_evalbatch() {
  lim=$(limit 200)
  # shellcheck disable=SC2086
  timeout -k 5 "$lim" python3 bench/bench_evaluator.py --profile ${GR_EVAL_ARGS:-} > "$out/evalbatch.log" 2>&1
  rc=$?; tail -30 "$out/evalbatch.log"
  note "evalbatch (rc $rc, at $(elapsed) s): $(grep -E '^\| Evaluator' "$out/evalbatch.log" | tr -s ' ' | tr '\n' ';')"
}
step_geninfo() {
  lim=$(limit 150)
  echo "== the generic kernel for every distribution (KR_GEN_SPECIALISED=0)" > "$out/geninfo.log"
  KR_GEN_SPECIALISED=0 timeout -k 5 "$lim" "$b/bench/bench_inputs" >> "$out/geninfo.log" 2>&1
  echo "== the specialised kernels (the default)" >> "$out/geninfo.log"
  timeout -k 5 "$lim" "$b/bench/bench_inputs" >> "$out/geninfo.log" 2>&1
  rc=$?; cat "$out/geninfo.log"
  local row
  for row in ${GR_GEN_ROWS:-}; do
    echo "== ncu $row" >> "$out/geninfo.log"
    timeout -k 5 60 ncu --clock-control none -k regex:kr_generate -s 1 -c 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats --section InstructionStats --section LaunchStats \
      "$b/bench/bench_inputs" "$row" --once >> "$out/geninfo.log" 2>&1 || echo "ncu rc $?" >> "$out/geninfo.log"
  done
  note "geninfo (rc $rc, at $(elapsed) s): $(grep -E '^\| (f32|bf16|f16) ' "$out/geninfo.log" | cut -d'|' -f2-4 | tr -s ' ' | tr '\n' ';') checks: $(grep -E '^\| (compare|hash|bitdiff)' "$out/geninfo.log" | tail -8 | cut -d'|' -f2-3 | tr -s ' ' | tr '\n' ';')"
}
step_profstart() {
  lim=$(limit 120)
  timeout -k 5 "$lim" python3 bench/profiler_start_cost.py > "$out/profstart.log" 2>&1
  rc=$?; cat "$out/profstart.log" | tail -40
  note "profstart (rc $rc, at $(elapsed) s)"
}
step_kbprobe() {
  lim=$(limit 300)
  timeout -k 5 "$((lim / 2))" python3 bench/kb_timing_probe.py --out "$out/kb_timing_probe.json" \
    > "$out/kbprobe.log" 2>&1
  rc=$?
  timeout -k 5 "$((lim / 2))" python3 bench/kb_timing_probe.py --pin "${GR_PROBE_PIN:-3}" --no-kernels \
    --out "$out/kb_timing_probe_pinned.json" > "$out/kbprobe-pinned.log" 2>&1
  local pinned=$?
  tail -12 "$out/kbprobe.log"
  note "kbprobe (rc $rc, pinned rc $pinned, limit $lim s, at $(elapsed) s): $(grep -c '"problem"' "$out/kbprobe.log") rows"
}
step_kbtimed() {
  lim=$(limit 200)
  # shellcheck disable=SC2086
  timeout -k 5 "$lim" python3 bench/kb_timed_profile.py ${GR_TIMED_ARGS:-} > "$out/kbtimed.log" 2>&1
  rc=$?; tail -9 "$out/kbtimed.log"
  note "kbtimed (rc $rc, limit $lim s, at $(elapsed) s)"
}
step_kbfirst() {
  lim=$(limit 150)
  # shellcheck disable=SC2086
  timeout -k 5 "$lim" python3 bench/kb_first_go_probe.py --json "$out/kbfirst.json" ${GR_FIRST_ARGS:-} \
    > "$out/kbfirst.log" 2>&1
  rc=$?; grep -E "^(==|\| (go|prepare|ready|seal) )" "$out/kbfirst.log" | head -40
  note "kbfirst (rc $rc, limit $lim s, at $(elapsed) s): $(grep -E '^\| go 0 ' "$out/kbfirst.log" | tr -s ' ' | tr '\n' ';')"
}
step_wstart() {
  lim=$(limit 300)
  timeout -k 5 "$lim" python3 bench/bench_worker_start.py > "$out/wstart.log" 2>&1
  rc=$?; tail -8 "$out/wstart.log"
  note "wstart (rc $rc, limit $lim s, at $(elapsed) s): $(grep -E '^ratio' "$out/wstart.log")"
}
step_kbbatch() {
  lim=$(limit "${GR_KBBATCH_LIMIT:-300}")
  # shellcheck disable=SC2086
  timeout -k 5 "$lim" python3 bench/bench_kernelbench_batch.py --json "$out/kbbatch.json" \
    ${GR_KBBATCH_ARGS:-} > "$out/kbbatch.log" 2>&1
  rc=$?; tail -30 "$out/kbbatch.log"
  note "kbbatch (rc $rc, limit $lim s, at $(elapsed) s): $(grep -E '/s, ' "$out/kbbatch.log" | tr '\n' ';')"
}
step_kbbench() {
  local left=$(( total - $(elapsed) - 30 ))
  [ $left -gt 30 ] || { note "kbbench (not run: ${left} s left)"; return; }
  # shellcheck disable=SC2086
  timeout $(( left + 20 )) python3 bench/bench_kernelbench.py --budget-s $left --json "$out/kb.json" \
    ${GR_KB_ARGS:-} > "$out/kbbench.log" 2>&1
  rc=$?; tail -30 "$out/kbbench.log"
  note "kbbench (rc $rc, at $(elapsed) s)"
}
step_defence() {
  [ -d old ] || { note "defence (not run: no old/ tree; KR_SNAP_OLD=1 device-snapshot.sh)"; return; }
  lim=$(limit 300)
  local old_build=/tmp/build-old-$(pwd | md5sum | cut -c1-8)
  device_build "$old_build" old > "$out/defence.log" 2>&1 || { note "defence (old tree did not build)"; return; }
  timeout -k 5 "$lim" python3 bench/bench_defence_cost.py ${GR_DEFENCE_ARGS:-} \
    --old "old:$(ls "$old_build"/lib/libkreward.so* | head -1)" --new ".:$KREWARD_LIBRARY" >> "$out/defence.log" 2>&1
  rc=$?; tail -12 "$out/defence.log"
  note "defence (rc $rc, limit $lim s, at $(elapsed) s): $(grep -iE "ratio|x$" "$out/defence.log" | tail -3 | tr '\n' ';')"
}
for step in $steps; do
  if declare -F "step_$step" > /dev/null; then "step_$step"; else note "$step: no such step"; fi
done
echo "== summary ($commit, $(elapsed) s)"
printf '%s\n' "${summary[@]}"
