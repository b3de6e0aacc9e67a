"""The GPU work of one call, read from CUPTI's activity records: each
kernel, memcpy and memset it ran, named as torch.profiler names them, with
its GPU time. The worker's attribution (worker.py `attribute`) uses it in
place of a torch.profiler session, whose start in a fresh process (kineto's
setup beside CUPTI's) took 3.5-5.8 s of every candidate on the H200 at
c95ccb7; bench/profiler_start_cost.py measures both.

The libcupti used is the one torch itself loaded (found in the process's
maps), else torch's own copy, else the toolkit's: one CUPTI in a process.
It is found and its functions bound at the worker's `ready`, before any
candidate code runs, so a candidate cannot hand the harness another
library or patch the lookup; no CUPTI call is made until the trace itself
(CUPTI's first call attaches it to the driver, and an attached CUPTI
could slow the timed calls; attribution comes after them).

Records are read through cuptiActivityGetNextRecord (their sizes grow with
CUPTI's version) at the fields whose offsets have held from CUPTI 11's
records to 13's (CUpti_ActivityKernel4-10, Memcpy4-6, Memset3-4, checked
against the headers by test_kernel_trace.py). A trace that is not whole
fails (an attribution that misses a kernel, or reads one as taking no
time, is no attribution): records CUPTI says it dropped, a record without
its end (a forced flush hands over work still running), a buffer CUPTI
could not be given, a failed flush.

CUPTI's callbacks run Python (ctypes), so they do as little as they can:
the request hands out a buffer, the completion only queues it; records are
read after the flush, on the caller's thread. Buffers are large (32 MiB,
some 150,000 kernel records), so that a call's records normally come back
in one buffer at the flush rather than from CUPTI's own thread.

Standard library only (the worker loads it by path)."""
import ctypes
import glob
import os

KIND_MEMCPY, KIND_MEMSET, KIND_CONCURRENT_KERNEL = 1, 2, 10
TRACED_KINDS = (KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET)
# offsets shared by every record version named above
START, END = 16, 24
KERNEL_NAME = 104
MEMCPY_KIND, MEMCPY_SRC, MEMCPY_DST = 4, 5, 6
MEMSET_MEMORY = 50
# kineto's words for CUPTI's enums, so that names match torch.profiler's
# (scoring.py's patterns read "Memcpy DtoD ..." and "Memset ...")
COPY_KINDS = ("<unknown>", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH",
              "PtoP")
MEMORY_KINDS = ("Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static",
                "Managed Static")
BUFFER_BYTES = 1 << 25
# kineto leaves longer names as they are (libstdc++'s demangler gives up
# on them too)
DEMANGLE_MAX = 1024
CUPTI_SUCCESS = 0
CUPTI_MAX_LIMIT_REACHED = 12  # cuptiActivityGetNextRecord: no more records in the buffer
FLUSH_FORCED = 1


class TraceUnavailable(RuntimeError):
    """No CUPTI could be bound, or its first call failed: nothing was traced
    (at binding, the worker's ready then chooses torch.profiler; at a
    trace, the attribution fails)."""


class TraceFailed(RuntimeError):
    """The call ran under the trace but its records are not whole."""


def library_candidates(torch_dir=None):
    """Paths of libcupti to try, best first: the one already mapped into
    this process (torch's), torch's own copies, the toolkit's."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            paths += sorted({line.split()[-1] for line in maps if "/libcupti.so" in line})
    except OSError:
        pass
    roots = [torch_dir] if torch_dir else []
    roots += [os.path.join(os.path.dirname(torch_dir), "nvidia")] if torch_dir else []
    for root in roots:
        paths += sorted(glob.glob(os.path.join(root, "lib", "libcupti.so*")))
        paths += sorted(glob.glob(os.path.join(root, "*", "lib", "libcupti.so*")))
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            paths += sorted(glob.glob(os.path.join(home, "extras", "CUPTI", "lib64", "libcupti.so*")))
            paths += sorted(glob.glob(os.path.join(home, "lib64", "libcupti.so*")))
    return list(dict.fromkeys(paths))  # (each once, in order)


class Demangler:
    """C++ names as torch.profiler shows them (kineto demangles with the
    same __cxa_demangle); a name that is not a mangled one (Triton's,
    extern "C") unchanged. (kineto demangles every name, so an extern "C"
    kernel named `f` or `i` reads "float" or "int" there; here it keeps
    its name.)"""

    def __init__(self):
        self.fn = self.free = None
        try:
            cxx = ctypes.CDLL("libstdc++.so.6")
            fn = getattr(cxx, "__cxa_demangle")
            fn.restype = ctypes.c_void_p
            fn.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_int))
            free = ctypes.CDLL(None).free
            free.argtypes = (ctypes.c_void_p,)
            self.fn, self.free = fn, free
        except (OSError, AttributeError):
            pass

    def __call__(self, name):
        if self.fn is None or not name.startswith("_Z") or len(name) > DEMANGLE_MAX:
            return name
        status = ctypes.c_int(-1)
        p = self.fn(name.encode(), None, None, ctypes.byref(status))
        if not p:
            return name
        try:
            return ctypes.string_at(p).decode("utf-8", "replace") if status.value == 0 else name
        finally:
            self.free(p)


def describe(address, demangle):
    """(name, start ns, end ns) of the record at address, or None for a
    kind not traced. A start of 0 or an end before the start: a record
    whose work had not finished when it was handed over."""
    kind = ctypes.c_uint32.from_address(address).value
    start = ctypes.c_uint64.from_address(address + START).value
    end = ctypes.c_uint64.from_address(address + END).value
    if kind == KIND_CONCURRENT_KERNEL:
        p = ctypes.c_void_p.from_address(address + KERNEL_NAME).value
        raw = ctypes.string_at(p).decode("utf-8", "replace") if p else "<unnamed kernel>"
        return demangle(raw), start, end
    if kind == KIND_MEMCPY:
        b = ctypes.string_at(address + MEMCPY_KIND, 3)
        name = (f"Memcpy {_word(COPY_KINDS, b[0], '<unknown>')} "
                f"({_word(MEMORY_KINDS, b[1])} -> {_word(MEMORY_KINDS, b[2])})")
        return name, start, end
    if kind == KIND_MEMSET:
        memory = ctypes.c_uint16.from_address(address + MEMSET_MEMORY).value
        return f"Memset ({_word(MEMORY_KINDS, memory)})", start, end
    return None


def by_name(timed):
    """[{"name", "calls", "us"}] per distinct name of (name, GPU us) pairs,
    in first-seen order: attribution's list, whichever tracer saw them."""
    kernels = {}
    for name, us in timed:
        k = kernels.setdefault(name, [0, 0.0])
        k[0] += 1
        k[1] += us
    return [{"name": n, "calls": c, "us": us} for n, (c, us) in kernels.items()]


def busy_us(spans):
    """Microseconds the GPU was busy with any of the (start, end) spans
    (their union: kernels of several streams overlap)."""
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1000.0


def _word(words, i, beyond="Unrecognized"):
    return words[i] if i < len(words) else beyond


REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(ctypes.c_size_t))
COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_size_t)


class KernelTrace:
    """CUPTI bound (never called) at construction; `run(call)` traces one
    call. lib: a loaded libcupti (tests give a stand-in)."""

    def __init__(self, lib=None, torch_dir=None):
        self.path, self.why = None, None
        if lib is None:
            for path in library_candidates(torch_dir):
                try:
                    lib = ctypes.CDLL(path)
                    self.path = path
                    break
                except OSError as e:
                    self.why = f"{path}: {e}"
        if lib is None:
            raise TraceUnavailable(self.why or "no libcupti found (torch's, the toolkit's)")
        try:
            self.register = lib.cuptiActivityRegisterCallbacks
            self.enable, self.disable = lib.cuptiActivityEnable, lib.cuptiActivityDisable
            self.flush, self.next_record = lib.cuptiActivityFlushAll, lib.cuptiActivityGetNextRecord
            self.dropped = lib.cuptiActivityGetNumDroppedRecords
        except AttributeError as e:
            raise TraceUnavailable(f"{self.path}: not a CUPTI ({e})") from None
        self.register.argtypes = (REQUESTED, COMPLETED)
        self.enable.argtypes = self.disable.argtypes = (ctypes.c_int,)
        self.flush.argtypes = (ctypes.c_uint32,)
        self.next_record.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p))
        self.dropped.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_size_t))
        self.demangle = Demangler()
        self.buffers = {}     # address -> the ctypes buffer behind it, until read
        self.completed = []   # (context, stream, address, valid bytes) handed back, not yet read
        self.lost = []        # why the trace is not whole
        self.busy_us = None   # the last trace's GPU busy time (busy_us)
        # the callbacks live as long as this object (CUPTI holds their pointers)
        self._requested, self._completed = REQUESTED(self._on_request), COMPLETED(self._on_complete)

    # CUPTI's callbacks: nothing but handing out and queueing buffers (they
    # may run on CUPTI's thread, and every line of Python here waits for the GIL)
    def _on_request(self, buffer, size, max_records):
        try:
            b = ctypes.create_string_buffer(BUFFER_BYTES + 8)
            address = (ctypes.addressof(b) + 7) & ~7  # CUPTI wants 8-byte alignment
            self.buffers[address] = b
            buffer[0], size[0], max_records[0] = address, BUFFER_BYTES, 0
        except BaseException as e:  # noqa: BLE001 - an exception may not cross into CUPTI
            self.lost.append(f"no buffer for CUPTI: {type(e).__name__}: {e}")
            buffer[0], size[0], max_records[0] = None, 0, 0

    def _on_complete(self, context, stream, buffer, size, valid):
        self.completed.append((context, stream, buffer, valid))

    def _read(self, context, stream, buffer, valid):
        """The records of one buffer handed back; the buffer let go."""
        records = []
        try:
            record = ctypes.c_void_p(None)
            while True:
                rc = self.next_record(buffer, valid, ctypes.byref(record))
                if rc == CUPTI_MAX_LIMIT_REACHED:
                    break
                if rc != CUPTI_SUCCESS:
                    self.lost.append(f"cuptiActivityGetNextRecord: CUPTI error {rc}")
                    break
                seen = describe(record.value, self.demangle)
                if seen is None:
                    continue
                if seen[1] == 0 or seen[2] < seen[1]:
                    self.lost.append(f"{seen[0][:80]}: a record without its end (its work still running)")
                    continue
                records.append(seen)
            n = ctypes.c_size_t(0)
            if self.dropped(context, stream, ctypes.byref(n)) == CUPTI_SUCCESS and n.value:
                self.lost.append(f"CUPTI dropped {n.value} records")
        finally:
            self.buffers.pop(buffer, None)
        return records

    def run(self, call):
        """call() under the trace (it must end with the device synchronised);
        [{"name", "calls", "us"}] per distinct name, and self.busy_us.
        TraceUnavailable when CUPTI would not start (the call did not run);
        TraceFailed when the records are not whole, or the call raised
        TraceUnavailable itself (never a reason to trace another way)."""
        self.completed, self.lost, self.busy_us = [], [], None
        rc = self.register(self._requested, self._completed)
        if rc != CUPTI_SUCCESS:
            raise TraceUnavailable(f"cuptiActivityRegisterCallbacks: CUPTI error {rc}")
        enabled = []
        try:
            for kind in TRACED_KINDS:
                rc = self.enable(kind)
                if rc != CUPTI_SUCCESS:
                    raise TraceUnavailable(f"cuptiActivityEnable({kind}): CUPTI error {rc}")
                enabled.append(kind)
            try:
                call()
            except TraceUnavailable as e:
                raise TraceFailed(f"the traced call raised {type(e).__name__}: {e}") from None
        finally:
            for kind in enabled:
                self.disable(kind)
            if enabled:
                rc = self.flush(FLUSH_FORCED)
                if rc != CUPTI_SUCCESS:
                    self.lost.append(f"cuptiActivityFlushAll: CUPTI error {rc}")
        records = []
        for handed in self.completed:
            records += self._read(*handed)
        self.completed = []
        # (a buffer the forced flush did not hand back held no record; CUPTI
        # still owns it, so it stays alive in self.buffers)
        n = ctypes.c_size_t(0)
        if self.dropped(None, 0, ctypes.byref(n)) == CUPTI_SUCCESS and n.value:
            self.lost.append(f"CUPTI dropped {n.value} records")
        if self.lost:
            raise TraceFailed("; ".join(self.lost[:5]))
        self.busy_us = busy_us([(start, end) for _, start, end in records])
        return by_name((name, (end - start) / 1000.0) for name, start, end in records)
