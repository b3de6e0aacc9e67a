"""kreward.constants: what it reads from the library agrees with the
library and with the headers; the tables it copies from the headers agree
with them too."""
import re

from conftest import ROOT

from kreward import _lib, constants

HEADERS = ROOT / "include" / "kreward"


def header_enum(header, enum):
    """{NAME: value} of `enum NAME { A = 1, ... }` in a public header."""
    text = (HEADERS / header).read_text()
    body = re.search(r"enum %s \{(.*?)\}" % enum, text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(-?\d+)", body)}


def header_defines(header, prefix):
    text = (HEADERS / header).read_text()
    found = {}
    for name, value in re.findall(r"#define (%s\w+)\s+\(?([0-9a-fx]+)u?(?:ll)?\b" % prefix, text):
        found[name] = int(value, 0)
    for name, shift in re.findall(r"#define (%s\w+)\s+\(1ull << (\d+)\)" % prefix, text):
        found[name] = 1 << int(shift)
    return found


def test_status_codes_match_the_library_and_the_header():
    assert constants.STATUS_NAMES[0] == "KR_OK"
    for code, name in constants.STATUS_NAMES.items():
        assert _lib.text(_lib.fn.status_name(code)) == name
        assert constants.STATUS_TEXTS[code] == _lib.text(_lib.fn.strerror(code))
        assert constants.Status[name[3:]] == code
    header = header_enum("common.h", "kr_status")
    assert len(header) > 20
    assert {code: name for name, code in header.items()} == constants.STATUS_NAMES
    assert constants.Status.EUNSOUND == -21 and constants.Status.EPARSE == -7


def test_verdicts_match_the_library_and_the_header():
    header = header_enum("report.h", "kr_verdict")
    assert {v: n[len("KR_VERDICT_"):].lower() for n, v in header.items()} == constants.VERDICTS
    for v, name in constants.VERDICTS.items():
        assert _lib.fn.verdict_from_name(name.encode()) == v or v == 0
    assert constants.Verdict.NOT_RUN == 8


def test_flags_cover_the_header():
    header = header_defines("report.h", "KR_FLAG_")
    assert len(header) >= 13
    for name, bit in header.items():
        assert constants.FLAGS[bit] == name[len("KR_FLAG_"):].lower()
    for bit, name in constants.FLAGS.items():  # the library may know more than the header
        assert _lib.fn.flag_from_name(name.encode()) == bit


def test_dtypes_match_the_header():
    header = header_enum("common.h", "kr_dtype")
    assert {v: n[len("KR_DTYPE_"):].lower() for n, v in header.items()} == constants.DTYPES
    assert constants.DTYPE_SIZES["bf16"] == 2 and constants.DTYPE_SIZES["f64"] == 8


def test_presets_are_the_library_s():
    arr = _lib.fn.reward_presets()
    names = []
    while arr[len(names)]:
        names.append(arr[len(names)].decode())
    assert tuple(names) == constants.PRESETS and "makora" in names


def test_copied_tables_match_the_headers():
    assert {v: n[len("KR_ROLE_"):].lower() for n, v in header_enum("problem.h", "kr_role").items()} \
        == constants.ROLES
    assert {v: n[len("KR_REFERENCE_"):].lower()
            for n, v in header_enum("problem.h", "kr_reference_kind").items()} \
        == constants.REFERENCE_KINDS
    assert {n[len("KR_GATE_"):].lower(): v for n, v in header_enum("reward.h", "kr_gate").items()} \
        == constants.GATES
    assert {n[len("KR_BENCH_"):].lower(): v
            for n, v in header_enum("bench.h", "kr_bench_preset").items()} == constants.BENCH_PRESETS
    kinds = header_enum("bench.h", "kr_baseline_kind")
    assert (kinds["KR_BASELINE_REFERENCE"], kinds["KR_BASELINE_PROGRAM"],
            kinds["KR_BASELINE_CALLBACK"]) == (constants.BASELINE_REFERENCE,
                                               constants.BASELINE_PROGRAM,
                                               constants.BASELINE_CALLBACK)
    assert {v: n[len("KR_BINARY_"):].lower()
            for n, v in header_enum("program.h", "kr_binary_kind").items()} == constants.BINARY_KINDS
    assert {v: n[len("KR_CACHE_"):].lower()
            for n, v in header_enum("program.h", "kr_cache_result").items()} \
        == constants.CACHE_RESULTS
    assert {n[len("KR_KERNEL_"):].lower(): v
            for n, v in header_enum("program.h", "kr_kernel_attr").items()} \
        == constants.KERNEL_ATTRS
    flags = {}
    for header in ("context.h", "program.h", "verify.h", "bench.h", "evaluate.h", "reward.h",
                   "pool.h"):
        flags.update(header_defines(header, "KR_"))
    for name in ("CONTEXT_NO_DEVICE", "CONTEXT_NO_TRACE", "COMPILE_NO_CACHE", "VERIFY_SINGLE_RUN",
                 "BENCH_NO_FLUSH", "BENCH_GRAPH", "BENCH_NO_CHECK", "BENCH_EVENTS_ONLY",
                 "BENCH_COUNTERS", "BENCH_ROBUST",
                 "EVALUATE_NO_BENCH", "TERM_NEEDS_CORRECT", "POOL_NO_SANDBOX", "POOL_NO_SPARE"):
        assert getattr(constants, name) == flags["KR_" + name], name


def test_struct_versions_match_the_headers():
    versions = {}
    for header in HEADERS.glob("*.h"):
        versions.update(header_defines(header.name, "KR_"))
    for name in ("CONTEXT_OPTIONS", "COMPILE_OPTIONS", "VERIFY_OPTIONS", "BENCH_OPTIONS",
                 "EVALUATE_OPTIONS", "POOL_OPTIONS"):
        assert getattr(_lib, name + "_VERSION") == versions[f"KR_{name}_VERSION"], name
    assert _lib.BASELINE_VERSION == versions["KR_BASELINE_VERSION"]
    assert _lib.TERM_VERSION == versions["KR_TERM_VERSION"]
    assert _lib.JOB_VERSION == versions["KR_JOB_VERSION"]
    assert _lib.GOLDEN_REQUEST_VERSION == versions["KR_GOLDEN_REQUEST_VERSION"]
    assert _lib.ABI_VERSION == versions["KR_ABI_VERSION"]
