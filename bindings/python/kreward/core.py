"""Handles: Program, Problem, Plan, Report (Context and Reward build on the
same base).

Every handle is freed deterministically (close() or a with-block) or when
garbage collected, never during interpreter shutdown, when the library may
already be gone.

Lifetimes follow the C rules (include/kreward/context.h). A program and a
reward belong to their context, and C wants them freed before it; a problem
is a value, but its Python methods (generate, sanity) run through the
context that parsed it. These handles hold a count on their context
(_ContextRef): closing the Context makes it unusable for new calls, but the
C context is freed only when the last handle that counts on it is gone, in
whatever order close() and the garbage collector get to them. Plans and
reports are values that need no context: they hold none, so a report kept
for logging does not keep a GPU context alive."""
import ctypes
import errno
import itertools
import json
import os
import threading
import weakref

from . import _lib
from ._lib import fn
from .constants import DTYPES, FLAGS, ROLES


def _release(free, ptr, ctxref):
    free(ptr)
    if ctxref is not None:
        ctxref.release()


class _ContextRef:
    """The C context behind a Context, counted: one count for the Context
    itself, one per handle that needs the context. kr_context_free runs when
    the count reaches zero."""

    def __init__(self, ptr):
        self.ptr = ptr
        self._count = 1
        self._lock = threading.RLock()  # finalizers may run on any thread, even inside a lock holder

    def retain(self):
        with self._lock:
            if self._count == 0:
                raise ValueError("the context is already freed")
            self._count += 1
        return self

    def release(self):
        with self._lock:
            self._count -= 1
            ptr = self.ptr if self._count == 0 else None
            if ptr:
                self.ptr = None
        if ptr:
            fn.context_free(ptr)

    @property
    def handle(self):
        p = _lib.Ptr(self.ptr)
        p.obj = self
        return p

    def _error_context(self):
        return self.ptr


class _Handle:
    """A libkreward handle. .handle is its pointer for C calls (ValueError
    once closed). ctxref: the context it counts on (None for values)."""
    _free = None  # the kr_*_free function of this kind of handle

    def __init__(self, ptr, ctxref=None, owned=True):
        self._ptr = ptr.value if isinstance(ptr, ctypes.c_void_p) else ptr
        self._ctxref = ctxref.retain() if ctxref is not None and owned else ctxref
        # The finalizer holds what freeing needs, never the handle: it runs
        # once, from close() or when the handle is collected.
        self._finalizer = None
        if owned:
            self._finalizer = weakref.finalize(self, _release, type(self)._free, self._ptr,
                                               self._ctxref)
            self._finalizer.atexit = False  # at shutdown the library may be gone

    @property
    def handle(self):
        if not self._ptr:
            raise ValueError(f"{type(self).__name__} is closed")
        p = _lib.Ptr(self._ptr)
        p.obj = self
        return p

    @property
    def closed(self):
        return not self._ptr

    def _error_context(self):
        return self._ctxref.ptr if self._ctxref is not None else None

    def close(self):
        self._ptr = None
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _string_array(items):
    items = [_lib.encode(s) for s in items]
    arr = (ctypes.c_char_p * max(1, len(items)))(*items)
    return arr, len(items)


def _json_of(getter, handle):
    out = ctypes.c_void_p()
    getter(ctypes.byref(out), handle)
    return json.loads(_lib.take_string(out))


class Program(_Handle):
    """A compiled module (from source or a CUBIN/PTX image); belongs to the
    context that made it."""
    _free = staticmethod(fn.program_free)

    @property
    def log(self):
        return _lib.text(fn.program_log(self.handle))

    @property
    def hash(self):
        return _lib.text(fn.program_hash(self.handle))

    @property
    def arch(self):
        return _lib.text(fn.program_arch(self.handle))

    @property
    def compile_seconds(self):
        return fn.program_compile_seconds(self.handle)

    @property
    def kernels(self):
        return [_lib.text(fn.program_kernel_name(self.handle, i))
                for i in range(fn.program_kernel_count(self.handle))]

    def binary(self):
        """(image bytes, "cubin" or "ptx")."""
        from .constants import BINARY_KINDS
        data, n, kind = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int()
        fn.program_binary(ctypes.byref(data), ctypes.byref(n), ctypes.byref(kind), self.handle)
        return ctypes.string_at(data, n.value), BINARY_KINDS.get(kind.value, str(kind.value))

    def info(self):
        return _json_of(fn.program_json, self.handle)


class Plan(_Handle):
    """A launch plan (a value: usable with any context)."""
    _free = staticmethod(fn.plan_free)

    @property
    def kernels(self):
        """The kernel of each launch, in order."""
        return [_lib.text(fn.plan_launch_kernel(self.handle, i))
                for i in range(fn.plan_launch_count(self.handle))]

    def info(self):
        return _json_of(fn.plan_json, self.handle)


# Golden callbacks the library may still call: user key -> (C callback,
# error slot), until the library calls _golden_destroy(key) (callback
# replaced or problem freed). Entries hold no reference to their problem, so
# a callback that refers to its problem does not keep it alive.
_goldens = {}
_golden_keys = itertools.count(1)


def _golden_destroy(user):
    _goldens.pop(user, None)


_GOLDEN_DESTROY = _lib.USER_DESTROY(_golden_destroy)  # made once: lives as long as the module


class Problem(_Handle):
    """What a kernel must compute, on what data (a value in C; counts on the
    context that parsed it, which generate() and sanity() use)."""
    _free = staticmethod(fn.problem_free)

    def __init__(self, ptr, ctxref):
        super().__init__(ptr, ctxref)
        self._golden_fn = None    # the Python callback (the C one is in _goldens)
        self._golden_slot = None  # its exception, between the C call and its return

    @property
    def name(self):
        return _lib.text(fn.problem_name(self.handle))

    @property
    def hash(self):
        return _lib.text(fn.problem_hash(self.handle))

    def info(self):
        return _json_of(fn.problem_json, self.handle)

    @property
    def dims(self):
        """Dim names, in order."""
        return [_lib.text(fn.problem_dim_name(self.handle, d))
                for d in range(fn.problem_dim_count(self.handle))]

    @property
    def num_cases(self):
        return fn.problem_case_count(self.handle)

    @property
    def timing_case(self):
        return fn.problem_timing_case(self.handle)

    def case_dims(self, case):
        """{dim: value} of a case."""
        return {d: fn.problem_case_dim(self.handle, case, i) for i, d in enumerate(self.dims)}

    def tensors(self):
        """[(name, dtype, role)] in the problem's order."""
        return [(_lib.text(fn.problem_tensor_name(self.handle, t)),
                 DTYPES[fn.problem_tensor_dtype(self.handle, t)],
                 ROLES[fn.problem_tensor_role(self.handle, t)])
                for t in range(fn.problem_tensor_count(self.handle))]

    def shape(self, tensor, case):
        ext = (ctypes.c_int64 * 8)()
        rank = fn.problem_tensor_shape(ext, 8, self.handle, tensor, case)
        return tuple(ext[i] for i in range(rank))

    def nbytes(self, tensor, case):
        return fn.problem_tensor_bytes(self.handle, tensor, case)

    def tolerance(self, tensor):
        """(rtol, atol) of an output."""
        rtol, atol = ctypes.c_double(), ctypes.c_double()
        fn.problem_tensor_tolerance(ctypes.byref(rtol), ctypes.byref(atol), self.handle, tensor)
        return rtol.value, atol.value

    def generate(self, tensor, case, seed):
        """The bytes the GPU generator writes for this input (identical bits)."""
        n = self.nbytes(tensor, case)
        buf = ctypes.create_string_buffer(max(1, n))
        fn.problem_generate_host(buf, n, self._ctxref.handle, self.handle, tensor, case, seed)
        return buf.raw[:n]

    @staticmethod
    def case_seed(evaluation_seed, case):
        return fn.problem_case_seed(evaluation_seed, case)

    def check_reference(self):
        """Compiles the reference and checks its plan on every case (no GPU needed)."""
        fn.problem_check_reference(self._ctxref.handle, self.handle)

    def set_golden(self, callback):
        """callback(request) -> None fills the outputs: request.inputs is
        {name: memoryview} of the library's inputs, request.outputs {name:
        memoryview} to write, request.case and request.dims ({dim: value}).
        An exception is re-raised from the call that ran it (verify,
        evaluate ...). None removes the callback."""
        if callback is None:
            fn.problem_set_golden(self.handle, None, None, None)
            self._golden_fn = self._golden_slot = None
            return
        names = [t[0] for t in self.tensors()]
        roles = [t[2] for t in self.tensors()]
        dim_names = self.dims
        # The C callback reaches the problem and the Python callback only
        # through a weak reference: it lives in _goldens, and must not keep
        # the problem alive (the problem is alive whenever C calls it).
        problem = weakref.ref(self)

        def golden(user, req_ptr):
            req = req_ptr.contents
            views = []
            for t in range(req.num_tensors):
                n = req.bytes[t]
                buf = (ctypes.c_char * n).from_address(req.host[t]) if n else bytearray()
                views.append(memoryview(buf).cast("B"))
            request = GoldenRequest(
                case=req.case_index, seed=req.seed,
                dims={d: req.dims[i] for i, d in enumerate(dim_names)},
                inputs={k: v for k, v, r in zip(names, views, roles) if r != "out"},
                outputs={k: v for k, v, r in zip(names, views, roles) if r != "in"},
                problem=problem())
            request.problem._golden_fn(request)

        slot = _lib.ErrorSlot()
        cb = _lib.c_callback(_lib.GOLDEN_FN, golden, slot,
                             lambda user, req: (req.contents.errbuf, req.contents.errbuf_size))
        key = next(_golden_keys)
        _goldens[key] = (cb, slot)
        try:
            # the library calls _golden_destroy(key) once it stops using cb
            fn.problem_set_golden(self.handle, cb, key, _GOLDEN_DESTROY)
        except BaseException:
            _goldens.pop(key, None)
            raise
        self._golden_fn, self._golden_slot = callback, slot

    def sanity(self):
        """GPU soundness checks; returns (sound, summary text)."""
        out = ctypes.c_void_p()
        rc = fn.problem_sanity(ctypes.byref(out), self._ctxref.handle, self.handle)
        return rc == 0, _lib.take_string(out)  # rc is 0 or KR_EUNSOUND (see _lib's table)


class GoldenRequest:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Report(_Handle):
    """Everything one evaluation produced. Readable as attributes, as a dict
    (to_dict) and as JSON (to_json); settable by hand for testing terms. A
    value: it needs no context."""
    _free = staticmethod(fn.report_free)

    def __init__(self):
        out = ctypes.c_void_p()
        fn.report_new(ctypes.byref(out))
        super().__init__(out)

    @classmethod
    def _own(cls, ptr):
        """A report the library handed over (the caller frees it): freed here."""
        r = cls.__new__(cls)
        _Handle.__init__(r, ptr)
        return r

    @classmethod
    def _borrow(cls, ptr):
        """The library's report, lent to a callback: never freed here."""
        r = cls.__new__(cls)
        _Handle.__init__(r, ptr, owned=False)
        return r

    @property
    def verdict(self):
        return _lib.text(fn.verdict_name(fn.report_verdict(self.handle)))

    @verdict.setter
    def verdict(self, name):
        v = fn.verdict_from_name(_lib.encode(name))
        if not v:
            raise ValueError(f"unknown verdict {name!r}")
        fn.report_set_verdict(self.handle, v)

    @property
    def passed(self):
        return self.verdict == "passed"

    @property
    def flags(self):
        f = fn.report_flags(self.handle)
        return [name for bit, name in FLAGS.items() if f & bit]

    @flags.setter
    def flags(self, names):
        bits = 0
        for n in names:
            b = fn.flag_from_name(_lib.encode(n))
            if not b:
                raise ValueError(f"unknown flag {n!r}")
            bits |= b
        fn.report_set_flags(self.handle, bits)

    def __getitem__(self, key):
        v = ctypes.c_double()
        if fn.report_get(ctypes.byref(v), self.handle, _lib.encode(key)) != 0:
            # KR_ENOTFOUND: never set. Timing metrics exist only for a
            # candidate that ran (not for not_run, compile_error, ...)
            e = KeyError(key)
            if hasattr(e, "add_note"):
                message = self.message
                e.add_note(f"the report has no metric {key!r} (verdict {self.verdict}"
                           f"{': ' + message if message else ''}); report.get({key!r}) "
                           "gives None instead")
            raise e
        return v.value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key, value):
        fn.report_set(self.handle, _lib.encode(key), float(value))

    def metrics(self):
        """{name: value} of every metric set."""
        h = self.handle
        names = [_lib.text(fn.report_metric_name(h, i)) for i in range(fn.report_metric_count(h))]
        return {n: self[n] for n in names}

    def text(self, key):
        t = fn.report_text(self.handle, _lib.encode(key))
        return t.decode("utf-8", "replace") if t else None

    def set_text(self, key, value):
        fn.report_set_text(self.handle, _lib.encode(key), _lib.encode(value))

    @property
    def feedback(self):
        return self.text("feedback")

    @property
    def message(self):
        return self.text("message")

    @property
    def reward(self):
        """The total reward, None when the report was never scored."""
        h = self.handle
        return fn.report_reward(h) if fn.report_term_count(h) else None

    def to_json(self):
        out = ctypes.c_void_p()
        fn.report_json(ctypes.byref(out), self.handle)
        return _lib.take_string(out)

    def to_dict(self):
        return json.loads(self.to_json())

    def __repr__(self):
        if self.closed:
            return "<kreward.Report (closed)>"
        return f"<kreward.Report {self.verdict} reward={self.reward}>"


def _looks_like_json(s):
    return s.lstrip().startswith(("{", "["))


def _is_file(s, what="file"):
    """Whether s is a path to read rather than JSON text (or a dict). A
    string that is neither JSON nor an existing file raises
    FileNotFoundError: a mistyped path is not JSON text with a syntax error."""
    if not isinstance(s, str) or _looks_like_json(s):
        return False
    if os.path.exists(s):
        return True
    raise FileNotFoundError(errno.ENOENT, f"no such {what} (nor JSON text)", s)
