#!/usr/bin/env bash
# The RL environment integrations through their frameworks' own client code
# (docs/environments.md): bindings/python/tests/test_envs_openenv.py in a venv
# with openenv-core, test_envs_verifiers.py in one with verifiers. They
# cannot share one (verifiers 0.4.0 pins mcp==2.0.0; openenv-core's fastmcp
# needs mcp 2.3), and scripts/deps.sh installs neither, so without this both
# modules skip.
#
# Each venv is made once per set of pinned requirements (and Python version)
# under $KREWARD_ENVS_CACHE (default: $XDG_CACHE_HOME/kreward/envs-venvs,
# outside the clone, so CI's fresh clones reuse it) and reused after that.
# The tests run against this tree's Python sources and the library of the
# build (KREWARD_LIBRARY, else $BUILD_DIR/lib/libkreward.so.1, build/ by
# default: run scripts/test.sh first).
#
# Fails when anything fails, when a module passes no test, and when any test
# skips: every test here runs on a CPU, so a skip means the framework did not
# import (a broken install) and would hide it. Prints one line per venv, then
# "envs: N passed, N failed, N skipped".
#   bash scripts/envs-test.sh
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

# Pinned: the current release of each framework, which kreward.envs is
# written against, and the packages the tests and env code use directly.
# A new version is a change here (and a new venv), never a silent drift.
#   openenv-core 0.3.0: the reset/step/state server and the WebSocket
#     EnvClient that openenv_env.py subclasses;
#   uvicorn 0.54.0: the test serves OpenEnv's app with it;
#   websockets 17.4: what OpenEnv's client talks to the app through;
#   verifiers 0.4.0: the v1 API verifiers_env.py is written for (0.4.0
#     dropped the older MultiTurnEnv/Rubric API);
#   httpx 0.28.1, pydantic 2.14.4: imported by verifiers_env.py itself;
#   pytest 9.2.0: the runner, the same in both.
OPENENV_REQS="openenv-core==0.3.0 uvicorn==0.54.0 websockets==17.4 pytest==9.2.0"
VERIFIERS_REQS="verifiers==0.4.0 httpx==0.28.1 pydantic==2.14.4 pytest==9.2.0"

cache="${KREWARD_ENVS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kreward/envs-venvs}"
library="${KREWARD_LIBRARY:-$root/${BUILD_DIR:-build}/lib/libkreward.so.1}"
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT
total_passed=0 total_failed=0 total_skipped=0

fail_all() { # message: nothing ran
  echo "FAILED: $1"
  echo "envs: 0 passed, 1 failed"
  exit 1
}

[ -f "$library" ] || fail_all "no library at $library (build it first: scripts/test.sh)"
mkdir -p "$cache" || fail_all "cannot create the venv cache $cache"
exec 9>"$cache/.lock"
flock 9  # two runs on one machine do not build the same venv at once

index_reachable() {
  # the configured package index, asked for one small package's versions,
  # briefly (pip's defaults retry for minutes)
  python3 -m pip index versions --retries 1 --timeout 20 pytest >/dev/null 2>&1
}

venv_for() { # name, import check (python), requirements...: prints the venv's path
  local name="$1" check="$2"; shift 2
  local key venv started
  key="$( { python3 -VV; echo "$*"; } | sha256sum | cut -c1-12)"
  venv="$cache/$name-$key"
  if [ -f "$venv/.complete" ] && "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "== envs: $name: reusing $venv ($*)" >&2
    echo "$venv"
    return 0
  fi
  # a stale venv of this name (other pins, a half-made or broken one) goes
  rm -rf "$cache/$name"-*
  if ! index_reachable; then
    echo "FAILED: $name: the Python package index cannot be reached from here, so $* cannot be installed" >&2
    return 1
  fi
  echo "== envs: $name: installing $* into $venv" >&2
  started=$SECONDS
  if ! python3 -m venv "$venv" >&2 ||
     ! "$venv/bin/pip" install -q "$@" >"$venv.log" 2>&1; then
    tail -n 30 "$venv.log" >&2
    echo "FAILED: $name: pip could not install $*" >&2
    rm -rf "$venv"
    return 1
  fi
  if ! "$venv/bin/python" -c "$check" >&2; then
    echo "FAILED: $name: installed, but '$check' fails" >&2
    rm -rf "$venv"
    return 1
  fi
  "$venv/bin/pip" freeze >"$venv/.complete"
  rm -f "$venv.log"
  echo "== envs: $name: installed in $((SECONDS - started)) s" >&2
  echo "$venv"
}

run_module() { # name, import check, test module, requirements...
  local name="$1" check="$2" module="$3"; shift 3
  local venv xml summary passed failed skipped
  if ! venv="$(venv_for "$name" "$check" "$@")"; then
    echo "envs $name: 0 passed, 1 failed (no venv)"
    total_failed=$((total_failed + 1))
    return
  fi
  xml="$results/$name.xml"
  echo "== envs: $name: $module"
  PYTHONPATH="$root/bindings/python" KREWARD_LIBRARY="$library" \
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$module" --junitxml="$xml"
  # counted from the JUnit XML (a module skipped at collection is one skip)
  summary="$(python3 scripts/summary.py "$xml")"
  echo "$summary" | grep -v '^[0-9]'  # the skip reasons, if any
  summary="$(echo "$summary" | tail -n 1)"
  passed="$(echo "$summary" | sed -n 's/^\([0-9]*\) passed.*/\1/p')"
  failed="$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')"
  skipped="$(echo "$summary" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')"
  passed=${passed:-0} failed=${failed:-1} skipped=${skipped:-0}
  if [ "$passed" = 0 ] && [ "$failed" = 0 ]; then
    failed=1  # nothing ran: the module skipped or collected nothing
  fi
  echo "envs $name ($1): $passed passed, $failed failed, $skipped skipped"
  if [ "$skipped" != 0 ]; then
    echo "FAILED: $name: $skipped skipped (each test here runs on a CPU: a skip is a broken install)"
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
}

run_module openenv "import openenv.core, uvicorn" \
  bindings/python/tests/test_envs_openenv.py $OPENENV_REQS
run_module verifiers "import verifiers.v1" \
  bindings/python/tests/test_envs_verifiers.py $VERIFIERS_REQS

echo "envs: $total_passed passed, $total_failed failed, $total_skipped skipped"
[ "$total_failed" = 0 ] && [ "$total_skipped" = 0 ]
