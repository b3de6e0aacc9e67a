"""Rewards: presets, JSON configurations, built-in terms, and terms written
as Python callables."""
import ctypes
import json

from . import _lib
from ._lib import fn
from .core import BORROWED, Report, _Handle, _is_file
from .errors import KrewardError, check

GATES = {"default": 0, "always": 1, "compiled": 2, "correct": 3}


def presets():
    arr = fn.reward_presets()
    out, i = [], 0
    while arr[i]:
        out.append(_lib.text(arr[i]))
        i += 1
    return out


class Reward(_Handle):
    """A weighted sum of terms. Build it from a preset name, a JSON
    configuration (text, dict or file path), or empty and add terms."""
    _free = staticmethod(fn.reward_free)

    def __init__(self, ctx, config=None):
        out = ctypes.c_void_p()
        if config is None:
            rc = fn.reward_new(ctx.handle, ctypes.byref(out))
        elif isinstance(config, str) and config in presets():
            rc = fn.reward_preset(ctx.handle, ctypes.byref(out), _lib.encode(config))
        else:
            if isinstance(config, dict):
                config = json.dumps(config)
            elif _is_file(config):
                config = open(config).read()
            rc = fn.reward_from_json(ctx.handle, ctypes.byref(out), _lib.encode(config), 0)
        check(rc, ctx.handle)
        super().__init__(out, ctx)
        self._ctx = ctx
        self._callbacks = []    # ctypes callbacks: alive as long as the reward
        self._py_error = None

    def add(self, term, config=None, weight=1.0, gate="default"):
        """Adds a known term (built-in, registered or from a plugin)."""
        cfg = json.dumps(config) if isinstance(config, dict) else config
        check(fn.reward_add(self.handle, _lib.encode(term), _lib.encode(cfg) if cfg else None,
                            float(weight), GATES[gate]), self._ctx.handle)
        return self

    def add_python(self, name, func, weight=1.0, gate="default", needs_correct=False):
        """Adds a term computed by func(report) -> float. An exception inside
        it fails the scoring and is re-raised from score()."""
        reward = self

        def evaluate(state, report_ptr, value_ptr, errbuf, errsize):
            try:
                v = float(func(Report(ctypes.c_void_p(report_ptr), owner=BORROWED)))
                value_ptr[0] = v
                return 0
            except BaseException as e:
                reward._py_error = e
                _lib.write_error(errbuf, errsize, e)
                return 1

        cb = _lib.TERM_EVAL(evaluate)
        d = _lib.TermDef(1, 1 if needs_correct else 0, _lib.encode(name), b"python term",
                         _lib.TERM_INIT(), cb, _lib.TERM_DESTROY())
        self._callbacks += [cb, d]
        check(fn.reward_register(self.handle, ctypes.byref(d), ctypes.sizeof(d)), self._ctx.handle)
        return self.add(name, None, weight, gate)

    def load_plugin(self, path):
        check(fn.reward_load_plugin(self.handle, _lib.encode(path)), self._ctx.handle)
        return self

    def set_fallback(self, value):
        check(fn.reward_set_fallback(self.handle, float(value)))
        return self

    def score(self, report):
        """Scores a report in place and returns the reward."""
        self._py_error = None
        v = ctypes.c_double()
        rc = fn.reward_score(self.handle, report.handle, ctypes.byref(v))
        if rc != 0:
            if self._py_error is not None:
                err, self._py_error = self._py_error, None
                raise err
            check(rc, self._ctx.handle)
        return v.value

    def config(self):
        out = ctypes.c_void_p()
        check(fn.reward_json(self.handle, ctypes.byref(out)))
        return json.loads(_lib.take_string(out))


KrewardError  # re-exported through the package
