"""Rewards: presets, JSON configurations, built-in terms, and terms written
as Python callables."""
import ctypes
import json
import os
import re
import threading

from . import _lib, constants
from ._lib import fn
from .core import Report, _Handle, _is_file, _json_of
from .errors import KrewardError

GATES = constants.GATES


def presets():
    """The library's reward presets, e.g. "makora"."""
    return list(constants.PRESETS)


def _is_preset_name(config):
    """A preset's name, or a word that can only have meant one (not JSON,
    no file of that name, no path separator or extension)."""
    if not isinstance(config, str):
        return False
    return config in constants.PRESETS or (re.fullmatch(r"[A-Za-z0-9_-]+", config) is not None
                                           and not os.path.exists(config))


class Reward(_Handle):
    """A weighted sum of terms. Build it from a preset name, a JSON
    configuration (text, dict or file path), or empty and add terms. It
    belongs to its context (counts on it, like a Program). An unknown preset
    raises KrewardError (KR_ENOTFOUND) listing the presets; a path that does
    not exist, FileNotFoundError."""
    _free = staticmethod(fn.reward_free)

    def __init__(self, ctx, config=None):
        out = ctypes.c_void_p()
        config = os.fspath(config) if isinstance(config, os.PathLike) else config
        if config is None:
            fn.reward_new(ctypes.byref(out), ctx.handle)
        elif _is_preset_name(config):
            # a preset, or a name that is neither a preset nor a file: the
            # library's error lists the presets (it was a JSON syntax error)
            fn.reward_preset(ctypes.byref(out), ctx.handle, _lib.encode(config))
        else:
            if isinstance(config, dict):
                config = json.dumps(config)
            elif _is_file(config, "reward configuration file"):
                with open(config) as f:
                    config = f.read()
            fn.reward_from_json(ctypes.byref(out), ctx.handle, _lib.encode(config), 0)
        super().__init__(out, ctx._ref)
        # Python terms: the C callbacks and tables (the library keeps pointers
        # into them) live as long as this object, which outlives the C reward's
        # last use of them. They refer to _errors, never to the reward.
        self._callbacks = []
        self._errors = _lib.ErrorSlot()
        # kr_reward is single-threaded (terms keep state, errors go to one
        # context): score() runs one call at a time, whichever thread calls
        # it (a Pool scores in the thread that collects a report)
        self._lock = threading.RLock()

    def add(self, term, config=None, weight=1.0, gate="default"):
        """Adds a known term (built-in, registered or from a plugin)."""
        cfg = json.dumps(config) if isinstance(config, dict) else config
        fn.reward_add(self.handle, _lib.encode(term), _lib.encode(cfg) if cfg else None,
                      float(weight), GATES[gate])
        return self

    def add_python(self, name, func, weight=1.0, gate="default", needs_correct=False):
        """Adds a term computed by func(report) -> float. An exception inside
        it fails the scoring and is re-raised from score() (or evaluate).
        The report is only valid during the call."""
        def evaluate(state, report_ptr, value_ptr, errbuf, errsize):
            report = Report._borrow(report_ptr)
            try:
                value_ptr[0] = float(func(report))
            finally:
                report.close()  # the library's report: unusable once the call returns

        cb = _lib.c_callback(_lib.TERM_EVAL, evaluate, self._errors,
                             lambda state, report, value, errbuf, errsize: (errbuf, errsize))
        d = _lib.TermDef(_lib.TERM_VERSION, constants.TERM_NEEDS_CORRECT if needs_correct else 0,
                         _lib.encode(name), b"python term", _lib.TERM_INIT(), cb,
                         _lib.TERM_DESTROY())
        self._callbacks += [cb, d]
        fn.reward_register(self.handle, ctypes.byref(d), ctypes.sizeof(d))
        return self.add(name, None, weight, gate)

    def load_plugin(self, path):
        fn.reward_load_plugin(self.handle, _lib.encode(path))
        return self

    def set_fallback(self, value):
        fn.reward_set_fallback(self.handle, float(value))
        return self

    def score(self, report):
        """Scores a report in place and returns the reward."""
        v = ctypes.c_double()
        with self._lock, _lib.reraise_callbacks(self._errors):
            fn.reward_score(ctypes.byref(v), self.handle, report.handle)
        return v.value

    def config(self):
        return _json_of(fn.reward_json, self.handle)


KrewardError  # re-exported through the package
