#!/usr/bin/env bash
# The built libkreward.so.1 against the last release's ABI: the committed
# baseline tests/abi/libkreward.so.1.abi (libabigail's abidw of the release
# build; docs/packaging.md, "Releases", says how it is made) compared with
# abidiff. Fails on any change other than additions: a removed or changed
# function, variable, symbol version or public type. Prints abidiff's report
# either way. Needs abidiff (Debian: abigail-tools; scripts/deps.sh installs
# it with KR_WANT_ABI=1) and a build with debug info (meson's default
# debugoptimized, or debug).
# Usage: scripts/abi-check.sh [BUILD_DIR]   (default: configures and builds build-abi)
#        scripts/abi-check.sh --baseline [BUILD_DIR]
#   writes the baseline from this tree's build instead: run at a release
#   commit (docs/packaging.md), the file then describes that release.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=tests/abi/libkreward.so.1.abi
write=0
[ "${1:-}" = --baseline ] && { write=1; shift; }
build=${1:-build-abi}
if ! command -v abidiff >/dev/null || ! command -v abidw >/dev/null; then
  echo "abi-check: no abidiff (apt-get install abigail-tools, or KR_WANT_ABI=1 scripts/deps.sh)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  [ $# -eq 0 ] || { echo "abi-check: $build is not a meson build directory" >&2; exit 1; }
  meson setup "$build" -Dtests=false >/dev/null
fi
# the library alone: a symbol taken out of the version script would stop the
# tests and tools that call it from linking before abidiff could say so
if ! out=$(meson compile -C "$build" lib/kreward:shared_library 2>&1); then
  echo "$out"
  echo "abi-check: building the library in $build failed" >&2
  exit 1
fi
lib="$build/lib/libkreward.so.1"
[ -f "$lib" ] || { echo "abi-check: no $lib after building" >&2; exit 1; }

if [ $write = 1 ]; then
  # no paths (corpus, compilation folder, only file names in locations) and
  # hashed type ids: the same source gives the same file wherever it is built
  abidw --no-corpus-path --no-comp-dir-path --short-locs --exported-interfaces-only \
    --drop-private-types --headers-dir include/kreward --type-id-style hash \
    --out-file "$baseline" "$lib"
  echo "abi-check: wrote $baseline from $lib"
  exit 0
fi

# Private types (those no public header defines: the handles' insides) are
# not ABI; additions are not reported (--no-added-syms), so any change left
# is one a program built against the release could notice.
args=(--no-corpus-path --exported-interfaces-only --drop-private-types
      --headers-dir2 include/kreward --fail-no-debug-info --no-added-syms)
# changes judged harmless at review (e.g. a versioned struct grown at its end
# by a new version) are suppressed there, each with its reason
[ -f tests/abi/libkreward.abignore ] && args+=(--suppressions tests/abi/libkreward.abignore)
set +e
report=$(abidiff "${args[@]}" "$baseline" "$lib" 2>&1)
rc=$?
set -e
[ -n "$report" ] && echo "$report"
# abidiff's status is a bit set: 1 error, 2 usage error, 4 ABI change,
# 8 incompatible ABI change
if [ $((rc & 3)) -ne 0 ]; then
  echo "abi-check: abidiff failed (status $rc)" >&2
  exit 1
fi
if [ $((rc & 12)) -ne 0 ]; then
  echo "abi-check: $lib changes the ABI of $baseline (status $rc): not compatible with the release" >&2
  exit 1
fi
echo "abi-check: $lib keeps the ABI of $baseline (additions allowed)"
