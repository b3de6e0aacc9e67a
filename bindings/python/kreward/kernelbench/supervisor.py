"""The ModelNew worker's supervisor (worker.py starts it: the process the
caller runs, the worker's parent and child subreaper): it tells the
caller when the worker ends and, on `reap` or when the caller is gone,
kills every process below it, re-parented ones included, until none is
left. Standard library only; it never runs candidate code (worker.py
loads it by path; freezer.py reads the process tree with its helpers)."""
import json
import os
import select
import signal
import time


def _children(pid):
    """The live and dead children of pid (its threads' children files; a
    scan of every process's parent where the kernel has no such file)."""
    kids = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
        return kids
    except OSError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit() and _stat(int(name))[1] == pid:
            kids.add(int(name))
    return kids


def _stat(pid):
    """(state, parent) of a process; (None, None) once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None, None


def _describe(status):
    if status is None:
        return {"exited": False}
    if os.WIFSIGNALED(status):
        return {"exited": True, "signal": os.WTERMSIG(status)}
    return {"exited": True, "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}


class Supervisor:
    """The worker's parent and subreaper (see the module's docstring)."""

    def __init__(self, worker_pid):
        self.worker, self.status = worker_pid, None

    def worker_status(self, wait_s):
        """The worker's exit status, waiting up to wait_s for it to end."""
        end = time.monotonic() + wait_s
        while self.status is None:
            try:
                pid, st = os.waitpid(self.worker, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                self.status = st
                break
            if time.monotonic() >= end:
                break
            time.sleep(0.01)
        return _describe(self.status)

    def end_all(self, deadline_s):
        """Kills every process below this one, re-parented ones included,
        until none is left: {"clean", "strays", "worker"}."""
        me, strays = os.getpid(), set()
        end = time.monotonic() + deadline_s
        try:
            os.killpg(self.worker, signal.SIGKILL)  # the worker's session: most of it at once
        except OSError:
            pass
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return {"clean": True, "strays": len(strays), "worker": _describe(self.status)}
            if pid:
                if pid == self.worker:
                    self.status = st
                continue
            if time.monotonic() > end:
                return {"clean": False, "strays": len(strays), "worker": _describe(self.status),
                        "why": f"processes still running after {deadline_s:.0f} s"}
            kids = _children(me)
            for k in kids:
                if k != self.worker and _stat(k)[0] not in (None, "Z"):
                    strays.add(k)
                try:
                    os.kill(k, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.001)

    def serve(self, ctl_in, ctl_out):
        """Commands on ctl_in (`status`, `reap`), answers on ctl_out; the
        worker's end is told unasked ({"event": "exited", ...}): a process
        it started may hold its pipe open, so the caller cannot wait for EOF."""
        def answer(obj):
            try:
                os.write(ctl_out, (json.dumps(obj) + "\n").encode())
            except OSError:
                pass
        try:
            watch = os.pidfd_open(self.worker)
        except (AttributeError, OSError):  # before Linux 5.3: polled
            watch = None
        told, buf = False, b""
        while True:
            fds = [ctl_in] + ([watch] if watch is not None and not told else [])
            ready = select.select(fds, [], [], None if told or watch is not None else 0.05)[0]
            if not told and (watch in ready or (watch is None and self.worker_status(0)["exited"])):
                told = True
                answer({"event": "exited", **self.worker_status(1.0)})
            if ctl_in not in ready:
                continue
            data = os.read(ctl_in, 4096)
            if not data:
                break  # the caller is gone
            buf += data
            while b"\n" in buf:
                cmd, buf = buf.split(b"\n", 1)
                if cmd.strip() == b"status":
                    answer(self.worker_status(5.0))
                elif cmd.strip() == b"reap":
                    answer(self.end_all(60.0))
                    return
        self.end_all(60.0)
