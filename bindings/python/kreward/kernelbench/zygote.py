"""The zygote: one process per caller with torch already imported (CUDA
never initialised in it) that forks each ModelNew worker's supervisor, so
a worker's start skips Python's start and torch's import (1.3 s of CPU on
this project's machine, more beside CUDA's libraries on a GPU host). One
for the whole process (shared_zygote): every Runner's workers get their
own environment and sandbox config with each spawn, so nothing of a Runner
is the zygote's, and a torch held once, not per Runner (a lane keeps 8).

Why a fork is as clean as a fresh process here: the zygote runs no
candidate code and never touches CUDA (torch's own rule: CUDA is not
re-initialised in a child of a process that used it), so the child starts
CUDA for itself as a fresh worker does; fork copies one thread, so the
worker still enters its "start" sandbox as the only thread (worker.py);
the forked supervisor closes every descriptor but its own pipes before it
forks the worker, so nothing the zygote held (its request socket above all:
a worker holding it could ask for processes outside its sandbox) reaches
candidate code. Python reseeds `random` in a forked child; the zygote's
memory is the child's copy, never shared back.

Protocol on a SOCK_SEQPACKET socket pair (each message one request or one
answer): the caller sends a JSON request with the supervisor's descriptors
attached (SCM_RIGHTS): control in, control out, its log, then the worker's
(request pipe, reply pipe, input region, shared device buffer, as many as
it has); the zygote forks, and answers {"pid": ...} with a pidfd of the
child attached, opened before the zygote can reap it (so the caller's
liveness checks cannot meet a recycled pid). EOF on the socket (the caller
gone or closed) ends the zygote; its children are the caller's to end.

This file is the caller's side: shared_zygote (the process's, started at
the first call, again after it died), Zygote (start, spawn, close) and
ForkedProcess (the subset of subprocess.Popen that worker_process.py and
freezer.py use). Standard library only at import. The zygote process's own
program (its import of torch, the loop that forks, the child's set-up) is
zygote_main.py."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from .zygote_main import MAX_MESSAGE, WORKER, ready

# the zygote process's program (zygote_main.py), run by path
ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote_main.py")
READY_TIMEOUT_S = 120.0   # the zygote's own start (torch's import on a busy host)


class ZygoteUnavailable(Exception):
    """No worker can be forked by this zygote (it failed to start, died,
    or the kernel lacks pidfds); the caller starts the worker by exec."""


_shared = None
_shared_lock = threading.Lock()
# zygotes in a row that ended before they forked any worker (a lost first
# spawn: a kernel refusing what a spawn needs, a fork refused): past this,
# none is started again and every worker starts by exec, instead of a
# torch import for each worker on top of its exec (helper-27)
BARREN_LIMIT = 2
_barren = 0


def shared_zygote(env):
    """The process's zygote (env: its environment where it must start):
    the running one; a new one where none runs or the last was lost (killed,
    or a spawn's answer lost); the last one where it failed its own start
    (its spawn then raises ZygoteUnavailable with the reason: a restart
    would fail the same way, a torch import each time)."""
    global _shared, _barren
    with _shared_lock:
        z = _shared
        if z is not None and not z._ready and z.proc.poll() is not None:
            with z._lock:  # its unread answer says whether its start failed
                try:
                    z._wait_ready(0)
                except ZygoteUnavailable:
                    pass
        if z is None or (not z.failed_start and (z.why or z.proc.poll() is not None)):
            if z is not None:
                _barren = 0 if z.spawned else _barren + 1
                if _barren >= BARREN_LIMIT:
                    z.failed_start = True
                    z.why = (f"{BARREN_LIMIT} zygotes in a row ended before they forked a worker; "
                             f"the last: {z.why or 'it exited'}")[:600]
                    return z
                z.close()
            _shared = Zygote(env)
        return _shared


def _forget_in_child():
    """A fork of the caller (a DataLoader's worker, multiprocessing) starts
    its own zygote if it asks for one, and holds no socket of its parent's
    (which would keep that zygote alive past its caller)."""
    global _shared, _shared_lock, _barren
    z, _shared, _shared_lock, _barren = _shared, None, threading.Lock(), 0
    if z is not None:
        try:
            z._sock.close()
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class ZygoteLost(Exception):
    """A spawn's request reached the zygote and its answer did not come
    back (a timeout, the zygote killed, an exception here): a child may
    hold the descriptors it carried, so they are not to be given to another
    worker. The zygote is ended and not used again (shared_zygote starts
    another)."""


class ForkedProcess:
    """A supervisor forked by the zygote, seen from the caller: pid, the
    control pipes as stdin/stdout, poll(), wait() and kill() through its
    pidfd (it is the zygote's child, not the caller's: no exit status,
    returncode is -1 once it has ended; a signal through the pidfd cannot
    reach a process that took its pid after the zygote reaped it).
    Thread-safe, as Popen's own."""

    def __init__(self, pid, pidfd, stdin, stdout):
        self.pid, self._pidfd = pid, pidfd
        self.stdin, self.stdout = stdin, stdout
        self.returncode = None
        self.args = ["zygote", WORKER]
        self._lock = threading.Lock()
        self._owner = os.getpid()

    def _foreign(self):
        """Whether this is a fork of the caller (multiprocessing, a helper
        process) holding a copy: there the supervisor is the parent's, and
        ended as far as this process goes, as a Popen child is to a fork of
        its parent (ECHILD), so nothing here reaps, signals or evaluates
        with the parent's workers (a Runner's end in the fork would
        otherwise have sent them `reap`: helper-27)."""
        return os.getpid() != self._owner

    def poll(self):
        with self._lock:
            if self.returncode is None and (self._foreign() or ready([self._pidfd], timeout_s=0)):
                self.returncode = -1
                os.close(self._pidfd)
                self._pidfd = None
            return self.returncode

    def wait(self, timeout=None):
        try:
            fd = self.dup_pidfd()
        except ProcessLookupError:
            return self.poll()
        try:
            ended = ready([fd], timeout_s=timeout)
        finally:
            os.close(fd)
        if not ended:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.poll()

    def dup_pidfd(self):
        """A pidfd of its own (the caller closes it), or ProcessLookupError
        once it has ended."""
        with self._lock:
            if self._pidfd is None or self._foreign():
                raise ProcessLookupError(self.pid)
            return os.dup(self._pidfd)

    def kill(self):
        """SIGKILL to the supervisor (alone in its process group: the
        worker is in a session of its own, ended by its parent-death signal)."""
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig):
        """sig to the process through its pidfd; nothing once it has ended
        (its number may be another's by then) or in a fork of the caller."""
        with self._lock:
            if self._pidfd is not None and not self._foreign():
                try:
                    signal.pidfd_send_signal(self._pidfd, sig)
                except OSError:
                    pass

    def __del__(self):
        if getattr(self, "_pidfd", None) is not None:
            try:
                os.close(self._pidfd)
            except OSError:
                pass


class Zygote:
    """The caller's handle on a zygote process: started at once (its import
    overlaps the caller's own work), waited for at the first spawn."""

    def __init__(self, env):
        """env: the zygote's environment (worker_process.py's kept
        variables: what a worker's own import of torch would see)."""
        if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds") or \
                not hasattr(signal, "pidfd_send_signal"):
            raise ZygoteUnavailable("no pidfds or send_fds in this Python (Linux 5.3+, Python 3.9+)")
        self.why = None            # why it can fork no more (ZygoteUnavailable's text)
        self.failed_start = False  # its own start failed (its import): not started again
        self.import_s = None       # torch's import in the zygote, from its ready
        self.spawned = 0           # workers it forked and answered for
        self._ready = False
        self._unanswered_end = False  # its socket closed with no answer read (it ended)
        self._lock = threading.Lock()  # one spawn at a time: in-flight slots share a zygote
        self._next_id = 0          # a spawn's number, echoed by its answer
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile()  # the zygote's own errors (a failed import)
        try:
            self.proc = subprocess.Popen([sys.executable, ZYGOTE, str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self._log, env=env,
                                         start_new_session=True)
        except BaseException:
            self._sock.close()
            self._log.close()
            raise
        finally:
            theirs.close()

    def _wait_ready(self, timeout_s):
        if self.why:
            raise ZygoteUnavailable(self.why)
        if self._ready:
            return
        try:
            msg, _ = self._receive(timeout_s, "its start")
            if not msg.get("ready"):
                self.failed_start = True  # its import failed: it would again
                self._fail(f"the zygote did not start: {msg.get('error', msg)}")
        except ZygoteUnavailable:
            if self._unanswered_end:
                # ended without an answer: one that exited of its own accord
                # (its script or Python failed: a code) would again; one
                # killed by a signal (out of memory) need not
                try:
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._end_process()
                    code = None
                self.failed_start = code is None or code >= 0
            elif timeout_s:
                # no answer in time: one that hangs at its start is not
                # started again (one that is only slow would hold torch for
                # nothing)
                self.failed_start = True
                self._end_process()
            raise
        self.import_s, self._ready = msg.get("import_s"), True

    def _receive(self, timeout_s, what):
        if not ready([self._sock], timeout_s=timeout_s):
            self._fail(f"the zygote did not answer {what} in {timeout_s:.0f} s")
        try:
            data, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1, socket.MSG_CMSG_CLOEXEC)
        except OSError as e:
            self._fail(f"the zygote's socket failed: {e}")
        if not data:
            self._unanswered_end = True
            self._fail(f"the zygote ended: {self._log_tail()}")
        try:
            return json.loads(data), fds
        except ValueError:
            for fd in fds:
                os.close(fd)
            self._fail(f"the zygote answered {data[:200]!r}")

    def _log_tail(self):
        try:
            self._log.seek(0)
            return self._log.read()[-1000:].decode(errors="replace").strip() or "no message"
        except (OSError, ValueError):
            return "no message"

    def _fail(self, why):
        self.why = self.why or why[:600]
        raise ZygoteUnavailable(self.why)

    def spawn(self, log_fd, worker_fds, config_json, env, niceness=0, timeout_s=READY_TIMEOUT_S):
        """A supervisor for a worker, forked: log_fd its stderr (and the
        worker's); worker_fds the worker's descriptors in worker.py's argv
        order (request, reply, region or None, shared or None), passed as
        they are; config_json its sandbox config ("" for none); env its
        whole environment; niceness as nice(1)'s. Its control pipes are
        made here. A ForkedProcess (stdin, stdout: its control pipes);
        ZygoteUnavailable where nothing was sent (the descriptors are the
        caller's still: a start by exec may take them), ZygoteLost where
        the request was sent and its answer lost."""
        with self._lock:
            return self._spawn(log_fd, worker_fds, config_json, env, niceness, timeout_s)

    def _spawn(self, log_fd, worker_fds, config_json, env, niceness, timeout_s):
        present = [fd for fd in worker_fds if fd is not None]
        request = {"op": "spawn", "config": config_json, "env": env, "niceness": int(niceness),
                   "worker": [None if fd is None else present.index(fd) for fd in worker_fds]}
        ctl_in_r, ctl_in_w = os.pipe()
        ctl_out_r, ctl_out_w = os.pipe()
        try:
            pid, pidfd = self._fork(request, [ctl_in_r, ctl_out_w, log_fd] + present, timeout_s)
        except BaseException:
            for fd in (ctl_in_w, ctl_out_r):  # (a supervisor forked meanwhile sees EOF and ends)
                os.close(fd)
            raise
        finally:
            os.close(ctl_in_r)
            os.close(ctl_out_w)
        return ForkedProcess(pid, pidfd, os.fdopen(ctl_in_w, "wb"), os.fdopen(ctl_out_r, "rb"))

    def wait_started(self, timeout_s=READY_TIMEOUT_S):
        """Waits for the zygote's own start (torch's import); ZygoteUnavailable
        if it failed. A caller that makes descriptors for a spawn makes them
        after this: a fork of the caller meanwhile would hold them."""
        with self._lock:
            self._wait_ready(timeout_s)

    def spawn_import(self, module, path, env, sys_path, stdin_fd, stdout_fd, log_fd, status_fd,
                     timeout_s=READY_TIMEOUT_S):
        """An import process (import_process.py) forked with torch imported,
        under a forked parent that waits for it (zygote_main._import_child):
        module (of kreward's) its program, whose main() runs with path as
        its argument; stdin_fd its request pipe, stdout_fd its answer pipe, log_fd its
        stderr, status_fd where the parent writes its exit status (the
        caller keeps its own ends and closes these after); env its whole
        environment, sys_path where the kreward package is. A
        ForkedProcess of the parent (the session's leader), without pipes
        of its own; ZygoteUnavailable and ZygoteLost as spawn's."""
        request = {"op": "spawn", "program": "import", "path": os.path.abspath(path), "env": env,
                   "sys_path": list(sys_path), "module": module}
        with self._lock:
            pid, pidfd = self._fork(request, [stdin_fd, stdout_fd, log_fd, status_fd], timeout_s)
        proc = ForkedProcess(pid, pidfd, None, None)
        proc.args = ["zygote", "import", request["path"]]
        return proc

    def _fork(self, request, fds, timeout_s):
        """One spawn request with its descriptors (lock held): (pid, pidfd).
        The child starts in the caller's folder of the moment."""
        self._wait_ready(timeout_s)
        self._next_id += 1
        try:
            cwd = os.getcwd()
        except OSError:  # the caller's folder removed: the child takes /
            cwd = None
        request = dict(request, id=self._next_id, cwd=cwd)
        sent = False
        try:
            try:
                socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
            except OSError as e:  # the zygote is gone (EPIPE), or the socket closed
                self._fail(f"the zygote took no request ({e}): {self._log_tail()}")
            sent = True
            msg, got = self._receive(timeout_s, "a spawn")
            if msg.get("id") != request["id"]:
                for fd in got:
                    os.close(fd)
                self._fail(f"the zygote answered spawn {msg.get('id')} to spawn {request['id']}")
        except BaseException as e:
            if sent:
                self.why = self.why or f"a spawn's answer was lost: {type(e).__name__}: {e}"[:600]
                self._end_process()
                if isinstance(e, Exception):
                    raise ZygoteLost(self.why) from e
            raise  # (an interrupt stays one: the caller's cleanup runs, nothing is retried)
        if "pid" not in msg or len(got) != 1:
            for fd in got:
                os.close(fd)
            if msg.get("forked") is not False:  # a child may hold the descriptors
                self.why = self.why or f"a spawn forked and failed: {msg.get('error', msg)}"[:600]
                self._end_process()
                raise ZygoteLost(self.why)
            self._fail(f"the zygote could not fork: {msg.get('error', msg)}")
        self.spawned += 1
        return msg["pid"], got[0]

    def _end_process(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        """Ends the zygote (its children are not its to end: each
        supervisor ends with its caller's control pipe). A spawn in
        progress in another thread ends with ZygoteLost or
        ZygoteUnavailable."""
        self.why = self.why or "the zygote was closed"
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a spawn waiting for its answer
        except OSError:
            pass
        with self._lock:
            try:
                self._sock.close()
            except OSError:
                pass
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._end_process()
            self._log.close()
