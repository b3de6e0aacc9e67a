#!/usr/bin/env bash
# The wheel as a user gets it: builds it (scripts/wheel.sh), installs it into
# a fresh venv with pytest only, checks the installed package (library,
# worker, console script: tests/wheel/check_installed.py), runs the Python
# tests against it (KREWARD_TEST_INSTALLED=1: not the tree's sources or
# build), then adds NVIDIA's CUDA 12 NVRTC and CUPTI wheels and compiles with
# NVRTC 12 from them (tests/wheel/check_cuda12.py; KREWARD_CUDA_MAJOR=12, as
# this machine's toolkit is CUDA 13). Prints "N passed, N failed".
#   bash scripts/wheel-test.sh [--no-cuda12]
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
passed=0 failed=0
step() { # name, command...
  local name="$1"; shift
  echo "== wheel: $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
bash scripts/wheel.sh || { echo "0 passed, 1 failed"; exit 1; }
wheel="$(ls dist/kreward-*.whl | head -1)"
venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q "$wheel" pytest || { echo "0 passed, 1 failed"; exit 1; }
# from outside the tree: nothing of the repository on the path
step "installed package, worker and CLI" \
  bash -c "cd / && '$venv/bin/python' '$root/tests/wheel/check_installed.py' '$root'"
step "Python tests against the installed package" \
  env -u KREWARD_LIBRARY -u KREWARD_WORKER KREWARD_TEST_INSTALLED=1 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider bindings/python/tests
if [ "${1:-}" != "--no-cuda12" ]; then
  if "$venv/bin/pip" install -q nvidia-cuda-nvrtc-cu12 nvidia-cuda-cupti-cu12; then
    step "NVRTC and CUPTI 12 from NVIDIA's wheels" \
      bash -c "cd / && KREWARD_CUDA_MAJOR=12 '$venv/bin/python' '$root/tests/wheel/check_cuda12.py' '$root'"
  else
    echo "FAILED: cannot install nvidia-cuda-nvrtc-cu12 / nvidia-cuda-cupti-cu12 from PyPI"
    failed=$((failed + 1))
  fi
fi
echo "wheel: $passed passed, $failed failed"
[ "$failed" = 0 ]
