"""The zygote process's program (zygote.py is the caller's side and says
why a fork is as clean as a fresh process): run by path with its end of
the socket pair's number, it imports torch and worker.py, says whether
that worked, then forks a supervisor for each spawn request (or, with "program":
"import", an import process: import_process.py) and answers with its pid
and a pidfd; EOF on the socket ends it.

Standard library only at import (the caller imports the constants below
and `ready`, the poll helper of both sides);
torch is imported by _serve, in the zygote process alone."""
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
MAX_MESSAGE = 1 << 20     # a request: the worker's sandbox config and environment
MAX_FDS = 8               # control in/out, log, and the worker's four


def ready(fds, events=select.POLLIN, timeout_s=None):
    """The descriptors (or objects with fileno) of fds ready for events
    (POLLIN or POLLOUT; an end or an error counts, as select counted them)
    within timeout_s (None: no limit). poll, not select: in a trainer with
    over 1023 descriptors open, the workers' pipes, pidfds and this
    process's socket (it keeps the caller's number) get numbers select
    refuses. The one helper of the caller's side (zygote.py,
    worker_process.py) and of the zygote process."""
    p = select.poll()
    for fd in fds:
        p.register(fd, events)
    return [fd for fd, _ in p.poll(None if timeout_s is None else max(0.0, timeout_s) * 1000)]


def _prepare_triton():
    """Triton's process-wide first steps that touch no GPU, taken once here
    for every worker forked after: its compiler's modules imported, and
    triton_key, the sha256 of Triton's own files (libtriton's hundreds of
    MB among them) that every kernel's cache key includes, computed once
    (0.4-1.0 s of each worker's first Triton launch, in verify, on an H100
    at 7335438). Both are what a fresh process would compute itself; the
    driver (CUDA) is left to each worker. Without Triton, nothing."""
    try:
        import triton
        import triton.compiler.compiler  # noqa: F401 - imported by every compile
        import triton.runtime.jit  # noqa: F401
        from triton.runtime import cache
    except Exception:  # noqa: BLE001 - no Triton (or another layout): each worker pays as before
        return
    try:
        import triton.backends.nvidia.compiler  # noqa: F401 - (no CUDA call at import)
        import triton.backends.nvidia.driver  # noqa: F401
        import triton.experimental.gluon  # noqa: F401 - imported by the first compile
    except Exception:  # noqa: BLE001
        pass
    key = getattr(cache, "triton_key", None)
    if callable(key):
        try:
            key()
        except Exception:  # noqa: BLE001 - (a file of Triton's unreadable): computed where used
            pass


def _serve(sock):
    t0 = time.perf_counter()
    try:
        import numpy  # noqa: F401 - what torch's import would load anyway
        import torch
        if torch.cuda.is_initialized():  # never: the children start CUDA themselves
            raise RuntimeError("CUDA was initialised by torch's import")
        import importlib.util
        spec = importlib.util.spec_from_file_location("kr_kb_worker", WORKER)
        worker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(worker)
        _prepare_triton()
        if torch.cuda.is_initialized():  # (nor by Triton's steps)
            raise RuntimeError("CUDA was initialised in the zygote by Triton's preparation")
        # every spawn's answer carries a pidfd: a kernel or a seccomp
        # profile that refuses pidfd_open fails this start (the caller then
        # starts workers by exec), not every spawn after a ready
        os.close(os.pidfd_open(os.getpid()))
    except BaseException as e:  # noqa: BLE001 - said to the caller, which starts workers by exec
        socket.send_fds(sock, [json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"[:500]}
                                          ).encode()], [])
        return
    socket.send_fds(sock, [json.dumps({"ready": True, "import_s": round(time.perf_counter() - t0, 3)}
                                      ).encode()], [])
    while True:
        _reap()
        if not ready([sock], select.POLLIN, 1.0):
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
        except OSError:
            return
        if not data:
            return  # the caller closed or died
        req, pid = {}, None
        try:
            req = json.loads(data)
            if not isinstance(req, dict) or req.get("op") != "spawn" or len(fds) < 3:
                raise ValueError(f"not a spawn request with its descriptors: {str(req)[:200]}")
            program = req.get("program", "worker")
            if program not in ("worker", "import"):
                raise ValueError(f"no such program: {str(program)[:100]}")
            pid = os.fork()
            if pid == 0:
                (_child if program == "worker" else _import_child)(sock, req, fds, worker)
            pidfd = os.pidfd_open(pid)  # before any _reap: the pid cannot be recycled yet
            try:
                socket.send_fds(sock, [json.dumps({"id": req.get("id"), "pid": pid}).encode()], [pidfd])
            finally:
                os.close(pidfd)
        except Exception as e:  # noqa: BLE001 - the caller is told, the zygote goes on
            if pid is not None:  # forked, not answered: ended (the caller will not use its descriptors)
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)  # reaped here: the caller ends this zygote next, and an
                except OSError:         # orphaned zombie would stay with a caller that is PID 1
                    pass
            answer = {"id": req.get("id") if isinstance(req, dict) else None,
                      "error": f"{type(e).__name__}: {e}"[:500], "forked": pid is not None}
            try:
                socket.send_fds(sock, [json.dumps(answer).encode()], [])
            except OSError:
                return
        finally:
            for fd in fds:
                os.close(fd)


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return


def _child(sock, req, fds, worker):
    """The forked supervisor: its session, its descriptors (control in and
    out on 0 and 1, the log on 2, the worker's, nothing else), its
    environment, then worker.py's supervise as if started by exec."""
    def body():
        os.setsid()  # a group of its own: the caller's killpg reaches it and only it
        if min(fds) <= 2:  # (never: the zygote's own 0, 1 and 2 stay open)
            raise RuntimeError(f"a received descriptor is a standard one: {fds}")
        ctl_in, ctl_out, log = fds[:3]
        os.dup2(ctl_in, 0)
        os.dup2(ctl_out, 1)
        os.dup2(log, 2)
        mine = fds[3:]
        wfds = [None if i is None else mine[i] for i in req["worker"]]
        keep = {0, 1, 2} | {fd for fd in wfds if fd is not None}
        _close_all_but(keep)
        for fd in keep - {0, 1, 2}:
            os.set_inheritable(fd, True)  # as Popen's pass_fds left them
        sock.detach()  # closed above; the object must not close a recycled number
        _as_started(req)
        if req.get("niceness"):
            os.nice(req["niceness"])
        sys.argv = [WORKER] + [("" if fd is None else str(fd)) for fd in wfds[:2]] + \
            [req["config"] or ""] + [("" if fd is None else str(fd)) for fd in wfds[2:]]
        config = json.loads(req["config"]) if req["config"] else None
        worker.supervise(wfds[0], wfds[1], config, *(wfds[2:] + [None, None])[:2])
    worker.exit_after(body)


def _import_child(sock, req, fds, worker):
    """A forked import process (import_process.py), in two: this child, a
    session of its own, keeps only its exit-status pipe and waits; its
    child, a process group of its own in that session, gets the request
    pipe on 0, the answer pipe on 1, the log on 2 and nothing else, its
    environment and the caller's package on sys.path, then runs the
    request's module's main (the caller's import_child.py) as `python -c`
    would with the file's path: it enters the file's sandbox before the
    file first runs, as a started one does, with torch already imported
    here. The waiting parent writes the other's pid, then its exit status,
    to the pipe (a forked process's status is its parent's, the zygote's,
    to read: the caller says "exited -9" for a probe killed for memory, as
    it did for one it started).

    The parent does the killing, so no number it signals can be another
    process's: SIGTERM (the caller's close) makes it kill the import
    process's group while that process is its unreaped child; once it has
    reaped it, whatever the file started and left in the group is killed
    too (a compiler must not outlive the import). The import process dies
    with its parent (PR_SET_PDEATHSIG), should that one be killed outright.
    Reaped here, it is never a zombie left to init (one per import where
    the trainer is PID 1)."""
    def body():
        os.setsid()
        if len(fds) != 4 or min(fds) <= 2:
            raise RuntimeError(f"an import takes four received descriptors: {fds}")
        status = fds[3]
        for fd, std in zip(fds, (0, 1, 2)):
            os.dup2(fd, std)
        _close_all_but({0, 1, 2, status})
        sock.detach()
        parent = os.getpid()
        # SIGTERM held until its handler is in place: one that came between
        # the fork and the handler would end this parent and orphan the child
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        pid = os.fork()
        if pid == 0:
            os.close(status)
            os.setpgid(0, 0)  # (a group's leader cannot leave it with setsid either)
            _die_with(parent)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            worker.exit_after(_run_import)
        try:
            os.setpgid(pid, pid)  # (both sides: whichever runs first)
        except OSError:
            pass

        def kill_group(*_):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        signal.signal(signal.SIGTERM, kill_group)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.write(status, f"pid {pid}\n".encode())
        os.close(0)  # the caller sees the answer pipe end with the import process
        os.close(1)
        while True:
            try:
                _, st = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        # reaped: what is left of its group is what the file started (the
        # group's number stays taken while any member lives)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_group()
        os.write(status, f"{os.waitstatus_to_exitcode(st)}\n".encode())

    def _run_import():
        _as_started(req)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False, buffering=1)
        # absolute, as site made a started process's ($PYTHONPATH may be
        # relative: the sandbox's spec takes absolute paths only)
        sys.path[:0] = [os.path.abspath(p) for p in req.get("sys_path", []) if isinstance(p, str)]
        sys.argv = ["-c", str(req["path"])]
        # the caller names its child's module (import_process.py: its own
        # side's), as it named it to `python -c` (the caller's socket is the
        # only way a request comes: a fork holds none)
        module = str(req["module"])
        if not module.startswith("kreward."):
            raise ValueError(f"an import runs a module of kreward's, not {module[:100]}")
        import importlib
        importlib.import_module(module).main()
    worker.exit_after(body)


def _die_with(parent):
    """SIGKILL to this process when its parent ends (Linux's
    PR_SET_PDEATHSIG), and an exit now if that already happened."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _as_started(req):
    """A forked child as a process started by exec finds itself: SIGINT's
    default action, the request's whole environment, the temporary folder
    from its TMPDIR (torch's import asked tempfile for one, under the
    zygote's environment), the caller's folder of the moment."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(req["env"])
    tempfile.tempdir = None
    try:
        os.chdir(req.get("cwd") or "/")
    except OSError:
        pass


def _close_all_but(keep):
    """Closes every descriptor of this process but those in keep."""
    try:
        open_fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every number up to the limit, around the kept ones
        low = 0
        for fd in sorted(keep) + [os.sysconf("SC_OPEN_MAX")]:
            os.closerange(low, fd)
            low = fd + 1
        return
    for fd in open_fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
    _serve(sock)


if __name__ == "__main__":
    main()
