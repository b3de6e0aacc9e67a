#!/usr/bin/env bash
# The main job: builds libkreward and runs it on the bundled examples. On a
# GPU machine this evaluates them; without a GPU it does what can be done
# here (compile, static checks) and says what needs a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh >&2 || exit 1
build=${BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null || exit 1
ninja -C "$build" >/dev/null || { ninja -C "$build"; exit 1; }
kreward="$build/tools/kreward"
status=0
for f in examples/kernels/*.cu; do
  "$kreward" compile "$f" || status=1
done
if ! "$kreward" info | grep -q '"usable": true'; then
  echo
  echo "No usable NVIDIA GPU here: the examples were compiled (NVRTC) but verification and"
  echo "timing need a GPU. 'kreward info' says what was found."
fi
exit $status
