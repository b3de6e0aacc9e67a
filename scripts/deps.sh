#!/usr/bin/env bash
# Installs what building and testing libkreward needs, from Debian's packages
# (and PyPI for the Python tests), where it is missing. The CUDA toolkit
# (headers, NVRTC) is expected at $CUDA_HOME or /usr/local/cuda.
set -euo pipefail
# --build: only what building and running needs (scripts/main.sh), not pytest
build_only=0
[ "${1:-}" = --build ] && build_only=1
need=()
command -v meson >/dev/null || need+=(meson)
command -v ninja >/dev/null || need+=(ninja-build)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v cc >/dev/null || need+=(gcc)
command -v python3 >/dev/null || need+=(python3 python3-pip)
# scripts/wheel.sh and wheel-test.sh make venvs (Debian's python3 needs this)
python3 -m venv --help >/dev/null 2>&1 || need+=(python3-venv)
pkg-config --exists libxxhash 2>/dev/null || need+=(libxxhash-dev)
pkg-config --exists jansson 2>/dev/null || need+=(libjansson-dev)
pkg-config --exists cmocka 2>/dev/null || need+=(libcmocka-dev)
pkg-config --exists libseccomp 2>/dev/null || need+=(libseccomp-dev)
if [ "${KR_WANT_FUZZ:-0}" = 1 ]; then
  command -v clang >/dev/null || need+=(clang)
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
    need+=(libclang-rt-14-dev)
fi
# scripts/abi-check.sh (CI asks for it): libabigail's abidw and abidiff
if [ "${KR_WANT_ABI:-0}" = 1 ]; then
  command -v abidiff >/dev/null && command -v abidw >/dev/null || need+=(abigail-tools)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ "$build_only" = 0 ] && ! python3 -c 'import pytest' 2>/dev/null; then
  echo "deps: installing pytest"
  python3 -m pip install -q pytest 2>/dev/null || python3 -m pip install -q --break-system-packages pytest
fi
# kreward serve and the Ray pool's tests (docs/serve.md): starlette + uvicorn
# (small), ray (~70 MB); for the tests only, like pytest (--build skips them)
if [ "$build_only" = 0 ] && ! python3 -c 'import starlette, uvicorn, ray' 2>/dev/null; then
  echo "deps: installing starlette uvicorn ray"
  python3 -m pip install -q starlette uvicorn ray 2>/dev/null ||
    python3 -m pip install -q --break-system-packages starlette uvicorn ray
fi
# kreward.tune's environment is a gymnasium.Env when gymnasium is installed
# (small; numpy): its tests run the Gymnasium checks (PPO's, with the torch
# installed below). Tests only (--build skips it).
if [ "$build_only" = 0 ] && ! python3 -c 'import gymnasium' 2>/dev/null; then
  echo "deps: installing gymnasium"
  python3 -m pip install -q gymnasium 2>/dev/null ||
    python3 -m pip install -q --break-system-packages gymnasium
fi
# The report pages (kreward.pages, docs/pages.md): matplotlib draws their
# charts (pip; tests only, --build skips it), and the tests render each page
# in Debian's headless Chromium (KR_NO_BROWSER=1 leaves it out: those tests
# skip, saying so)
if [ "$build_only" = 0 ] && ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "deps: installing matplotlib (the report pages' charts)"
  python3 -m pip install -q matplotlib 2>/dev/null ||
    python3 -m pip install -q --break-system-packages matplotlib
fi
if [ "$build_only" = 0 ] && [ "${KR_NO_BROWSER:-0}" != 1 ] && ! command -v chromium >/dev/null; then
  echo "deps: installing chromium (the report pages' tests look at each page in it)"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# The KernelBench path's tests (ModelNew candidates run on torch; on the CPU
# here): torch and triton at the versions the H200 machine has (torch 2.11,
# triton 3.6). From PyPI with their CUDA libraries, ~3 GB: the
# Python tests that need torch skip without it (KR_NO_TORCH=1 leaves it out).
if [ "$build_only" = 0 ] && [ "${KR_NO_TORCH:-0}" != 1 ] && ! python3 -c 'import torch, triton' 2>/dev/null; then
  echo "deps: installing torch and triton (the KernelBench tests run ModelNew candidates on the CPU)"
  python3 -m pip install -q torch==2.11.0 triton==3.6.0 2>/dev/null ||
    python3 -m pip install -q --break-system-packages torch==2.11.0 triton==3.6.0
fi
# TRL's GRPOTrainer for two steps with kreward's reward (test_trl_trainer.py):
# trl at the version docs/trainers.md cites, with transformers and datasets
if [ "$build_only" = 0 ] && [ "${KR_NO_TORCH:-0}" != 1 ] && ! python3 -c 'import trl' 2>/dev/null; then
  echo "deps: installing trl (a real GRPOTrainer run in the tests)"
  python3 -m pip install -q trl==1.9.0 2>/dev/null ||
    python3 -m pip install -q --break-system-packages trl==1.9.0
fi
cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "deps: no CUDA toolkit headers under $cuda (set CUDA_HOME); libkreward needs them to build" >&2
  exit 1
fi
