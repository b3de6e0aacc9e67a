"""The caller's side of a ModelNew worker (worker.py): the process started
under its supervisor, the request and reply pipes with a deadline on every
read, the supervisor's control line (end the whole process tree before the
baseline is timed), and the exceptions a request can end in. runner.py
decides what to ask; this file only carries it."""
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
F_SETPIPE_SZ = 1031       # fcntl: outputs of 64 MB in 1 MB reads, not 64 kB ones


class WorkerDied(Exception):
    pass


class WorkerTimeout(Exception):
    pass


class CandidateDenied(Exception):
    """The candidate did something the sandbox refuses."""


def _failure(reply):
    """The exception for a worker's failed reply."""
    if reply.get("denied"):
        return CandidateDenied(reply["error"])
    return RuntimeError(reply["error"])


class WorkerProcess:
    """A worker (through its supervisor, worker.py) with its pipes; every
    request has a deadline. Requests can be sent ahead of their replies
    (send, then receive in order)."""

    def __init__(self, env=None, sandbox=None):
        to_w, self._w = os.pipe()
        self._r, from_w = os.pipe()
        try:
            fcntl.fcntl(self._r, F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        self.log = tempfile.TemporaryFile()
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES",
                         "PYTHONPATH", "TMPDIR", "TRITON_CACHE_DIR", "USER", "LOGNAME")}
        # getpass.getuser() reads the password file (refused) without them
        keep.setdefault("USER", "kreward")
        keep.setdefault("LOGNAME", keep["USER"])
        argv = [sys.executable, WORKER, str(to_w), str(from_w), json.dumps(sandbox) if sandbox else ""]
        # the supervisor: its stdin and stdout are the control pipes (reap, status)
        self.proc = subprocess.Popen(argv, pass_fds=(to_w, from_w), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log,
                                     env={**keep, **(env or {})}, start_new_session=True)
        os.close(to_w)
        os.close(from_w)
        # replies arrive in pipe-sized chunks: a bytearray (appending to bytes
        # copied the whole buffer each time); payloads are read into a buffer
        # of their own size (_read)
        self._buf = bytearray()
        self._ctl, self._ctl_buf = self.proc.stdout.fileno(), b""
        self.pending = 0
        self.ended = self.exited = None
        self.ctl_closed = False

    def _wait(self, deadline):
        """Until the worker's pipe has data; WorkerDied as soon as the
        supervisor says the worker ended (a process it started may hold the
        pipe open: no EOF then)."""
        while True:
            left = deadline - time.monotonic()
            ready = select.select([self._r, self._ctl], [], [], max(left, 0))[0] if left > 0 else []
            if self._r in ready:
                return
            if not ready:
                raise WorkerTimeout("the worker did not answer in time")
            self._control_line(0)  # an event: the worker's end
            if self.exited or self.ctl_closed:
                raise WorkerDied(self.exit_reason())

    def _fill(self, deadline):
        self._wait(deadline)
        chunk = os.read(self._r, 1 << 20)
        if not chunk:
            raise WorkerDied(self.exit_reason())
        self._buf += chunk

    def _read(self, n, deadline):
        """n bytes of payload, read straight into a buffer of their size."""
        have = min(n, len(self._buf))
        out = bytearray(n)
        out[:have] = self._buf[:have]
        del self._buf[:have]
        view = memoryview(out)
        while have < n:
            self._wait(deadline)
            got = os.readv(self._r, [view[have:]])
            if not got:
                raise WorkerDied(self.exit_reason())
            have += got
        return out

    def _line(self, deadline):
        while b"\n" not in self._buf:
            self._fill(deadline)
        end = self._buf.index(b"\n")
        line = bytes(self._buf[:end])
        del self._buf[:end + 1]
        return line

    def send(self, obj):
        try:
            os.write(self._w, (json.dumps(obj) + "\n").encode())
        except BrokenPipeError:
            raise WorkerDied(self.exit_reason()) from None
        self.pending += 1

    def receive(self, timeout_s):
        """The reply to the oldest request not yet answered, and its payload."""
        deadline = time.monotonic() + timeout_s
        reply = json.loads(self._line(deadline))  # the worker's JSON: data, never code
        self.pending -= 1
        payload = self._read(reply["bytes"], deadline) if reply.get("bytes") else b""
        return reply, payload

    def request(self, obj, timeout_s):
        self.send(obj)
        return self.receive(timeout_s)

    def alive(self):
        return self.ended is None and self.proc.poll() is None

    def _control_line(self, timeout_s):
        """The supervisor's next line (an answer, or an event, recorded):
        the answer, or None (nothing in time, or the supervisor gone)."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._ctl_buf:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([self._ctl], [], [], left)[0]:
                return None
            data = os.read(self._ctl, 4096)
            if not data:
                self.ctl_closed = True
                return None
            self._ctl_buf += data
        line, self._ctl_buf = self._ctl_buf.split(b"\n", 1)
        msg = json.loads(line)
        if msg.pop("event", None) == "exited":
            self.exited = msg
            return None
        return msg

    def _control(self, cmd, timeout_s):
        """A command to the supervisor; its JSON answer, or None."""
        try:
            self.proc.stdin.write(cmd + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            answer = self._control_line(deadline - time.monotonic())
            if answer is not None:
                return answer
            if self.ctl_closed:
                return None
        return None

    def exit_reason(self):
        st = self.exited
        if st is None and not self.ctl_closed:
            st = self._control(b"status", 10.0)
        if not st or not st.get("exited"):
            if st is None and self.ctl_closed:
                return "the worker's supervisor is gone"
            return "the worker closed its pipe"
        self.log.seek(0)
        tail = self.log.read()[-1500:].decode(errors="replace").strip()
        how = f"signal {st['signal']}" if "signal" in st else f"exit status {st.get('code')}"
        return f"the worker died ({how}): {tail}"

    def end(self, timeout_s=90.0):
        """Kills the worker and every process below its supervisor; once this
        says clean, none of them is alive: {"clean", "strays", "why"}."""
        if self.ended is not None:
            return self.ended
        res = None
        if self.proc.poll() is None:
            res = self._control(b"reap", timeout_s)
        if res is None:
            res = {"clean": False, "strays": 0,
                   "why": "the worker's supervisor did not answer: it was ended, or stopped"}
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            res = dict(res, clean=False, why="the worker's supervisor did not exit")
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.log.close()
        self.ended = res
        return res

    def close(self):
        self.end()
