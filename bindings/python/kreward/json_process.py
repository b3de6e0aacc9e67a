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


def library_env():
    """KREWARD_LIBRARY for a child: the libkreward this process uses, which
    the child enters its sandbox through (kernelbench/file_process.py)."""
    if os.environ.get("KREWARD_LIBRARY"):
        return {}
    try:
        from . import _lib
    except Exception:  # noqa: BLE001 - no libkreward here: the child says it ran unsandboxed
        return {}
    return {"KREWARD_LIBRARY": os.path.realpath(_lib.path)}


def call(module, request, timeout_s, what, env=None):
    """Runs `python -m module` with request; its answer, or {"error": ...}
    naming `what` and how it ended. env: variables set for it (this
    package is put first on its PYTHONPATH). The child runs in a session of
    its own, and the whole session is killed at the timeout (a compiler or
    a process the problem file started must not outlive it)."""
    return start(module, env).call(request, timeout_s, what)


def start(module, env=None):
    """The process of call(), started now and given its request later: a
    module whose serve() has a warm step (its imports) does it meanwhile,
    so a caller that waits for something else (a free GPU) pays for it
    while it waits. The Child's call() sends the request; kill() ends it
    unasked."""
    path = [_PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **library_env(), **(env or {}))
    return Child(subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=full_env, start_new_session=True))


class Child:
    """A started json_process module: one request, one answer."""

    def __init__(self, proc):
        self.proc = proc

    def call(self, request, timeout_s, what):
        proc = self.proc
        try:
            stdout, stderr = proc.communicate(json.dumps(request), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            return {"error": f"{what} ran past {timeout_s} s"}
        except BaseException:
            _kill_session(proc)
            raise
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (stderr.strip().splitlines() or ["no output"])[-1][:300]
            rc = proc.returncode
            how = (f"exit {rc}" if rc >= 0 else
                   "killed: out of memory?" if rc == -9 else f"signal {-rc}")
            return {"error": f"{what} ended ({how}): {tail}"}
        return json.loads(lines[-1])

    def kill(self):
        """Ends its session, whatever the leader did: what the file started
        dies with it even after the leader exited."""
        _kill_session(self.proc)


def _kill_session(proc):
    """Kills the process's whole session (the group outlives an exited
    leader) and reaps the leader if it has not been."""
    import signal
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        proc.communicate()


def serve(run, warm=None):
    """The module's main: run(request) -> answer; an exception becomes
    {"error": "Type: first line"}. The answer goes out on a channel of its
    own: whatever run's code prints (a problem file's prints, a forged
    answer line) goes to stderr (kernelbench/file_process.py). warm(): what
    can be done before the request comes (imports; nothing that picks a
    device), for a process started ahead (start())."""
    from .kernelbench.file_process import answer_channel
    out = answer_channel()
    if warm:
        warm()
    req = json.loads(sys.stdin.read())
    try:
        result = run(req)
    except Exception as e:  # noqa: BLE001 - the caller records why
        text = str(e).splitlines()[0][:300] if str(e) else ""
        result = {"error": f"{type(e).__name__}: {text}"}
    out.write("\n" + json.dumps(result) + "\n")
    out.flush()
