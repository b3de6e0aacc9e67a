#!/usr/bin/env bash
# unit: the kreward command line's option parsing, without a GPU
# (KREWARD_DEVICE=none): "--opt value" and "--opt=value" give the same
# result, -h/--help works on every command and verb (usage on stdout, exit
# 0), an unknown option, a missing value or a value refused exits 2 with one
# line on stderr naming the option and pointing to --help. Then the
# papercuts a new user met: empty candidates, --json on errors, filters,
# rows without a GPU, problem show, unknown presets. Then the report pages:
# `kreward report` (python3 -m kreward.pages) and `kreward suite --html`.
# Usage: cli_check.sh KREWARD SOURCE_ROOT
set -uo pipefail
kreward=$1 root=$2
problem=$root/examples/problems/l1_vector_add/problem.json
cand=$root/examples/problems/l1_vector_add/candidates/fast.cu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KREWARD_DEVICE=none KREWARD_CACHE_DIR=$tmp/cache
failures=0

fail() {
  echo "FAIL: $*"
  echo "  stdout: $(head -c 600 "$tmp/out")"
  echo "  stderr: $(head -c 600 "$tmp/err")"
  failures=$((failures + 1))
}

# run ARGS...: runs kreward; $rc, $tmp/out and $tmp/err hold what it did
run() {
  "$kreward" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# expect_ok ARGS...: exit 0
expect_ok() {
  run "$@"
  [ "$rc" -eq 0 ] || fail "kreward $* exited $rc, want 0"
}

# expect_usage_error WORD ARGS...: exit 2, nothing on stdout, and one line on
# stderr that contains WORD and points to --help
expect_usage_error() {
  local word=$1
  shift
  run "$@"
  if [ "$rc" -ne 2 ]; then
    fail "kreward $* exited $rc, want 2"
  elif [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    fail "kreward $*: want one line on stderr and nothing on stdout"
  elif ! grep -qF -- "$word" "$tmp/err" || ! grep -qF -- "--help" "$tmp/err"; then
    fail "kreward $*: the message should name '$word' and point to --help"
  fi
}

# the kernels listing of a compile: its first line without the compile time
# and cache result, which change from run to run
listing() {
  sed '1s/, compile .*//' "$tmp/out"
}

# commands that hand over to Python (report, the page of suite --html) load
# this build's library into python3: a sanitizer build's cannot be loaded
# there (its runtime must come first), so they are checked in the normal
# build only
python_ok=1
# (grep reads ldd's whole output: with -q it may stop early, ldd then dies
# of SIGPIPE, and under pipefail the test read as false)
if ldd "$kreward" 2>/dev/null | grep -E 'lib(asan|ubsan)' > /dev/null; then
  python_ok=0
  echo "skip: the Python-backed checks (report, suite --html): a sanitizer build's library cannot load into python3"
fi
python_commands=""
[ "$python_ok" = 1 ] && python_commands="report"

# --version, and help everywhere
expect_ok --version
grep -qE '^kreward [0-9]+\.[0-9]+' "$tmp/out" || fail "--version prints 'kreward X.Y.Z'"
for cmd in "info" "compile" "problem" "problem show" "problem check" "problems" "evaluate" "suite" \
  $python_commands; do
  for h in -h --help; do
    # shellcheck disable=SC2086 # $cmd is one or two words
    expect_ok $cmd $h
    grep -q "^usage: kreward $cmd" "$tmp/out" || fail "kreward $cmd $h prints its usage on stdout"
    [ -s "$tmp/err" ] && fail "kreward $cmd $h writes nothing on stderr"
  done
done
expect_ok problem show --help
grep -q -- "--json" "$tmp/out" || fail "problem show --help names --json"

# compile: --arch=sm_80 and --arch sm_80 give the same kernels, for sm_80
expect_ok compile --arch=sm_80 "$cand"
joined=$(listing)
expect_ok compile "$cand" --arch sm_80
[ "$joined" = "$(listing)" ] || fail "compile --arch=sm_80 and --arch sm_80 differ"
echo "$joined" | head -1 | grep -q "arch sm_80" || fail "compile --arch=sm_80 compiles for sm_80"
echo "$joined" | grep -q "^  add4$" || fail "compile lists the kernel add4"
# short options, attached or not; "--" ends the options
expect_ok compile -DKR_CLI_TEST=1 -I"$root/include" "$cand"
attached=$(listing)
expect_ok compile -D KR_CLI_TEST=1 -I "$root/include" -- "$cand"
[ "$attached" = "$(listing)" ] || fail "compile -DX=1 -IDIR and -D X=1 -I DIR differ"
expect_ok compile --time-limit=60 --std=c++17 --no-cache -o "$tmp/out.cubin" "$cand"
[ -s "$tmp/out.cubin" ] || fail "compile -o FILE writes the image"
expect_ok compile --json --arch sm_80 "$cand"
grep -q '"arch": "sm_80"' "$tmp/out" || fail "compile --json --arch sm_80 prints JSON for sm_80"

# problem show: options before or after FILE
expect_ok problem show --json "$problem"
before=$(cat "$tmp/out")
expect_ok problem show "$problem" --json
[ "$before" = "$(cat "$tmp/out")" ] || fail "problem show --json FILE and FILE --json differ"
grep -q '"name": "vector_add"' "$tmp/out" || fail "problem show --json prints the problem"
expect_ok problem check --static "$problem"
grep -q "not asked for (--static)" "$tmp/out" || fail "problem check --static says what it left out"
# the soundness checks asked for and unable to run (no device): not a pass, exit 3
KREWARD_DEVICE=none "$kreward" problem check "$problem" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 3 ] || fail "problem check without a device exits 3, not $rc"
grep -q "soundness checks could not run" "$tmp/err" || fail "problem check says what did not run"

# evaluate: the evaluation options in both forms (not_run without a GPU)
for preset in "--preset=fast" "--preset fast" "--preset=precise"; do
  # shellcheck disable=SC2086 # $preset is one or two words
  expect_ok evaluate "$problem" "$cand" $preset --seed=7 --reward=kevin --no-bench
  grep -q "fast.cu: not_run" "$tmp/out" || fail "evaluate $preset: want a not_run summary"
done
expect_ok evaluate --json --seed 7 --reward kevin "$problem" "$cand"
grep -q '"verdict": "not_run"' "$tmp/out" || fail "evaluate --json prints the report"
expect_ok suite "$root/examples/problems" --filter=l1_vector_add --jsonl="$tmp/a.jsonl"
expect_ok suite "$root/examples/problems" --filter l1_vector_add --jsonl "$tmp/b.jsonl"
if [ "$(wc -l <"$tmp/a.jsonl")" -ne 3 ] || [ "$(wc -l <"$tmp/b.jsonl")" -ne 3 ]; then
  fail "suite --filter=X and --filter X each evaluate l1_vector_add's 3 candidates"
fi

# unknown options, missing values, refused values: exit 2, one line
expect_usage_error "--bogus" compile "$cand" --bogus
expect_usage_error "--bogus" compile --bogus=1 "$cand"
expect_usage_error "-x" compile -x "$cand"
expect_usage_error "--bogus" problem show "$problem" --bogus
expect_usage_error "--json" problem check "$problem" --json
expect_usage_error "--bogus" evaluate "$problem" "$cand" --bogus
expect_usage_error "--bogus" suite "$root/examples/problems" --bogus
expect_usage_error "--bogus" info --bogus
expect_usage_error "--bogus" --bogus
expect_usage_error "--arch" compile "$cand" --arch
expect_usage_error "-o" compile "$cand" -o
expect_usage_error "--preset" evaluate "$problem" "$cand" --preset
expect_usage_error "--jsonl" suite "$root/examples/problems" --jsonl
expect_usage_error "--html" suite "$root/examples/problems" --html
expect_usage_error "--preset" evaluate "$problem" "$cand" --preset=slow
expect_usage_error "--seed" evaluate "$problem" "$cand" --seed=zero
expect_usage_error "--time-limit" compile "$cand" --time-limit=soon
expect_usage_error "--json" evaluate "$problem" "$cand" --json=yes
expect_usage_error "--n" compile "$cand" --n x
expect_usage_error "frob" problem frob "$problem"
# a missing FILE prints the usage on stderr, still exit 2
run problem show
if [ "$rc" -ne 2 ] || ! grep -q "^usage: kreward problem show" "$tmp/err"; then
  fail "problem show without FILE: usage on stderr, exit 2 (got $rc)"
fi

# papercuts a new user met (issue 16)
# an empty candidate is a compile error (exit 1) that says so, not binary data
: >"$tmp/empty.cu"
run compile "$tmp/empty.cu"
[ "$rc" -eq 1 ] && grep -qF "empty source: there is no code to compile" "$tmp/err" &&
  ! grep -q NUL "$tmp/err" || fail "compile of an empty file: a compile error (exit 1), got $rc"
run evaluate --in-process "$problem" "$tmp/empty.cu" --json
[ "$rc" -eq 1 ] && grep -q '"verdict": "compile_error"' "$tmp/out" ||
  fail "evaluate of an empty file: verdict compile_error and exit 1 (got $rc)"
# compile --json prints JSON on a compile error too
printf 'extern "C" __global__ void k() { int x = ; }\n' >"$tmp/bad.cu"
run compile --json "$tmp/bad.cu"
[ "$rc" -eq 1 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is False and d["status"] == "KR_ECOMPILE", d
assert "expected an expression" in d["log"], d' "$tmp/out" ||
  fail "compile --json on a compile error: JSON with ok false, the status and the log (exit $rc)"
# a filter that matches nothing says so
run suite "$root/examples/problems" --filter no_such_problem
[ "$rc" -eq 2 ] && grep -qF "no problem under $root/examples/problems matches the filter 'no_such_problem'" \
  "$tmp/err" || fail "suite --filter without a match: say that no problem matches (exit $rc)"
# without a GPU, rows are "not run", never "ok"; the summary counts them
run suite "$root/examples/problems" --filter l1_vector_add
[ "$rc" -eq 0 ] && [ "$(grep -c 'not_run .* not run$' "$tmp/out")" -eq 3 ] &&
  ! grep -q ' ok$' "$tmp/out" && grep -qF "3 candidates in 1 problems: 0 as expected, 3 not run" \
  "$tmp/out" || fail "suite without a GPU: 3 rows 'not run', none 'ok' (exit $rc)"
# problem show prints what its help promises: shapes, input distributions, scalars
run problem show "$root/examples/problems/l2_layernorm/problem.json"
grep -qE '^    x +f32 +in +\[M, N\] +init normal mean=1 std=3' "$tmp/out" &&
  grep -qE '^    eps +f32 +1e-05' "$tmp/out" ||
  fail "problem show: each tensor's shape and init, and the scalars"
# an unknown reward preset lists the presets
run evaluate "$problem" "$cand" --reward nosuch
[ "$rc" -eq 2 ] && grep -qF "not a preset (makora, kernelgym," "$tmp/err" ||
  fail "--reward nosuch: list the presets (exit $rc)"
# the opt-in measurements are accepted by evaluate and suite (they need a GPU to run)
run evaluate "$problem" "$cand" --counters --robust --json
[ "$rc" -ne 2 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" ||
  fail "evaluate --counters --robust: accepted, a JSON report (exit $rc)"
# info says what the workers' sandbox can use here, with a reason where it cannot
run info
[ "$rc" -eq 0 ] && python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["sandbox"]
assert isinstance(s["landlock"], bool) and isinstance(s["seccomp"], bool), s
assert s["landlock"] == (s["landlock_abi"] > 0), s
assert bool(s["landlock_why"]) != s["landlock"] and bool(s["seccomp_why"]) != s["seccomp"], s
' "$tmp/out" || fail "info: a sandbox section (landlock, seccomp, why not) (exit $rc)"

# problems: the verb is checked before anything is handed to Python
expect_usage_error "vett" problems vett "$root/examples/problems"

if [ "$python_ok" = 1 ]; then
# report pages (docs/pages.md): the suite's page, compile-only here (rows
# say not run), from a temporary JSONL that does not outlive the suite
export TMPDIR=$tmp/t
mkdir -p "$TMPDIR"
run suite "$root/examples/problems" --html "$tmp/suite.html"
[ "$rc" -eq 0 ] && grep -q "^page: $tmp/suite.html$" "$tmp/out" && [ -s "$tmp/suite.html" ] &&
  grep -q "<title>kreward suite $root/examples/problems</title>" "$tmp/suite.html" &&
  [ "$(grep -o '>not run</span>' "$tmp/suite.html" | wc -l)" -ge 39 ] &&
  grep -q '>l4_matmul_f32</td>' "$tmp/suite.html" && [ -z "$(ls -A "$TMPDIR")" ] ||
  fail "suite --html: a page with every row not run, its temporary JSONL removed (exit $rc)"
# --jsonl and --html together: the page is made from that JSONL, which stays
run suite "$root/examples/problems" --filter l2_softmax --jsonl "$tmp/s.jsonl" --html="$tmp/s.html"
[ "$rc" -eq 0 ] && [ "$(wc -l <"$tmp/s.jsonl")" -eq 3 ] && grep -q ">l2_softmax</td>" "$tmp/s.html" ||
  fail "suite --jsonl OUT --html OUT: both written (exit $rc)"
# report: a summary, and the page of the suite's JSONL
run report "$tmp/s.jsonl"
[ "$rc" -eq 0 ] && grep -qF "$tmp/s.jsonl: 3 reports, 1 problems: 3 not_run" "$tmp/out" ||
  fail "report FILE: a summary of what it holds (exit $rc)"
run report "$tmp/s.jsonl" --html "$tmp/r.html" --title "softmax <run>"
[ "$rc" -eq 0 ] && grep -qF "<title>softmax &lt;run&gt;</title>" "$tmp/r.html" ||
  fail "report FILE --html OUT: the page, its title escaped (exit $rc)"
# a malformed line: its line number, exit 2, no page
{ head -2 "$tmp/s.jsonl"; echo '{"verdict": "passed", "flags": '; } >"$tmp/bad.jsonl"
run report "$tmp/bad.jsonl" --html "$tmp/bad.html"
[ "$rc" -eq 2 ] && grep -qF "$tmp/bad.jsonl:3: not JSON" "$tmp/err" && [ ! -e "$tmp/bad.html" ] ||
  fail "report of a malformed JSONL: the line named, exit 2, no page (exit $rc)"
printf '{"problem": "p"}\n' >"$tmp/noverdict.jsonl"
run report "$tmp/noverdict.jsonl"
[ "$rc" -eq 2 ] && grep -qF "$tmp/noverdict.jsonl:1: not a report" "$tmp/err" ||
  fail "report of a line that is no report: the line named, exit 2 (exit $rc)"
run report "$tmp/none.jsonl"
[ "$rc" -eq 2 ] && grep -qF "cannot read it" "$tmp/err" || fail "report of a missing file: exit 2"
# an OUT that cannot be written is said before the suite runs, not after
run suite "$root/examples/problems" --filter l1_vector_add --html "$tmp/no/such/dir/p.html"
[ "$rc" -eq 2 ] && grep -q "not run: the page" "$tmp/err" && ! grep -q "candidates in" "$tmp/out" ||
  fail "suite --html into a missing folder: exit 2 before running (exit $rc)"
KREWARD_PYTHON=$tmp/no-python "$kreward" suite "$root/examples/problems" --html "$tmp/p.html" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "cannot run $tmp/no-python" "$tmp/err" ||
  fail "suite --html without a Python: exit 3, saying so (exit $rc)"
# the page fails after the suite: said, non-zero, and the suite's own code kept
printf '#!/bin/sh\ncase " $* " in *" --preflight "*) exit 0;; esac\necho broken >&2\nexit 4\n' \
  >"$tmp/fake-python"
chmod +x "$tmp/fake-python"
KREWARD_PYTHON=$tmp/fake-python "$kreward" suite "$root/examples/problems" --filter l1_vector_add \
  --html "$tmp/f.html" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 4 ] && grep -q "the page $tmp/f.html was not written" "$tmp/err" ||
  fail "suite --html whose page fails: exit non-zero, saying so (exit $rc)"
KREWARD_PYTHON=$tmp/fake-python "$kreward" suite "$root/examples/problems" --filter l1_vector_add \
  --require-gpu --html "$tmp/f.html" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "the suite's own exit code stands" "$tmp/err" ||
  fail "suite --require-gpu --html whose page fails: the suite's exit 3 stands (exit $rc)"
unset TMPDIR
fi

[ "$failures" -eq 0 ] && echo "cli: all checks passed" && exit 0
echo "cli: $failures checks failed"
exit 1
