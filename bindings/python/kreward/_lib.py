"""Finding libkreward and declaring its functions (ctypes).

The library is looked up in this order: $KREWARD_LIBRARY (when set, only
there), libkreward.so.<ABI> in this package's folder, in the wheel's
native folder (site-packages/.kreward.mesonpy.libs, where `pip install .`
of the repository puts it with kreward-worker and the CLI), then the
system loader path.
Its ABI version is checked at once, before any other symbol is bound, so a
mismatch is a clear error at import rather than a crash later.

Every function is declared in one table, (name, argtypes, restype,
errcheck). Functions that return a kr_status get an errcheck that turns a
negative status into KrewardError(code, message, detail), with the text of
the context the call ran on; call sites never look at statuses themselves.
The few statuses that are results rather than errors are declared where the
function is (see `outcome=` in the table)."""
import contextlib
import ctypes
import os

from .errors import KrewardError

ABI_VERSION = 1  # the ABI this binding was written for (KR_ABI_VERSION, include/kreward/common.h)
SONAME = f"libkreward.so.{ABI_VERSION}"

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_double = ctypes.c_double
c_uint32 = ctypes.c_uint32
c_int32 = ctypes.c_int32
c_uint64 = ctypes.c_uint64
c_int64 = ctypes.c_int64
PP = ctypes.POINTER


class LibraryNotFound(ImportError):
    pass


PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# meson-python's folder for the wheel's native files (pyproject.toml, meson.build)
WHEEL_NATIVE_DIR = os.path.join(os.path.dirname(PACKAGE_DIR), ".kreward.mesonpy.libs")


def _candidates():
    env = os.environ.get("KREWARD_LIBRARY")
    if env:  # an explicit choice: never silently replaced by another copy
        return [env]
    bundled = [os.path.join(d, SONAME) for d in (PACKAGE_DIR, WHEEL_NATIVE_DIR)]
    return [p for p in bundled if os.path.exists(p)] + [SONAME]


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise LibraryNotFound(f"cannot load libkreward ({SONAME}); set KREWARD_LIBRARY to the "
                          "library's path (tried: " + "; ".join(errors) + ")")


lib, path = _load()


def _check_abi():
    try:
        f = lib.kr_abi_version
    except AttributeError:
        raise ImportError(f"{path} is not libkreward (no kr_abi_version)") from None
    f.argtypes, f.restype = [], c_uint32
    if f() != ABI_VERSION:
        raise ImportError(f"{path} has ABI version {f()}; this binding needs {ABI_VERSION} "
                          f"({SONAME}): install matching versions")


_check_abi()

# ---- structures (must match include/kreward/*.h; sizes pinned in tests/abi/test_struct_sizes.c) ----
# The version of each struct this binding fills in; the library accepts any
# version up to its own and reads only that version's prefix.
CONTEXT_OPTIONS_VERSION = 1
COMPILE_OPTIONS_VERSION = 2
VERIFY_OPTIONS_VERSION = 1
BENCH_OPTIONS_VERSION = 2
BASELINE_VERSION = 1
EVALUATE_OPTIONS_VERSION = 1
TERM_VERSION = 1
GOLDEN_REQUEST_VERSION = 1  # the layout read from the library (it may append fields)
POOL_OPTIONS_VERSION = 1
JOB_VERSION = 1


class ContextOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("device", c_int32), ("cuda_home", c_char_p),
                ("default_arch", c_char_p), ("cache_memory_bytes", c_uint64),
                ("cache_dir", c_char_p), ("flags", c_uint32)]


class CompileOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("name", c_char_p), ("arch", c_char_p), ("std", c_char_p),
                ("defines", PP(c_char_p)), ("num_defines", c_size_t),
                ("include_dirs", PP(c_char_p)), ("num_include_dirs", c_size_t),
                ("name_expressions", PP(c_char_p)), ("num_name_expressions", c_size_t),
                ("extra_options", PP(c_char_p)), ("num_extra_options", c_size_t),
                ("fast_math", c_int32), ("line_info", c_int32), ("max_source_bytes", c_uint64),
                ("time_limit_s", c_double), ("flags", c_uint32),
                ("max_log_bytes", c_uint64)]  # version 2


class VerifyOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("seeds_per_case", c_uint32), ("seed", c_uint64),
                ("timeout_s", c_double), ("flags", c_uint32), ("max_mismatches", c_uint32)]


class BenchOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("preset", c_uint32), ("min_samples", c_uint32),
                ("max_samples", c_uint32), ("min_time_s", c_double), ("max_time_s", c_double),
                ("target_noise", c_double), ("buffer_sets", c_uint32), ("flags", c_uint32),
                ("check_fraction", c_double), ("seed", c_uint64), ("case_index", c_int64),
                ("max_slowdown", c_double), ("max_call_s", c_double)]  # version 2


# C callback types, made once
BASELINE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, PP(c_uint64), c_size_t, c_void_p,
                               c_size_t)


class Baseline(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("kind", c_uint32), ("program", c_void_p),
                ("plan", c_void_p), ("fn", BASELINE_FN), ("user", c_void_p), ("name", c_char_p)]


class EvaluateOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("flags", c_uint32), ("compile", PP(CompileOptions)),
                ("verify", PP(VerifyOptions)), ("bench", PP(BenchOptions)),
                ("baseline", PP(Baseline)), ("reward", c_void_p), ("name", c_char_p)]


class GoldenRequest(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("case_index", c_uint32), ("seed", c_uint64),
                ("num_tensors", c_size_t), ("host", PP(c_void_p)), ("bytes", PP(c_uint64)),
                ("dims", PP(c_int64)), ("errbuf", c_void_p), ("errbuf_size", c_size_t)]


GOLDEN_FN = ctypes.CFUNCTYPE(c_int, c_void_p, PP(GoldenRequest))
USER_DESTROY = ctypes.CFUNCTYPE(None, c_void_p)  # destroy(user) for callback user data
TERM_INIT = ctypes.CFUNCTYPE(c_int, c_char_p, PP(c_void_p), c_void_p, c_size_t)
TERM_EVAL = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, PP(c_double), c_void_p, c_size_t)
TERM_DESTROY = ctypes.CFUNCTYPE(None, c_void_p)


class TermDef(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("flags", c_uint32), ("name", c_char_p),
                ("description", c_char_p), ("init", TERM_INIT), ("evaluate", TERM_EVAL),
                ("destroy", TERM_DESTROY)]


class PoolOptions(ctypes.Structure):  # kr_pool_options, include/kreward/pool.h
    _fields_ = [("version", c_uint32), ("flags", c_uint32), ("gpus", c_char_p),
                ("compile_workers", c_uint32), ("job_timeout_s", c_double),
                ("compile_timeout_s", c_double), ("compile_memory_bytes", c_uint64),
                ("max_attempts", c_uint32), ("worker_path", c_char_p), ("cache_dir", c_char_p),
                ("cuda_home", c_char_p)]


class Job(ctypes.Structure):  # kr_job, include/kreward/pool.h
    _fields_ = [("version", c_uint32), ("flags", c_uint32), ("problem", c_void_p),
                ("source", c_char_p), ("len", c_size_t), ("binary", c_void_p),
                ("binary_len", c_size_t), ("plan", c_void_p), ("name", c_char_p),
                ("compile", PP(CompileOptions)), ("verify", PP(VerifyOptions)),
                ("bench", PP(BenchOptions)), ("reward", c_void_p)]


# ---- handles as arguments ----

class Ptr(c_void_p):
    """A handle's pointer as passed to C. .obj is the Python object it came
    from: the errcheck reads the context's error text and the report of an
    engine verb through it."""
    obj = None


def _error_context(arg):
    """The context pointer whose error slot a failed call wrote, from an
    argument that is a context or a handle owned by one (a reward)."""
    obj = getattr(arg, "obj", None)
    if obj is not None:
        return obj._error_context()
    if isinstance(arg, c_void_p):  # a bare pointer where the table says "context"
        return arg.value
    return arg if isinstance(arg, int) else None


def status(ctx=None, owner=None, report=None, outcome=None, why=None):
    """The errcheck for a function returning a kr_status.

    ctx: index of the kr_context argument; owner: index of a handle whose
    context holds the error text (a reward: its errors are its context's).
    why: index of a `char **why` the function fills with its reason when it
    fails (kr_pool_new; pass it as ctypes.pointer(c_void_p()): the text is
    read and freed here). Without any the message is kr_strerror's. report: index of the
    report an engine verb wrote; the KrewardError carries it (.report), since
    it says what happened. outcome(rc, args): True for a negative status that
    is a result of the call, not an error; it is returned as is."""
    where = ctx if ctx is not None else owner

    def errcheck(rc, func, args):
        if rc >= 0 or (outcome is not None and outcome(rc, args)):
            return rc
        message = detail = ""
        cp = _error_context(args[where]) if where is not None else None
        if cp:
            message, detail = text(fn.context_errmsg(cp)), text(fn.context_errdetail(cp))
        if why is not None and isinstance(args[why], PP(c_void_p)) and args[why]:
            message = take_string(args[why].contents) or message
            args[why].contents.value = None
        err = KrewardError(rc, message, detail)
        if report is not None:
            err.report = getattr(args[report], "obj", None)
        raise err
    return errcheck


_codes = {}


def _code(name):
    """A status's code by its name without KR_ ("ENOTFOUND"), asked of the
    library (codes are pinned: kr_status_name over 0 and the negatives)."""
    if name not in _codes:
        for code in range(0, -1000, -1):
            found = text(fn.status_name(code))
            if found == "KR_UNKNOWN":
                break
            _codes[found[3:]] = code
    return _codes[name]


def _verdict(name):
    """A verdict's number by its name ("NOT_RUN"), asked of the library."""
    return fn.verdict_from_name(name.lower().encode())


def _not_found(rc, args):
    # kr_report_get: KR_ENOTFOUND is "this metric was never set" (a KeyError in Python)
    return rc == _code("ENOTFOUND")


def _unsound(rc, args):
    # kr_problem_sanity: KR_EUNSOUND is its answer "the problem is unsound", with a summary
    return rc == _code("EUNSOUND")


def _pending(rc, args):
    """kr_pool_wait, kr_pool_next: KR_ETIMEOUT (not done yet) and KR_ENOTFOUND
    (an unknown or collected ticket; nothing pending) are answers."""
    return rc in (_code("ETIMEOUT"), _code("ENOTFOUND"))


def _judged(rc, args):
    """Engine verbs (report first): KR_ENODEVICE with verdict not_run is an
    outcome, not an error: compiled and checked, nothing could run here.
    (A candidate's fault or hang is a verdict with KR_OK.)"""
    return rc == _code("ENODEVICE") and fn.report_verdict(args[0]) == _verdict("NOT_RUN")


def _exchanged(rc, args):
    """kr_exchange_timed: every status but KR_EINVAL says how the exchange
    ended (its counts say how far it got): the caller's to read."""
    return rc != _code("EINVAL")


# ---- functions: (name, argtypes, restype, errcheck) ----
_H = c_void_p  # every handle is opaque
_S = status()  # a status, no context to read the message from
_FUNCTIONS = [
    # common.h
    ("kr_strerror", [c_int], c_char_p, None),
    ("kr_status_name", [c_int], c_char_p, None),
    ("kr_version", [], c_char_p, None),
    ("kr_version_number", [], c_uint32, None),
    ("kr_abi_version", [], c_uint32, None),
    ("kr_free", [c_void_p], None, None),
    ("kr_dtype_name", [c_int], c_char_p, None),
    ("kr_dtype_size", [c_int], c_size_t, None),
    # context.h
    ("kr_context_options_init", [PP(ContextOptions), c_uint32], c_int, _S),
    ("kr_context_new", [PP(_H), PP(ContextOptions)], c_int, _S),
    ("kr_context_free", [_H], None, None),
    ("kr_context_errmsg", [_H], c_char_p, None),
    ("kr_context_errdetail", [_H], c_char_p, None),
    ("kr_context_has_device", [_H], c_int, None),  # 0 or 1, not a status
    ("kr_context_arch", [_H], c_char_p, None),
    ("kr_context_info_json", [PP(c_void_p), _H], c_int, status(ctx=1)),
    # program.h
    ("kr_compile_options_init", [PP(CompileOptions), c_uint32], c_int, _S),
    ("kr_compile", [PP(_H), _H, c_char_p, c_size_t, PP(CompileOptions)], c_int, status(ctx=1)),
    ("kr_program_from_binary", [PP(_H), _H, c_void_p, c_size_t, c_char_p], c_int, status(ctx=1)),
    ("kr_program_free", [_H], None, None),
    ("kr_program_binary", [PP(c_void_p), PP(c_size_t), PP(c_int), _H], c_int, _S),
    ("kr_program_log", [_H], c_char_p, None),
    ("kr_program_arch", [_H], c_char_p, None),
    ("kr_program_compile_seconds", [_H], c_double, None),
    ("kr_program_cache_result", [_H], c_int, None),  # enum kr_cache_result, not a status
    ("kr_program_hash", [_H], c_char_p, None),
    ("kr_program_kernel_count", [_H], c_size_t, None),
    ("kr_program_kernel_name", [_H, c_size_t], c_char_p, None),
    ("kr_program_find_kernel", [_H, c_char_p], c_size_t, None),
    ("kr_program_lowered_name", [_H, c_char_p], c_char_p, None),
    ("kr_program_kernel_attr", [_H, c_size_t, c_int], c_int64, None),
    ("kr_program_kernel_param", [PP(c_uint32), PP(c_uint32), _H, c_size_t, c_size_t], c_int, _S),
    ("kr_program_json", [PP(c_void_p), _H], c_int, _S),
    # problem.h
    ("kr_problem_load", [PP(_H), _H, c_char_p], c_int, status(ctx=1)),
    ("kr_problem_parse", [PP(_H), _H, c_char_p, c_size_t, c_char_p, c_char_p], c_int,
     status(ctx=1)),
    ("kr_problem_free", [_H], None, None),
    ("kr_problem_name", [_H], c_char_p, None),
    ("kr_problem_hash", [_H], c_char_p, None),
    ("kr_problem_dim_count", [_H], c_size_t, None),
    ("kr_problem_dim_name", [_H, c_size_t], c_char_p, None),
    ("kr_problem_case_count", [_H], c_size_t, None),
    ("kr_problem_case_name", [_H, c_size_t], c_char_p, None),
    ("kr_problem_case_dim", [_H, c_size_t, c_size_t], c_int64, None),
    ("kr_problem_timing_case", [_H], c_size_t, None),
    ("kr_problem_tensor_count", [_H], c_size_t, None),
    ("kr_problem_tensor_name", [_H, c_size_t], c_char_p, None),
    ("kr_problem_tensor_dtype", [_H, c_size_t], c_int, None),  # enum kr_dtype
    ("kr_problem_tensor_role", [_H, c_size_t], c_int, None),   # enum kr_role
    ("kr_problem_tensor_shape", [PP(c_int64), c_size_t, _H, c_size_t, c_size_t], c_size_t, None),
    ("kr_problem_tensor_bytes", [_H, c_size_t, c_size_t], c_uint64, None),
    ("kr_problem_tensor_tolerance", [PP(c_double), PP(c_double), _H, c_size_t], c_int, _S),
    ("kr_problem_find_tensor", [_H, c_char_p], c_size_t, None),
    ("kr_problem_reference_kind", [_H], c_int, None),  # enum kr_reference_kind
    ("kr_problem_json", [PP(c_void_p), _H], c_int, _S),
    ("kr_problem_check_reference", [_H, _H], c_int, status(ctx=0)),
    ("kr_problem_sanity", [PP(c_void_p), _H, _H], c_int, status(ctx=1, outcome=_unsound)),
    ("kr_problem_generate_host", [c_void_p, c_size_t, _H, _H, c_size_t, c_size_t, c_uint64], c_int,
     status(ctx=2)),
    ("kr_problem_case_seed", [c_uint64, c_size_t], c_uint64, None),
    ("kr_problem_set_golden", [_H, GOLDEN_FN, c_void_p, USER_DESTROY], c_int, _S),
    # plan.h
    ("kr_plan_from_source", [PP(_H), _H, c_char_p, c_size_t, c_char_p], c_int, status(ctx=1)),
    ("kr_plan_parse_json", [PP(_H), _H, c_char_p, c_size_t, c_char_p], c_int, status(ctx=1)),
    ("kr_plan_free", [_H], None, None),
    ("kr_plan_launch_count", [_H], c_size_t, None),
    ("kr_plan_launch_kernel", [_H, c_size_t], c_char_p, None),
    ("kr_plan_check", [_H, _H, _H, _H], c_int, status(ctx=0)),
    ("kr_plan_json", [PP(c_void_p), _H], c_int, _S),
    # report.h
    ("kr_report_new", [PP(_H)], c_int, _S),
    ("kr_report_free", [_H], None, None),
    ("kr_report_verdict", [_H], c_int, None),  # enum kr_verdict
    ("kr_report_set_verdict", [_H, c_int], c_int, _S),
    ("kr_verdict_name", [c_int], c_char_p, None),
    ("kr_verdict_from_name", [c_char_p], c_int, None),  # 0 when unknown, not a status
    ("kr_report_flags", [_H], c_uint64, None),
    ("kr_report_set_flags", [_H, c_uint64], c_int, _S),
    ("kr_flag_name", [c_uint64], c_char_p, None),
    ("kr_flag_from_name", [c_char_p], c_uint64, None),
    ("kr_report_get", [PP(c_double), _H, c_char_p], c_int, status(outcome=_not_found)),
    ("kr_report_set", [_H, c_char_p, c_double], c_int, _S),
    ("kr_report_metric_count", [_H], c_size_t, None),
    ("kr_report_metric_name", [_H, c_size_t], c_char_p, None),
    ("kr_report_text", [_H, c_char_p], c_char_p, None),
    ("kr_report_set_text", [_H, c_char_p, c_char_p], c_int, _S),
    ("kr_report_reward", [_H], c_double, None),
    ("kr_report_term_count", [_H], c_size_t, None),
    ("kr_report_term_name", [_H, c_size_t], c_char_p, None),
    ("kr_report_term_value", [_H, c_size_t], c_double, None),
    ("kr_report_term_weight", [_H, c_size_t], c_double, None),
    ("kr_report_term_counted", [_H, c_size_t], c_int, None),  # 0 or 1
    ("kr_report_json", [PP(c_void_p), _H], c_int, _S),
    # verify.h, bench.h, evaluate.h: the engine verbs write into the report (argument 0)
    ("kr_verify_options_init", [PP(VerifyOptions), c_uint32], c_int, _S),
    ("kr_verify", [_H, _H, _H, _H, _H, PP(VerifyOptions)], c_int,
     status(ctx=1, report=0, outcome=_judged)),
    ("kr_bench_options_init", [PP(BenchOptions), c_uint32, c_int], c_int, _S),
    ("kr_baseline_init", [PP(Baseline), c_uint32], c_int, _S),
    ("kr_benchmark", [_H, _H, _H, _H, _H, PP(BenchOptions), PP(Baseline)], c_int,
     status(ctx=1, report=0, outcome=_judged)),
    ("kr_evaluate_options_init", [PP(EvaluateOptions), c_uint32], c_int, _S),
    ("kr_evaluate", [_H, _H, _H, c_char_p, c_size_t, PP(EvaluateOptions)], c_int,
     status(ctx=1, report=0, outcome=_judged)),
    ("kr_evaluate_program", [_H, _H, _H, _H, _H, PP(EvaluateOptions)], c_int,
     status(ctx=1, report=0, outcome=_judged)),
    # reward.h: a reward's errors are its context's
    ("kr_reward_new", [PP(_H), _H], c_int, status(ctx=1)),
    ("kr_reward_free", [_H], None, None),
    ("kr_reward_register", [_H, PP(TermDef), c_size_t], c_int, status(owner=0)),
    ("kr_reward_load_plugin", [_H, c_char_p], c_int, status(owner=0)),
    ("kr_reward_add", [_H, c_char_p, c_char_p, c_double, c_int], c_int, status(owner=0)),
    ("kr_reward_set_fallback", [_H, c_double], c_int, status(owner=0)),
    ("kr_reward_from_json", [PP(_H), _H, c_char_p, c_size_t], c_int, status(ctx=1)),
    ("kr_reward_preset", [PP(_H), _H, c_char_p], c_int, status(ctx=1)),
    ("kr_reward_presets", [], PP(c_char_p), None),
    ("kr_reward_score", [PP(c_double), _H, _H], c_int, status(owner=1)),
    ("kr_reward_json", [PP(c_void_p), _H], c_int, _S),
    # pool.h: no context; kr_pool_new says why it failed in its own out string
    ("kr_pool_options_init", [PP(PoolOptions), c_uint32], c_int, _S),
    ("kr_pool_new", [PP(_H), PP(PoolOptions), PP(c_void_p)], c_int, status(why=2)),
    ("kr_pool_free", [_H], None, None),
    ("kr_job_init", [PP(Job), c_uint32], c_int, _S),
    ("kr_pool_submit", [PP(c_uint64), _H, PP(Job)], c_int, _S),
    ("kr_pool_wait", [PP(c_void_p), _H, c_uint64, c_double], c_int, status(outcome=_pending)),
    ("kr_pool_next", [PP(c_void_p), PP(c_uint64), _H, c_double], c_int,
     status(outcome=_pending)),
    ("kr_pool_status_json", [PP(c_void_p), _H], c_int, _S),
    ("kr_pool_sandbox_json", [PP(c_void_p)], c_int, _S),
    # sys/sandbox.h: no context; the reason travels in its own out string
    ("kr_sandbox_enter", [c_char_p, PP(c_void_p), PP(c_void_p)], c_int, status(why=2)),
    ("kr_sandbox_isolate", [PP(c_void_p), PP(c_void_p)], c_int, status(why=1)),
    ("kr_keystream_xor", [c_void_p, c_size_t, c_void_p, c_uint64, c_int], c_int, _S),
    # sys/exchange.h: a timeout, an ended reply, a signal... are answers the
    # caller reads (the worker's, said by its handle); only KR_EINVAL raises
    ("kr_exchange_timed", [PP(c_uint64), PP(c_size_t), c_void_p, c_size_t, c_int, c_void_p, c_size_t,
                           c_int, c_int, c_int], c_int, status(outcome=_exchanged)),
    ("kr_evaluate_batch", [PP(c_void_p), _H, PP(Job), c_size_t], c_int, _S),
]


class _Functions:
    """The library's functions without their kr_ prefix: fn.compile(...)."""


fn = _Functions()
for _name, _args, _res, _check in _FUNCTIONS:
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise ImportError(f"{path} has no {_name}: the library is older or newer than this "
                          f"binding (written for libkreward ABI {ABI_VERSION})") from None
    _f.argtypes, _f.restype = _args, _res
    if _check is not None:
        _f.errcheck = _check
    setattr(fn, _name[3:], _f)

KrewardError.describe = staticmethod(
    lambda code: (text(fn.status_name(code)), text(fn.strerror(code))))


# ---- strings ----

def text(b):
    return b.decode("utf-8", "replace") if b else ""


def take_string(ptr):
    """A malloc'd char* from the library (a c_void_p), as str; frees it."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        fn.free(ptr)


def encode(s):
    return s.encode("utf-8") if isinstance(s, str) else s


# ---- Python callbacks called from C ----

class ErrorSlot:
    """Where a callback's exception waits until the C call that ran it
    returns (it must not unwind through C)."""
    __slots__ = ("error",)

    def __init__(self):
        self.error = None


def c_callback(cftype, func, slot, errbuf):
    """The C callback of type cftype that runs func(*args) and returns 0.
    When func raises, the exception is kept in slot (the first one), its
    text goes to the C error buffer errbuf(*args) names (the library then
    reports a plugin error), and 1 is returned; `reraise_callbacks` raises it
    once the C call is over. Keep the result alive while C may call it."""
    def call(*args):
        try:
            func(*args)
            return 0
        except BaseException as e:  # noqa: B036 -- re-raised after the C call
            if slot.error is None:
                slot.error = e
            buf, size = errbuf(*args)
            write_error(buf, size, e)
            return 1
    return cftype(call)


def write_error(errbuf, size, exc):
    """Puts an exception's text into a C error buffer."""
    if not errbuf or not size:
        return
    msg = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[: size - 1]
    ctypes.memmove(errbuf, msg + b"\0", len(msg) + 1)


@contextlib.contextmanager
def reraise_callbacks(*slots):
    """Around a C call that may run Python callbacks: an exception a callback
    raised is raised here when the call returns, chained to the
    KrewardError the library returned for it, if any."""
    slots = [s for s in slots if s is not None]
    for s in slots:
        s.error = None
    try:
        yield
    except KrewardError as e:
        _raise_kept(slots, e)
        raise
    _raise_kept(slots, None)


def _raise_kept(slots, cause):
    for s in slots:
        if s.error is not None:
            err, s.error = s.error, None
            raise err from cause
