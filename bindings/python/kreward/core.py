"""Handles: Context, Program, Problem, Plan, Report, Reward.

Every handle closes deterministically (close() or a with-block) and is
also closed when garbage collected, except during interpreter shutdown,
when the library may already be gone. A handle made from a context keeps
the context alive."""
import ctypes
import json
import os
import sys

from . import _lib
from ._lib import fn
from .errors import KrewardError, check

DTYPES = {1: "f32", 2: "f16", 3: "bf16", 4: "f64", 5: "i8", 6: "u8", 7: "i32", 8: "i64",
          9: "bool", 10: "fp8_e4m3", 11: "fp8_e5m2"}
ROLES = {1: "in", 2: "out", 3: "inout"}


class _Handle:
    _free = None

    def __init__(self, ptr, owner=None):
        self._ptr = ptr
        self._owner = owner  # keeps what this handle depends on alive

    @property
    def handle(self):
        if not self._ptr:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._ptr

    def close(self):
        if self._ptr and not sys.is_finalizing():
            type(self)._free(self._ptr)
        self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _string_array(items):
    items = [_lib.encode(s) for s in items]
    arr = (ctypes.c_char_p * max(1, len(items)))(*items)
    return arr, len(items)


class Program(_Handle):
    _free = staticmethod(fn.program_free)

    @property
    def log(self):
        return _lib.text(fn.program_log(self.handle))

    @property
    def hash(self):
        return _lib.text(fn.program_hash(self.handle))

    @property
    def kernels(self):
        return [_lib.text(fn.program_kernel_name(self.handle, i))
                for i in range(fn.program_kernel_count(self.handle))]

    def info(self):
        out = ctypes.c_void_p()
        check(fn.program_json(self.handle, ctypes.byref(out)))
        return json.loads(_lib.take_string(out))


class Plan(_Handle):
    _free = staticmethod(fn.plan_free)


class Problem(_Handle):
    _free = staticmethod(fn.problem_free)

    def __init__(self, ptr, ctx):
        super().__init__(ptr, ctx)
        self._golden = None  # the ctypes callback, alive while set

    @property
    def name(self):
        return _lib.text(fn.problem_name(self.handle))

    @property
    def hash(self):
        return _lib.text(fn.problem_hash(self.handle))

    def info(self):
        out = ctypes.c_void_p()
        check(fn.problem_json(self.handle, ctypes.byref(out)))
        return json.loads(_lib.take_string(out))

    @property
    def num_cases(self):
        return fn.problem_case_count(self.handle)

    def tensors(self):
        """[(name, dtype, role)] in the problem's order."""
        return [(_lib.text(fn.problem_tensor_name(self.handle, t)),
                 DTYPES[fn.problem_tensor_dtype(self.handle, t)],
                 ROLES[fn.problem_tensor_role(self.handle, t)])
                for t in range(fn.problem_tensor_count(self.handle))]

    def shape(self, tensor, case):
        ext = (ctypes.c_int64 * 8)()
        rank = fn.problem_tensor_shape(self.handle, tensor, case, ext, 8)
        return tuple(ext[i] for i in range(rank))

    def nbytes(self, tensor, case):
        return fn.problem_tensor_bytes(self.handle, tensor, case)

    def generate(self, tensor, case, seed):
        """The bytes the GPU generator writes for this input (identical bits)."""
        n = self.nbytes(tensor, case)
        buf = ctypes.create_string_buffer(max(1, n))
        ctx = self._owner
        check(fn.problem_generate_host(ctx.handle, self.handle, tensor, case, seed, buf, n),
              ctx.handle)
        return buf.raw[:n]

    @staticmethod
    def case_seed(evaluation_seed, case):
        return fn.problem_case_seed(evaluation_seed, case)

    def set_golden(self, callback):
        """callback(request) -> None fills the outputs: request.inputs is
        {name: memoryview} of the library's inputs, request.outputs {name:
        memoryview} to write, request.case and request.dims ({dim: value}).
        An exception becomes the golden callback's error message."""
        problem = self
        names = [t[0] for t in self.tensors()]
        roles = [t[2] for t in self.tensors()]
        dim_names = [d for d in self.info()["dims"]]
        self._golden_error = None

        def trampoline(user, req_ptr):
            req = req_ptr.contents
            try:
                views = {}
                for t in range(req.num_tensors):
                    n = req.bytes[t]
                    buf = (ctypes.c_char * n).from_address(req.host[t]) if n else bytearray()
                    views[names[t]] = memoryview(buf).cast("B")
                request = GoldenRequest(
                    case=req.case_index, seed=req.seed,
                    dims={d: req.dims[i] for i, d in enumerate(dim_names)},
                    inputs={k: v for k, v in views.items() if roles[names.index(k)] != "out"},
                    outputs={k: v for k, v in views.items() if roles[names.index(k)] != "in"},
                    problem=problem)
                callback(request)
                return 0
            except BaseException as e:  # reported through the library, re-raised after
                problem._golden_error = e
                _lib.write_error(req.errbuf, req.errbuf_size, e)
                return 1

        self._golden = _lib.GOLDEN_FN(trampoline)
        check(fn.problem_set_golden(self.handle, self._golden, None))

    def sanity(self):
        """GPU soundness checks; returns (sound, summary text)."""
        out = ctypes.c_void_p()
        rc = fn.problem_sanity(self._owner.handle, self.handle, ctypes.byref(out))
        summary = _lib.take_string(out)
        if rc == -21:  # KR_EUNSOUND
            return False, summary
        check(rc, self._owner.handle)
        return True, summary


class GoldenRequest:
    def __init__(self, **kw):
        self.__dict__.update(kw)


BORROWED = object()  # owner of a report the library lends to a callback


class Report(_Handle):
    """Everything one evaluation produced. Readable as attributes, as a dict
    (to_dict) and as JSON (to_json); settable by hand for testing terms."""
    _free = staticmethod(fn.report_free)

    def __init__(self, ptr=None, owner=None):
        if ptr is None:
            out = ctypes.c_void_p()
            check(fn.report_new(ctypes.byref(out)))
            ptr = out
        super().__init__(ptr, owner)

    @property
    def verdict(self):
        return _lib.text(fn.verdict_name(fn.report_verdict(self.handle)))

    @verdict.setter
    def verdict(self, name):
        v = fn.verdict_from_name(_lib.encode(name))
        if not v:
            raise ValueError(f"unknown verdict {name!r}")
        check(fn.report_set_verdict(self.handle, v))

    @property
    def passed(self):
        return self.verdict == "passed"

    @property
    def flags(self):
        f = fn.report_flags(self.handle)
        return [_lib.text(fn.flag_name(1 << i)) for i in range(64) if f & (1 << i)]

    @flags.setter
    def flags(self, names):
        bits = 0
        for n in names:
            b = fn.flag_from_name(_lib.encode(n))
            if not b:
                raise ValueError(f"unknown flag {n!r}")
            bits |= b
        check(fn.report_set_flags(self.handle, bits))

    def __getitem__(self, key):
        v = ctypes.c_double()
        if fn.report_get(self.handle, _lib.encode(key), ctypes.byref(v)) != 0:
            raise KeyError(key)
        return v.value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key, value):
        check(fn.report_set(self.handle, _lib.encode(key), float(value)))

    def text(self, key):
        t = fn.report_text(self.handle, _lib.encode(key))
        return t.decode("utf-8", "replace") if t else None

    def set_text(self, key, value):
        check(fn.report_set_text(self.handle, _lib.encode(key), _lib.encode(value)))

    @property
    def feedback(self):
        return self.text("feedback")

    @property
    def message(self):
        return self.text("message")

    @property
    def reward(self):
        d = self.to_dict()
        return d["reward"]["total"] if "reward" in d else None

    def to_json(self):
        out = ctypes.c_void_p()
        check(fn.report_json(self.handle, ctypes.byref(out)))
        return _lib.take_string(out)

    def to_dict(self):
        return json.loads(self.to_json())

    def close(self):
        if self._owner is BORROWED:  # the library's: never freed here
            self._ptr = None
            return
        super().close()

    def __repr__(self):
        return f"<kreward.Report {self.verdict} reward={self.reward}>"


def _is_file(s):
    return isinstance(s, str) and not s.lstrip().startswith("{") and os.path.exists(s)
