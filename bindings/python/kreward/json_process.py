"""A module of this package run as a process of its own: one JSON request
on stdin, one JSON line out (the last line that starts with "{": what the
code it runs prints goes before it). Used where a problem file, which is
code from a data set, must run outside the caller's process (the
soundness check, vetting's measurements): a file that raises, hangs,
faults or eats memory costs that process only.

call() runs one and gives its answer or {"error": why}; serve(run) is the
module's side: the request to run(), the answer (or the exception, in
one line) printed."""
import json
import os
import subprocess
import sys

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def call(module, request, timeout_s, what, env=None):
    """Runs `python -m module` with request; its answer, or {"error": ...}
    naming `what` and how it ended. env: variables set for it (this
    package is put first on its PYTHONPATH)."""
    path = [_PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **(env or {}))
    try:
        out = subprocess.run([sys.executable, "-m", module], input=json.dumps(request),
                             capture_output=True, text=True, env=full_env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{what} ran past {timeout_s} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1][:300]
        how = (f"exit {out.returncode}" if out.returncode >= 0 else
               "killed: out of memory?" if out.returncode == -9 else f"signal {-out.returncode}")
        return {"error": f"{what} ended ({how}): {tail}"}
    return json.loads(lines[-1])


def serve(run):
    """The module's main: run(request) -> answer; an exception becomes
    {"error": "Type: first line"}."""
    req = json.loads(sys.stdin.read())
    try:
        result = run(req)
    except Exception as e:  # noqa: BLE001 - the caller records why
        text = str(e).splitlines()[0][:300] if str(e) else ""
        result = {"error": f"{type(e).__name__}: {text}"}
    sys.stdout.write("\n" + json.dumps(result) + "\n")
