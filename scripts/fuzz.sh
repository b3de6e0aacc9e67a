#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for
# SECONDS (default 20) from its seed corpus in tests/fuzz/corpus. A crash
# leaves its input in build-fuzz/ and fails the script.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null || exit 1
fi
ninja -C build-fuzz >/dev/null || { ninja -C build-fuzz; exit 1; }
status=0
for t in expr problem plan protocol ptx_code; do
  work=$(mktemp -d)
  cp tests/fuzz/corpus/$t/* "$work"/
  echo "fuzz_$t: ${seconds}s"
  if ! ( cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
         ./tests/fuzz/fuzz_$t -max_total_time="$seconds" -max_len=4096 -timeout=10 \
         -print_final_stats=0 "$work" 2>&1 | tail -3 ); then
    status=1
  fi
  grep -l . build-fuzz/crash-* build-fuzz/leak-* build-fuzz/timeout-* 2>/dev/null && status=1
  rm -rf "$work"
done
[ $status = 0 ] && echo "fuzzers: no crash" || echo "fuzzers: FAILED"
exit $status
