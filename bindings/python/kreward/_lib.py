"""Finding libkreward and declaring its functions (ctypes).

The library is looked up in this order: $KREWARD_LIBRARY, next to this
package, the system loader path. Its ABI version is checked at once, so a
mismatch is a clear error at import rather than a crash later."""
import ctypes
import ctypes.util
import os

ABI_VERSION = 0  # the ABI this binding was written for (KR_ABI_VERSION)

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


def _candidates():
    env = os.environ.get("KREWARD_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libkreward.so.0", "libkreward.so"):
        path = os.path.join(here, name)
        if os.path.exists(path):
            yield path
    found = ctypes.util.find_library("kreward")
    if found:
        yield found
    yield "libkreward.so.0"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise LibraryNotFound("cannot load libkreward; set KREWARD_LIBRARY to the library's path "
                          "(tried: " + "; ".join(errors) + ")")


lib, path = _load()

# ---- structures (must match include/kreward/*.h) ----


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
                ("time_limit_s", c_double), ("flags", c_uint32)]


class VerifyOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("seeds_per_case", c_uint32), ("seed", c_uint64),
                ("timeout_s", c_double), ("flags", c_uint32), ("max_mismatches", c_uint32)]


class BenchOptions(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("preset", c_uint32), ("min_samples", c_uint32),
                ("max_samples", c_uint32), ("min_time_s", c_double), ("max_time_s", c_double),
                ("target_noise", c_double), ("buffer_sets", c_uint32), ("flags", c_uint32),
                ("check_fraction", c_double), ("seed", c_uint64), ("case_index", c_int64)]


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
TERM_INIT = ctypes.CFUNCTYPE(c_int, c_char_p, PP(c_void_p), c_void_p, c_size_t)
TERM_EVAL = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, PP(c_double), c_void_p, c_size_t)
TERM_DESTROY = ctypes.CFUNCTYPE(None, c_void_p)


class TermDef(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("flags", c_uint32), ("name", c_char_p),
                ("description", c_char_p), ("init", TERM_INIT), ("evaluate", TERM_EVAL),
                ("destroy", TERM_DESTROY)]


# ---- functions: (name, argtypes, restype) ----
_H = c_void_p  # every handle is opaque
_FUNCTIONS = [
    ("kr_strerror", [c_int], c_char_p),
    ("kr_status_name", [c_int], c_char_p),
    ("kr_version", [], c_char_p),
    ("kr_abi_version", [], c_uint32),
    ("kr_free", [c_void_p], None),
    ("kr_context_options_init", [PP(ContextOptions), c_uint32], c_int),
    ("kr_context_new", [PP(_H), PP(ContextOptions)], c_int),
    ("kr_context_free", [_H], None),
    ("kr_context_errmsg", [_H], c_char_p),
    ("kr_context_errdetail", [_H], c_char_p),
    ("kr_context_has_device", [_H], c_int),
    ("kr_context_arch", [_H], c_char_p),
    ("kr_context_info_json", [_H, PP(c_void_p)], c_int),
    ("kr_compile_options_init", [PP(CompileOptions), c_uint32], c_int),
    ("kr_compile", [_H, PP(_H), c_char_p, c_size_t, PP(CompileOptions)], c_int),
    ("kr_program_from_binary", [_H, PP(_H), c_void_p, c_size_t, c_char_p], c_int),
    ("kr_program_free", [_H], None),
    ("kr_program_log", [_H], c_char_p),
    ("kr_program_hash", [_H], c_char_p),
    ("kr_program_kernel_count", [_H], c_size_t),
    ("kr_program_kernel_name", [_H, c_size_t], c_char_p),
    ("kr_program_json", [_H, PP(c_void_p)], c_int),
    ("kr_problem_load", [_H, PP(_H), c_char_p], c_int),
    ("kr_problem_parse", [_H, PP(_H), c_char_p, c_size_t, c_char_p, c_char_p], c_int),
    ("kr_problem_free", [_H], None),
    ("kr_problem_name", [_H], c_char_p),
    ("kr_problem_hash", [_H], c_char_p),
    ("kr_problem_json", [_H, PP(c_void_p)], c_int),
    ("kr_problem_case_count", [_H], c_size_t),
    ("kr_problem_tensor_count", [_H], c_size_t),
    ("kr_problem_tensor_name", [_H, c_size_t], c_char_p),
    ("kr_problem_tensor_dtype", [_H, c_size_t], c_int),
    ("kr_problem_tensor_role", [_H, c_size_t], c_int),
    ("kr_problem_tensor_shape", [_H, c_size_t, c_size_t, PP(c_int64), c_size_t], c_size_t),
    ("kr_problem_tensor_bytes", [_H, c_size_t, c_size_t], c_uint64),
    ("kr_problem_generate_host", [_H, _H, c_size_t, c_size_t, c_uint64, c_void_p, c_size_t], c_int),
    ("kr_problem_case_seed", [c_uint64, c_size_t], c_uint64),
    ("kr_problem_set_golden", [_H, GOLDEN_FN, c_void_p], c_int),
    ("kr_problem_sanity", [_H, _H, PP(c_void_p)], c_int),
    ("kr_plan_from_source", [_H, PP(_H), c_char_p, c_size_t, c_char_p], c_int),
    ("kr_plan_parse_json", [_H, PP(_H), c_char_p, c_size_t, c_char_p], c_int),
    ("kr_plan_free", [_H], None),
    ("kr_plan_check", [_H, _H, _H, _H], c_int),
    ("kr_report_new", [PP(_H)], c_int),
    ("kr_report_free", [_H], None),
    ("kr_report_verdict", [_H], c_int),
    ("kr_report_set_verdict", [_H, c_int], c_int),
    ("kr_verdict_name", [c_int], c_char_p),
    ("kr_verdict_from_name", [c_char_p], c_int),
    ("kr_report_flags", [_H], c_uint64),
    ("kr_report_set_flags", [_H, c_uint64], c_int),
    ("kr_flag_name", [c_uint64], c_char_p),
    ("kr_flag_from_name", [c_char_p], c_uint64),
    ("kr_report_get", [_H, c_char_p, PP(c_double)], c_int),
    ("kr_report_set", [_H, c_char_p, c_double], c_int),
    ("kr_report_text", [_H, c_char_p], c_char_p),
    ("kr_report_set_text", [_H, c_char_p, c_char_p], c_int),
    ("kr_report_reward", [_H], c_double),
    ("kr_report_json", [_H, PP(c_void_p)], c_int),
    ("kr_verify_options_init", [PP(VerifyOptions), c_uint32], c_int),
    ("kr_verify", [_H, _H, _H, _H, PP(VerifyOptions), PP(_H)], c_int),
    ("kr_bench_options_init", [PP(BenchOptions), c_uint32, c_uint32], c_int),
    ("kr_benchmark", [_H, _H, _H, _H, PP(BenchOptions), PP(Baseline), PP(_H)], c_int),
    ("kr_evaluate_options_init", [PP(EvaluateOptions), c_uint32], c_int),
    ("kr_evaluate", [_H, _H, c_char_p, c_size_t, PP(EvaluateOptions), PP(_H)], c_int),
    ("kr_reward_new", [_H, PP(_H)], c_int),
    ("kr_reward_free", [_H], None),
    ("kr_reward_register", [_H, PP(TermDef), c_size_t], c_int),
    ("kr_reward_load_plugin", [_H, c_char_p], c_int),
    ("kr_reward_add", [_H, c_char_p, c_char_p, c_double, c_int], c_int),
    ("kr_reward_set_fallback", [_H, c_double], c_int),
    ("kr_reward_from_json", [_H, PP(_H), c_char_p, c_size_t], c_int),
    ("kr_reward_preset", [_H, PP(_H), c_char_p], c_int),
    ("kr_reward_presets", [], PP(c_char_p)),
    ("kr_reward_score", [_H, _H, PP(c_double)], c_int),
    ("kr_reward_json", [_H, PP(c_void_p)], c_int),
]


class _Functions:
    pass


fn = _Functions()
for _name, _args, _res in _FUNCTIONS:
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise ImportError(f"{path} has no {_name}: the library is older or newer than this "
                          f"binding (binding for ABI {ABI_VERSION})") from None
    _f.argtypes = _args
    _f.restype = _res
    setattr(fn, _name[3:], _f)

if fn.abi_version() != ABI_VERSION:
    raise ImportError(f"{path} has ABI version {fn.abi_version()}; this binding needs "
                      f"{ABI_VERSION}: install matching versions")


def text(b):
    return b.decode("utf-8", "replace") if b else ""


def take_string(ptr):
    """A malloc'd char* from the library, as str; frees it."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        fn.free(ptr)


def encode(s):
    return s.encode("utf-8") if isinstance(s, str) else s


def write_error(errbuf, size, exc):
    """Puts an exception's text into a C error buffer (for callbacks)."""
    msg = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[: max(0, size - 1)]
    ctypes.memmove(errbuf, msg + b"\0", len(msg) + 1)
