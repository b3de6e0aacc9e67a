"""The caller's side of a ModelNew worker (worker.py): the process started
under its supervisor, the request and reply pipes with a deadline on every
read, the supervisor's control line (end the whole process tree before the
baseline is timed), the checks every reply passes before anyone reads it,
and the exceptions a request can end in. What to ask is decided by the
evaluation's components (processes.py, transfer.py, timing.py,
verification.py, evaluation.py); this file only carries it."""
import collections
import contextlib
import ctypes
import fcntl
import json
import math
import mmap
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .zygote import ForkedProcess, ZygoteUnavailable
from .zygote_main import ready

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
F_SETPIPE_SZ = 1031       # fcntl: outputs of 64 MB in 1 MB reads, not 64 kB ones
MAX_LINE = 16 << 20       # a reply's JSON line (a load error's trace, a profile's kernel list)
# a timed request's reply line read by kr_exchange_timed (request_timed): a
# go's commitments are ~90 bytes a call, 1024 calls at most
EXCHANGE_ROOM = 1 << 20
MAX_PAYLOAD = 4 << 30     # a reply's binary payload unless the request names its own bound
MAX_DIMS = 64             # of an output's shape in a fetch's reply
SEND_TIMEOUT_S = 60.0     # a request's write, when its sender names no timeout

# who is told of each worker a thread starts (watch_starts): an in-flight
# lane's freezer (freezer.py) must know every worker its evaluations start,
# the moment it exists, to stop it with the others
_watch = threading.local()


def watch_starts(callback):
    """A context manager: while it is active, every WorkerProcess this
    thread starts is passed to callback right after its process exists."""
    @contextlib.contextmanager
    def watching():
        before = getattr(_watch, "callback", None)
        _watch.callback = callback
        try:
            yield
        finally:
            _watch.callback = before
    return watching()


def worker_environment():
    """The caller's environment as a worker gets it: what finds Python,
    the toolkit and the device, and nothing else of the caller's."""
    keep = {k: v for k, v in os.environ.items()
            if k in ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES",
                     "PYTHONPATH", "TMPDIR", "TRITON_CACHE_DIR", "USER", "LOGNAME")}
    # getpass.getuser() reads the password file (refused) without them
    keep.setdefault("USER", "kreward")
    keep.setdefault("LOGNAME", keep["USER"])
    return keep


class WorkerDied(Exception):
    pass


class WorkerTimeout(Exception):
    pass


class CandidateDenied(Exception):
    """The candidate did something the sandbox refuses."""


class CandidateFailed(RuntimeError):
    """A candidate's worker failed what it was asked (an exception in
    ModelNew(...) or forward, a device-side assert, an output that is not a
    tensor). The candidate's code runs in that process and can make any of
    its operations fail, so this is the candidate's own outcome, judged
    (verdict `crash`, scored as a failure): were it `error` (not judged, no
    number), failing on purpose would escape the penalty of a wrong answer,
    and a trainer that stops on a streak of unjudged samples could be
    stopped by its own policy. A RuntimeError: the baseline's failures are
    caught as before."""


class WorkerProtocolError(CandidateFailed):
    """A reply that is not what the request asks for. The worker runs the
    candidate's code, which can write on the worker's pipe (the fd is in its
    argv) or replace the worker's methods: a reply is data to check, like an
    output. The candidate's outcome (CandidateFailed), never an exception
    out of evaluate or a caller that allocates what the candidate claims."""


# what each request's reply carries (worker.py), checked before the runner
# reads it: {field: check}
def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _str_or_none(x):
    return x is None or isinstance(x, str)


def _strs(x):
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _kernels(x):
    return isinstance(x, list) and all(
        isinstance(k, dict) and isinstance(k.get("name"), str) and _count(k.get("calls"))
        and _num(k.get("us")) for k in x)


def _commitments(x):
    """go's commitment (worker.py): per call, per output, two int64 sums or
    None (an output that is not a tensor); absent unless asked for."""
    return x is None or isinstance(x, list) and all(
        isinstance(c, list) and all(s is None or isinstance(s, list) and len(s) == 2
                                    and all(isinstance(v, int) and not isinstance(v, bool) for v in s)
                                    for s in c) for c in x)


def _paths(x):
    """seal's gpu_paths (inputs.gpu_paths): at most its three names, each
    a short text or None (a candidate's worker writes its own reply)."""
    return isinstance(x, dict) and set(x) <= {"mask", "mask_why", "commitment"} and all(
        v is None or isinstance(v, str) and len(v) <= 400 for v in x.values())


def _status(x):
    return isinstance(x, dict) and isinstance(x.get("applied"), bool)


REPLIES = {
    "ready": {"no_subreaper": _str_or_none, "launch_us": _num},
    "load": {"compile_seconds": _num, "cached": lambda x: isinstance(x, bool),
             "hash": lambda x: isinstance(x, str), "sandbox": _status, "isolation": _status},
    "build": {"lifted": lambda x: isinstance(x, bool), "missing": _strs},
    "seal": {"sandbox": _status, "gpu_paths": _paths},
    "prepare": {"prepared": _count},
    "stage": {},
    "go": {"committed": _commitments},
    "times": {"event_us": _num},
    "fetch": {"outputs": lambda x: isinstance(x, list), "input_digest": lambda x: isinstance(x, str)},
    "fetch_piece": {},
    "attribute": {"kernels": _kernels},
    "drop": {},
    "launch": {"launch_us": _num},
}
FAILED = {"error": lambda x: isinstance(x, str)}
# element sizes of the dtypes an output may have (str(torch.dtype) without "torch.")
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "complex128": 16, "complex64": 8, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint8": 1, "bool": 1}


def _outputs_fit(outputs, size):
    """A fetch's output descriptions: each a tensor (shape, a known dtype,
    nbytes that shape and dtype make) or something that is not a tensor
    ({"type"}), their bytes adding up to the payload's."""
    total = 0
    for m in outputs:
        if not isinstance(m, dict):
            return False
        if "shape" not in m:
            if not isinstance(m.get("type"), str):
                return False
            continue
        shape, dtype, n = m["shape"], m.get("dtype"), m.get("nbytes")
        # (a bound on the dimensions first: the product over 800,000 of them,
        # a 16 MB line's worth, held the caller for minutes: helper-37)
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(_count(d) for d in shape)
                and dtype in ITEMSIZE
                and _count(n) and n == math.prod(shape) * ITEMSIZE[dtype]):
            return False
        total += n
    return total == size


PROFILE_PARTS, PROFILE_TEXT = 8, 6000


def go_profile(reply):
    """A go reply's profile (go_profile.py GoProfile), bounded: a few named
    seconds and a text of at most PROFILE_TEXT characters; None if it has
    none or is malformed. The worker runs the candidate's code, so this is
    its word: printed for a person, never judged by."""
    p = reply.get("profile")
    if not isinstance(p, dict):
        return None
    parts = p.get("parts_s")
    parts = ({str(k)[:40]: float(v) for k, v in list(parts.items())[:PROFILE_PARTS] if _num(v)}
             if isinstance(parts, dict) else {})
    total = p.get("total_s")
    top = p.get("top")
    return {"parts_s": parts, "total_s": float(total) if _num(total) else None,
            "top": top[:PROFILE_TEXT] if isinstance(top, str) else ""}


_EXCHANGE = []  # [kr_exchange_timed or None], found once
_STATUS = {}    # the library's status codes request_timed reads ("EIO": -9, ...)


def _exchange():
    """libkreward's kr_exchange_timed through ctypes (which lets the
    interpreter lock go for the call), or None where this process has no
    library loaded (request_timed then times with this thread's clock)."""
    if not _EXCHANGE:
        try:
            from .. import _lib
            from ..constants import Status
            _STATUS.update((name, int(Status[name])) for name in ("EIO", "ESTATE", "ECANCELED"))
            _EXCHANGE.append(_lib.fn.exchange_timed)
        except Exception:  # noqa: BLE001 - no library here: the clock of this thread
            _EXCHANGE.append(None)
    return _EXCHANGE[0]


def check_reply(op, reply, max_payload, ipc_asked=False):
    """Raises WorkerProtocolError unless reply is what op's request gets
    back (REPLIES), with a payload of at most max_payload bytes; a fetch's
    outputs through the shared buffer (ipc_bytes) exactly when its request
    asked for that (else a reply without bytes would leave the caller
    reading memory of its own as outputs: helper-37)."""
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise WorkerProtocolError(f"the worker's reply to {op} is not a reply: {str(reply)[:200]}")
    size = reply.get("bytes", 0)
    if not _count(size) or size > max_payload:
        raise WorkerProtocolError(f"the worker's reply to {op} announces {str(size)[:40]} bytes "
                                  f"(at most {max_payload})")
    fields = REPLIES[op] if reply["ok"] else FAILED
    bad = [k for k, ok in fields.items() if not ok(reply.get(k))]
    if not bad and reply["ok"] and op == "fetch":
        # through the shared buffer (ipc_bytes: fetch_piece) or as the payload
        ipc = reply.get("ipc_bytes")
        if (ipc is not None) != bool(ipc_asked) or ipc is not None and (
                not _count(ipc) or ipc > max_payload or size):
            bad = ["ipc_bytes"]
        elif not _outputs_fit(reply["outputs"], size if ipc is None else ipc):
            bad = ["outputs"]
    if bad:
        raise WorkerProtocolError(f"the worker's reply to {op} has no valid {', '.join(bad)}")


def _failure(reply):
    """The exception for a worker's failed reply: the sandbox refusing the
    candidate (CandidateDenied), else what the worker's code did
    (CandidateFailed). A reply's own `sandbox_failed` is not taken here: the
    sandbox is entered before the candidate's code runs (at start, or at
    load: evaluation.py reads it there), and any later reply is the
    candidate's to write (a field of the worker it can set, or a line on
    its pipe)."""
    if reply.get("denied"):
        return CandidateDenied(reply["error"])
    return CandidateFailed(reply["error"])


def printable(text):
    """A worker's words (the candidate's to choose) as one line of plain
    characters, for a result's text."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def optional_number(x):
    """A reply's optional numeric field (one check_reply does not require):
    the number, or None for anything else."""
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


class WorkerProcess:
    """A worker (through its supervisor, worker.py) with its pipes; every
    request has a deadline. Requests can be sent ahead of their replies
    (send, then receive in order)."""

    def __init__(self, env=None, sandbox=None, region_bytes=0, shared=None, niceness=0, zygote=None):
        """region_bytes: an input region of that size shared with the
        worker (inputs.py; self.region, the caller's mapping), or none.
        niceness: the supervisor, the worker and all they start run that
        much nicer (the compile stage's builds: the GPU turns' timing
        processes go first), through nice(1) so nothing races the fork.
        shared: the caller's device buffer for this worker's stage
        (cuda_ipc.CallerBuffer), this worker's alone: a descriptor of it
        goes to the worker at its start (none stays here), and end()
        frees it once the worker is gone. If this raises, the caller
        still owns it (and closes it: closing a closed one does nothing).
        zygote: a zygote.Zygote that forks the supervisor (torch imported
        already), or None: started by exec; started_by says which
        ("exec (why not the zygote)" where it could not)."""
        # staging: how a batch's inputs reach its device (transfer.py put):
        # None until the first, then "ipc" or "host (why not ipc)"
        self.shared, self.staging = None, None
        # the last batch's call number per seed, where the worker was given
        # call numbers instead of seeds (the input region: timing.py batch);
        # a fetch asks by it (transfer.py fetch)
        self.call_ids = {}
        to_w, self._w = os.pipe()
        os.set_blocking(self._w, False)  # (send: a write never waits past its deadline)
        self._r, from_w = os.pipe()
        # (a candidate can open its end of this pipe for reading too, by
        # /proc/self/fd, and take what a wait here saw: a blocking read would
        # then wait past every deadline)
        os.set_blocking(self._r, False)
        try:
            fcntl.fcntl(self._r, F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        self.log = tempfile.TemporaryFile()
        keep = worker_environment()
        config_json = json.dumps(sandbox) if sandbox else ""
        argv = [sys.executable, WORKER, str(to_w), str(from_w), config_json]
        nice = shutil.which("nice") if niceness else None
        if nice:
            argv = [nice, "-n", str(int(niceness))] + argv
        fds, self.region, region_fd = [to_w, from_w], None, None
        if region_bytes:  # sparse: pages exist once written
            # sealed at its size: the worker (which holds a descriptor of it:
            # Python's mmap keeps one) cannot shrink it under this process's
            # mapping (a write past its end would be SIGBUS here, in the
            # trainer); not inherited by anything else this process starts
            region_fd = os.memfd_create("kreward-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(region_fd, region_bytes)
            fcntl.fcntl(region_fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.region = mmap.mmap(region_fd, region_bytes)
            if hasattr(mmap, "MADV_DONTFORK"):
                self.region.madvise(mmap.MADV_DONTFORK)  # a fork of the trainer holds none of it
            fds.append(region_fd)
        argv.append(str(region_fd) if region_fd is not None else "")
        # the supervisor: its stdin and stdout are the control pipes (reap, status)
        self.proc, self.started_by = None, "exec"
        try:
            shared_fd = None
            if shared is not None:
                try:
                    shared_fd = shared.export()
                    fds.append(shared_fd)
                    argv.append(str(shared_fd))
                except Exception as e:  # noqa: BLE001 - staged through the region instead
                    shared.close()
                    shared = None
                    self.staging = f"host (the shared buffer could not be exported: {e})"[:400]
            if zygote is not None:
                try:
                    self.proc = zygote.spawn(self.log.fileno(), [to_w, from_w, region_fd, shared_fd],
                                             config_json, {**keep, **(env or {})}, niceness)
                    self.started_by = "zygote"
                except ZygoteUnavailable as e:
                    self.started_by = f"exec ({e})"[:400]
            if self.proc is None:
                self.proc = subprocess.Popen(argv, pass_fds=tuple(fds), stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=self.log,
                                             env={**keep, **(env or {})}, start_new_session=True)
        except BaseException:
            # not started (ZygoteLost among them: the caller starts another
            # with new descriptors): this side's ends go too
            for f in (self._w, self._r):
                os.close(f)
            self.log.close()
            if self.region is not None:
                self.region.close()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        self.shared = shared
        watcher = getattr(_watch, "callback", None)
        # replies arrive in pipe-sized chunks: a bytearray (appending to bytes
        # copied the whole buffer each time); payloads are read into a buffer
        # of their own size (_read)
        self._buf = bytearray()
        self._ctl, self._ctl_buf = self.proc.stdout.fileno(), b""
        self.pending = 0
        self._asked = collections.deque()  # (op, payload bound) of the requests not yet answered
        # the latest moment (time.monotonic) any reply may come, whatever a
        # request's own timeout, and what a WorkerTimeout then says: a
        # candidate that answers every request just inside its timeout
        # still ends (limit_until)
        self.deadline, self.deadline_why = None, None
        self.max_payload = MAX_PAYLOAD    # processes.py sets a tighter bound (the outputs' size)
        self.ended = self.exited = None
        # when it was started (time.monotonic), and the reply to the ready
        # request its starter sent first, once read (receive_ready): a spare
        # started ahead has it read before its candidate's timed batches
        self.started = time.monotonic()
        self.ready_reply = None
        self._end_lock = threading.Lock()
        self.ctl_closed = False
        # seconds spent in request() per op (the caller's wall time: the
        # worker's work, the pipes, the payloads), for where a batch's
        # time goes (results' ops_s: timing.py clocks); whoever reads it resets it
        self.op_s = collections.Counter()
        self._exchange_room = None  # (request_timed)
        if watcher is not None:
            watcher(self)

    def _wait(self, deadline):
        """Until the worker's pipe has data; WorkerDied as soon as the
        supervisor says the worker ended (a process it started may hold the
        pipe open: no EOF then)."""
        while True:
            left = deadline - time.monotonic()
            got = ready([self._r, self._ctl], select.POLLIN, left) if left > 0 else []
            if self._r in got:
                return
            if not got:
                raise WorkerTimeout("the worker did not answer in time")
            self._control_line(0)  # an event: the worker's end
            if self.exited or self.ctl_closed:
                raise WorkerDied(self.exit_reason())

    def _fill(self, deadline):
        while True:
            self._wait(deadline)
            try:
                chunk = os.read(self._r, 1 << 20)
                break
            except BlockingIOError:  # another reader took what the wait saw: wait again
                continue
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
            try:
                got = os.readv(self._r, [view[have:]])
            except BlockingIOError:  # (as _fill)
                continue
            if not got:
                raise WorkerDied(self.exit_reason())
            have += got
        return out

    def _line(self, deadline):
        seen = 0  # bytes already searched for the end of the line
        while (end := self._buf.find(b"\n", seen)) < 0:
            seen = len(self._buf)
            if seen > MAX_LINE:
                raise WorkerProtocolError(f"the worker's reply is longer than {MAX_LINE} bytes")
            self._fill(deadline)
        if end > MAX_LINE:
            raise WorkerProtocolError(f"the worker's reply is longer than {MAX_LINE} bytes")
        line = bytes(self._buf[:end])
        del self._buf[:end + 1]
        return line

    def send(self, obj, max_payload=None, timeout_s=SEND_TIMEOUT_S):
        """max_payload: the most bytes the reply may carry (default
        self.max_payload). The request pipe does not block: a worker that
        stops reading it (after filling it itself: it can open its own pipe
        by /proc/self/fd) meets the same deadlines as one that stops
        answering (helper-37: a blocking write held the caller for good)."""
        data = memoryview((json.dumps(obj) + "\n").encode())
        deadline = time.monotonic() + timeout_s
        capped = self.deadline is not None and self.deadline < deadline
        if capped:
            deadline = self.deadline
        self._write_all(data, deadline, capped)
        self._asked.append((obj["op"], max_payload, "ipc" in obj))
        self.pending += 1

    def _write_all(self, data, deadline, capped):
        """data (a memoryview) written to the request pipe by deadline
        (capped: the evaluation's limit, whose reason a timeout gives)."""
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not ready([self._w], select.POLLOUT, left):
                raise WorkerTimeout(self.deadline_why if capped else
                                    "the worker did not read its requests in time")
            try:
                data = data[os.write(self._w, data):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise WorkerDied(self.exit_reason()) from None

    def limit_until(self, deadline, why):
        """No reply after `deadline` (time.monotonic()): a request that would
        wait past it raises WorkerTimeout(why) there."""
        self.deadline, self.deadline_why = deadline, why

    def receive(self, timeout_s):
        """The reply to the oldest request not yet answered, and its payload;
        WorkerProtocolError for a reply that is not one (check_reply)."""
        deadline = time.monotonic() + timeout_s
        capped = self.deadline is not None and self.deadline < deadline
        if capped:
            deadline = self.deadline
        try:
            line = self._line(deadline)
            op, bound, ipc_asked = self._asked.popleft()
            self.pending -= 1
            try:
                reply = json.loads(line)  # the worker's JSON: data, never code
            except (ValueError, RecursionError) as e:
                raise WorkerProtocolError(f"the worker's reply to {op} is not JSON: {e}") from None
            check_reply(op, reply, self.max_payload if bound is None else bound, ipc_asked)
            payload = self._read(reply["bytes"], deadline) if reply.get("bytes") else b""
        except WorkerTimeout:
            if capped:
                raise WorkerTimeout(self.deadline_why) from None
            raise
        return reply, payload

    def receive_ready(self, timeout_s):
        """The reply to the worker's ready request (the first it was sent),
        read once and kept: whoever asks later (the candidate's start, after
        the evaluation before it waited for the spare) gets the same reply
        without a second read, which would take the next request's."""
        if self.ready_reply is None:
            self.ready_reply = self.receive(timeout_s)[0]
        return self.ready_reply

    def request(self, obj, timeout_s, max_payload=None):
        """One request and its reply: (reply, payload)."""
        t0 = time.perf_counter()
        try:
            return self._request(obj, timeout_s, max_payload)
        finally:
            self.op_s[obj.get("op")] += time.perf_counter() - t0

    def _request(self, obj, timeout_s, max_payload):
        self.send(obj, max_payload, timeout_s)
        return self.receive(timeout_s)

    def request_timed(self, obj, timeout_s, max_payload=None):
        """request(), and the seconds from its first byte written to its
        reply's line read, both clock readings taken by libkreward's
        kr_exchange_timed with this process's interpreter lock let go: a
        thread that wakes when a reply arrives must take that lock back
        first, and any other thread of this process busy meanwhile (another
        candidate's bookkeeping, the trainer's own) added up to the switch
        interval (5 ms) to the time read after it, at random, on either side
        of a timed batch (+5.05 ms a 2 ms round trip beside one busy thread,
        this project's CPU machine). The reply is then read and checked as
        every reply is (receive); where the exchange could not time it (an
        unanswered request or unread bytes before it, a line longer than its
        room, a signal, a timeout, the worker's end or its supervisor's word)
        the time is this thread's clock, as before, which only makes it
        longer. (reply, payload, seconds)."""
        t0 = time.perf_counter()
        exchange = _exchange()
        try:
            if exchange is None or self.pending or self._buf:
                reply, payload = self._request(obj, timeout_s, max_payload)
                return reply, payload, time.perf_counter() - t0
            data = (json.dumps(obj) + "\n").encode()
            start = time.monotonic()
            deadline = start + timeout_s
            capped = self.deadline is not None and self.deadline < deadline
            if capped:
                deadline = self.deadline
            times, counts = (ctypes.c_uint64 * 2)(), (ctypes.c_size_t * 2)()
            room = self._room()
            rc = exchange(times, counts, room, len(room), self._w, data, len(data), self._r, self._ctl,
                          min(max(0, math.ceil((deadline - start) * 1000)), 2**31 - 1))
            self._buf += bytes(room[:counts[1]])
            if counts[0] < len(data) and rc == _STATUS["ECANCELED"]:
                # a signal (its handler has run by now): the rest written as
                # send() writes, the reply read and timed as request() does
                self._write_all(memoryview(data)[counts[0]:], deadline, capped)
                counts[0] = len(data)
            if counts[0] < len(data):  # the request did not go whole: as send() says it
                if rc in (_STATUS["EIO"], _STATUS["ESTATE"]):  # its reader gone, or the supervisor's word
                    raise WorkerDied(self.exit_reason())
                raise WorkerTimeout(self.deadline_why if capped else
                                    "the worker did not read its requests in time")
            self._asked.append((obj["op"], max_payload, "ipc" in obj))
            self.pending += 1
            # (a timeout, an end, a line past the room: receive meets it and says so)
            reply, payload = self.receive(max(deadline - time.monotonic(), 0.001) if not capped else timeout_s)
            seconds = (times[1] - times[0]) / 1e9 if rc == 0 and times[1] >= times[0] else \
                time.perf_counter() - t0
            return reply, payload, seconds
        finally:
            self.op_s[obj.get("op")] += time.perf_counter() - t0

    def _room(self):
        """The buffer kr_exchange_timed reads a reply's first line into
        (the line's end timed there; made once per worker)."""
        if self._exchange_room is None:
            self._exchange_room = (ctypes.c_char * EXCHANGE_ROOM)()
        return self._exchange_room

    def alive(self):
        return self.ended is None and self.proc.poll() is None

    def _control_line(self, timeout_s):
        """The supervisor's next line (an answer, or an event, recorded):
        the answer, or None (nothing in time, or the supervisor gone)."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._ctl_buf:
            left = max(0.0, deadline - time.monotonic())
            if not ready([self._ctl], select.POLLIN, left):
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
        with self._end_lock:  # the evaluation's thread and a close() from another
            if self.ended is None:
                self.ended = self._end(timeout_s)
            return self.ended

    def _end(self, timeout_s):
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
            if isinstance(self.proc, ForkedProcess):
                self.proc.kill()  # through its pidfd: the zygote reaps, so its pid may be reused
            else:
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
        self.release_region()
        if self.region is not None:
            try:
                self.region.close()
            except BufferError:  # a view still held: the mapping goes with it
                pass
            self.region = None
        if self.shared is not None:
            # this side's mapping: the worker's (a stray's, if the end was
            # not clean) holds the memory, never this process's other data
            try:
                self.shared.close()
            except Exception:  # noqa: BLE001 - (CUDA gone at interpreter exit)
                pass
            self.shared = None
        return res

    def release_region(self):
        """Frees the input region's pages (a batch's inputs, up to the batch
        budget, kept while the worker is: warm runners held hundreds of MB)."""
        if self.region is not None and hasattr(mmap, "MADV_REMOVE"):
            try:
                self.region.madvise(mmap.MADV_REMOVE)
            except OSError:
                pass

    def close(self):
        self.end()
