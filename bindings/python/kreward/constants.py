"""libkreward's constants, read from the library wherever it can tell them:
status codes (kr_status_name, kr_strerror), verdicts (kr_verdict_name),
report flags (kr_flag_name), dtypes (kr_dtype_name, kr_dtype_size) and
reward presets (kr_reward_presets). A newer library's additions show up here
without a change to the binding.

What the library has no query for is written out once, below the line,
each table naming the header it copies; tests/test_constants.py checks them
against those headers."""
import enum

from . import _lib
from ._lib import fn


def _scan(name_of, start, step, stop):
    """{number: name} from start while name_of gives a name."""
    out, i = {}, start
    while True:
        name = name_of(i)
        if name is None or i == stop:
            return out
        out[i] = name
        i += step


def _status_name(code):
    name = _lib.text(fn.status_name(code))
    return None if name == "KR_UNKNOWN" else name


def _verdict_name(v):
    name = _lib.text(fn.verdict_name(v))
    return None if name == "unknown" else name


# status codes: 0 and the negative KR_E* values (pinned, contiguous, append only)
STATUS_NAMES = _scan(_status_name, 0, -1, -1000)            # {-7: "KR_EPARSE", ...}
STATUS_TEXTS = {code: _lib.text(fn.strerror(code)) for code in STATUS_NAMES}
Status = enum.IntEnum("Status", {name[3:]: code for code, name in STATUS_NAMES.items()})

# verdicts: 0 "none" .. (enum kr_verdict)
VERDICTS = _scan(_verdict_name, 0, 1, 1000)                  # {1: "passed", ...}
Verdict = enum.IntEnum("Verdict", {name.upper(): v for v, name in VERDICTS.items()})

# report flags: one bit each
FLAGS = {1 << i: _lib.text(fn.flag_name(1 << i)) for i in range(64) if fn.flag_name(1 << i)}

# element types: {1: "f32", ...} and their sizes in bytes
DTYPES = _scan(lambda d: _lib.text(fn.dtype_name(d)) or None, 1, 1, 1000)
DTYPE_SIZES = {name: fn.dtype_size(d) for d, name in DTYPES.items()}


def _presets():
    arr, out = fn.reward_presets(), []
    while arr[len(out)]:
        out.append(_lib.text(arr[len(out)]))
    return tuple(out)


PRESETS = _presets()  # reward presets, e.g. "makora"

# ---- not queryable from the library: copied from the headers ----

# include/kreward/problem.h, enum kr_role
ROLES = {1: "in", 2: "out", 3: "inout"}
# include/kreward/problem.h, enum kr_reference_kind
REFERENCE_KINDS = {1: "source", 2: "golden"}
# include/kreward/reward.h, enum kr_gate
GATES = {"default": 0, "always": 1, "compiled": 2, "correct": 3}
# include/kreward/reward.h, KR_TERM_NEEDS_CORRECT
TERM_NEEDS_CORRECT = 0x1
# include/kreward/bench.h, enum kr_bench_preset
BENCH_PRESETS = {"fast": 1, "precise": 2}
# include/kreward/bench.h, enum kr_baseline_kind
BASELINE_REFERENCE, BASELINE_PROGRAM, BASELINE_CALLBACK = 1, 2, 3
# include/kreward/program.h, enum kr_binary_kind and enum kr_cache_result
BINARY_KINDS = {1: "cubin", 2: "ptx"}
CACHE_RESULTS = {0: "miss", 1: "memory", 2: "disk", 3: "skipped"}
# include/kreward/program.h, enum kr_kernel_attr
KERNEL_ATTRS = {"registers": 1, "shared_static": 2, "local_bytes": 3, "max_threads": 4,
                "const_bytes": 5, "num_params": 6, "param_bytes": 7}
# option flags: KR_CONTEXT_* (context.h), KR_COMPILE_* (program.h),
# KR_VERIFY_* (verify.h), KR_BENCH_* (bench.h), KR_EVALUATE_* (evaluate.h),
# KR_POOL_* (pool.h)
CONTEXT_NO_DEVICE, CONTEXT_NO_TRACE = 0x1, 0x2
COMPILE_NO_CACHE = 0x1
VERIFY_SINGLE_RUN = 0x1
BENCH_NO_FLUSH, BENCH_GRAPH, BENCH_NO_CHECK, BENCH_EVENTS_ONLY = 0x1, 0x2, 0x4, 0x8
BENCH_COUNTERS, BENCH_ROBUST = 0x10, 0x20
BENCH_NO_SHARE = 0x40  # time the baseline afresh only (docs/api.md, kr_benchmark)
EVALUATE_NO_BENCH = 0x1
POOL_NO_SANDBOX, POOL_NO_SPARE = 0x1, 0x2
