"""kernel_trace.py on the CPU: the record offsets it reads against every
CUPTI header this machine has, records laid out as CUPTI lays them out,
names as torch.profiler gives them, and a trace that is not whole refused.
The GPU half (the same call traced by it and by torch.profiler, the same
kernels) is test_kernel_trace_gpu.py."""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

import pytest

from kreward.kernelbench import kernel_trace as kt

HEADERS = sorted({os.path.dirname(p) for p in (
    glob.glob("/usr/local/cuda*/include/cupti_activity.h")
    + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "include",
                             "cupti_activity.h"))
    + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "triton", "backends", "nvidia",
                             "include", "cupti_activity.h")))})

OFFSETS_C = r"""
#include <stdio.h>
#include <stddef.h>
#include <cupti_activity.h>
#define K(T) printf("kernel %zu %zu %zu %zu\n", offsetof(T, kind), offsetof(T, start), offsetof(T, end), offsetof(T, name));
#define C(T) printf("memcpy %zu %zu %zu %zu %zu %zu\n", offsetof(T, start), offsetof(T, end), offsetof(T, copyKind), offsetof(T, srcKind), offsetof(T, dstKind), sizeof(((T *)0)->copyKind));
#define S(T) printf("memset %zu %zu %zu %zu\n", offsetof(T, start), offsetof(T, end), offsetof(T, memoryKind), sizeof(((T *)0)->memoryKind));
int main(void) {
    K(CUpti_ActivityKernel4) K(CUpti_ActivityKernel5) K(CUpti_ActivityKernel6) K(CUpti_ActivityKernel7)
    K(CUpti_ActivityKernel8) K(CUpti_ActivityKernel9) LATEST_KERNEL
    C(CUpti_ActivityMemcpy4) C(CUpti_ActivityMemcpy5) LATEST_MEMCPY
    S(CUpti_ActivityMemset3) S(CUpti_ActivityMemset4)
    printf("kinds %d %d %d\n", CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    printf("rc %d\n", CUPTI_ERROR_MAX_LIMIT_REACHED);
    return 0;
}
"""


@pytest.mark.skipif(not HEADERS or not shutil.which("cc"), reason="no CUPTI header or no C compiler here")
@pytest.mark.parametrize("include", HEADERS)
def test_the_offsets_read_are_every_header_versions_own(include, tmp_path):
    src = tmp_path / "offsets.c"
    src.write_text(OFFSETS_C)
    text = (open(os.path.join(include, "cupti_activity.h")).read()
            + "".join(open(p).read() for p in glob.glob(os.path.join(include, "cupti_activity_deprecated.h"))))
    latest = {"LATEST_KERNEL": "CUpti_ActivityKernel10", "LATEST_MEMCPY": "CUpti_ActivityMemcpy6"}
    defines = [f"-D{k}={'K' if 'KERNEL' in k else 'C'}({v})" if f"}} {v};" in text else f"-D{k}="
               for k, v in latest.items()]
    # cupti headers include cuda.h: the toolkit's, wherever it is
    cuda = [f"-I{d}" for d in glob.glob("/usr/local/cuda*/include")[:1]]
    exe = tmp_path / "offsets"
    subprocess.run(["cc", f"-I{include}", *cuda, *defines, str(src), "-o", str(exe)], check=True,
                   capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    seen = {"kernel": set(), "memcpy": set(), "memset": set()}
    for line in lines:
        words = line.split()
        if words and words[0] in seen:
            seen[words[0]].add(tuple(int(w) for w in words[1:]))
        elif words and words[0] == "kinds":
            assert tuple(int(w) for w in words[1:]) == (kt.KIND_MEMCPY, kt.KIND_MEMSET, kt.KIND_CONCURRENT_KERNEL)
        elif words and words[0] == "rc":
            assert int(words[1]) == kt.CUPTI_MAX_LIMIT_REACHED
    assert seen["kernel"] == {(0, kt.START, kt.END, kt.KERNEL_NAME)}
    assert seen["memcpy"] == {(kt.START, kt.END, kt.MEMCPY_KIND, kt.MEMCPY_SRC, kt.MEMCPY_DST, 1)}
    assert seen["memset"] == {(kt.START, kt.END, kt.MEMSET_MEMORY, 2)}


def _kernel_record(name, start, end, size=216):
    """A kernel record as CUPTI lays it out (its head; the rest zero)."""
    buf = ctypes.create_string_buffer(size)
    base = ctypes.addressof(buf)
    keep = ctypes.create_string_buffer(name.encode())
    ctypes.c_uint32.from_address(base).value = kt.KIND_CONCURRENT_KERNEL
    ctypes.c_uint64.from_address(base + kt.START).value = start
    ctypes.c_uint64.from_address(base + kt.END).value = end
    ctypes.c_void_p.from_address(base + kt.KERNEL_NAME).value = ctypes.addressof(keep)
    return buf, keep


def _memcpy_record(copy, src, dst, start, end):
    buf = ctypes.create_string_buffer(96)
    base = ctypes.addressof(buf)
    ctypes.c_uint32.from_address(base).value = kt.KIND_MEMCPY
    ctypes.memmove(base + kt.MEMCPY_KIND, bytes([copy, src, dst]), 3)
    ctypes.c_uint64.from_address(base + kt.START).value = start
    ctypes.c_uint64.from_address(base + kt.END).value = end
    return buf


def _memset_record(memory, start, end):
    buf = ctypes.create_string_buffer(88)
    base = ctypes.addressof(buf)
    ctypes.c_uint32.from_address(base).value = kt.KIND_MEMSET
    ctypes.c_uint16.from_address(base + kt.MEMSET_MEMORY).value = memory
    ctypes.c_uint64.from_address(base + kt.START).value = start
    ctypes.c_uint64.from_address(base + kt.END).value = end
    return buf


def test_records_read_as_torch_profiler_names_them():
    demangle = kt.Demangler()
    rec, _name = _kernel_record("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
                                "St5arrayIPcLm1EEEEviT0_T1_", 1000, 3500)
    name, start, end = kt.describe(ctypes.addressof(rec), demangle)
    assert name.startswith("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>")
    assert (start, end) == (1000, 3500)
    rec, _name = _kernel_record("_Z9my_kernelPKfPfi", 0, 10_000)
    assert kt.describe(ctypes.addressof(rec), demangle) == ("my_kernel(float const*, float*, int)", 0, 10_000)
    rec, _name = _kernel_record("relu_kernel", 5, 5)  # Triton's: not mangled
    assert kt.describe(ctypes.addressof(rec), demangle) == ("relu_kernel", 5, 5)
    # past kineto's length limit a name stays as it is
    long_name = "_Z" + "9my_kernel" * 110
    assert demangle(long_name) == long_name
    # the words scoring.py's patterns read (fills, memsets, DtoD copies are
    # no one's work); each record held while it is read
    dtod, htod, memset = _memcpy_record(8, 3, 3, 0, 2000), _memcpy_record(1, 1, 3, 0, 1000), _memset_record(3, 0, 500)
    assert kt.describe(ctypes.addressof(dtod), demangle) == ("Memcpy DtoD (Device -> Device)", 0, 2000)
    assert kt.describe(ctypes.addressof(htod), demangle)[0] == "Memcpy HtoD (Pageable -> Device)"
    assert kt.describe(ctypes.addressof(memset), demangle) == ("Memset (Device)", 0, 500)
    # kineto's words for values past the known ones
    odd = _memcpy_record(42, 9, 1, 0, 0)
    assert kt.describe(ctypes.addressof(odd), demangle)[0] == "Memcpy <unknown> (Unrecognized -> Pageable)"


class FakeCupti:
    """CUPTI's activity calls over records this test lays out: enable
    starts a trace, the call "launches" the records, the forced flush
    hands them over in one buffer."""

    def __init__(self, records, dropped=0, enable_rc=0):
        self.records, self.dropped_n, self.enable_rc = records, dropped, enable_rc
        self.enabled, self.calls = set(), []
        self.cuptiActivityRegisterCallbacks = self._register
        self.cuptiActivityEnable = self._enable
        self.cuptiActivityDisable = self._disable
        self.cuptiActivityFlushAll = self._flush
        self.cuptiActivityGetNextRecord = self._next
        self.cuptiActivityGetNumDroppedRecords = self._dropped

    def _register(self, requested, completed):
        self.requested, self.completed = requested, completed
        self.calls.append("register")
        return 0

    def _enable(self, kind):
        self.calls.append(("enable", kind))
        if self.enable_rc and kind == kt.KIND_MEMCPY:
            return self.enable_rc
        self.enabled.add(kind)
        return 0

    def _disable(self, kind):
        self.calls.append(("disable", kind))
        self.enabled.discard(kind)
        return 0

    def _flush(self, flag):
        self.calls.append(("flush", flag))
        if not self.records:
            return 0
        buf, size, maxr = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        self.requested(ctypes.pointer(buf), ctypes.pointer(size), ctypes.pointer(maxr))
        assert buf.value % 8 == 0 and size.value == kt.BUFFER_BYTES
        self.buffer = buf.value
        self.cursor = 0
        self.completed(None, 0, buf.value, size.value, len(self.records))
        return 0

    def _next(self, buffer, valid, out):
        assert buffer == self.buffer
        if self.cursor >= valid:
            return kt.CUPTI_MAX_LIMIT_REACHED
        out._obj.value = ctypes.addressof(self.records[self.cursor])
        self.cursor += 1
        return 0

    def _dropped(self, context, stream, out):
        out._obj.value = self.dropped_n if context is None and stream == 0 else 0
        return 0


def _fake_trace(lib):
    """A KernelTrace over the fake: its bound functions replaced by the
    fake's (ctypes argtypes need real foreign functions)."""
    t = kt.KernelTrace.__new__(kt.KernelTrace)
    t.path, t.why = "fake", None
    t.register, t.enable, t.disable = lib.cuptiActivityRegisterCallbacks, lib.cuptiActivityEnable, \
        lib.cuptiActivityDisable
    t.flush, t.next_record = lib.cuptiActivityFlushAll, lib.cuptiActivityGetNextRecord
    t.dropped = lib.cuptiActivityGetNumDroppedRecords
    t.demangle = kt.Demangler()
    t.buffers, t.completed, t.lost, t.busy_us = {}, [], [], None
    t._requested, t._completed = t._on_request, t._on_complete
    return t


def test_a_trace_sums_each_kernel_and_leaves_cupti_off():
    a1, n1 = _kernel_record("_Z9my_kernelPKfPfi", 1000, 5000)
    a2, n2 = _kernel_record("_Z9my_kernelPKfPfi", 6000, 8000)
    b, nb = _kernel_record("relu_kernel", 1000, 2000)
    ms = _memset_record(3, 1000, 1100)
    lib = FakeCupti([a1, b, a2, ms])
    t = _fake_trace(lib)
    ran = []
    got = t.run(lambda: ran.append(sorted(lib.enabled)))
    assert ran == [sorted(kt.TRACED_KINDS)]  # the call ran with every kind on
    assert not lib.enabled and ("flush", kt.FLUSH_FORCED) in lib.calls
    assert sorted((k["name"], k["calls"], k["us"]) for k in got) == [
        ("Memset (Device)", 1, 0.1), ("my_kernel(float const*, float*, int)", 2, 6.0), ("relu_kernel", 1, 1.0)]
    assert not t.buffers  # the completed buffer is let go
    assert t.busy_us == 6.0  # [1000, 5000] and [6000, 8000] ns, the others inside the first


def test_busy_time_is_the_union_of_the_spans():
    assert kt.busy_us([]) == 0.0
    assert kt.busy_us([(0, 1000), (500, 1500), (3000, 4000)]) == 2.5
    assert kt.busy_us([(0, 10_000), (1000, 2000), (2000, 3000)]) == 10.0


def test_a_record_without_its_end_fails_the_trace():
    """A forced flush hands over records of work still running: taken as
    0 us they would shrink torch's share."""
    done, _ = _kernel_record("relu_kernel", 1000, 2000)
    running, _n = _kernel_record("_Z9my_kernelPKfPfi", 2000, 0)
    t = _fake_trace(FakeCupti([done, running]))
    with pytest.raises(kt.TraceFailed, match="without its end"):
        t.run(lambda: None)


def test_the_call_raising_trace_unavailable_is_a_failed_trace_not_a_fallback():
    """The candidate's code runs in the traced call: it must not be able to
    send attribution to another tracer by raising the fallback's signal."""
    t = _fake_trace(FakeCupti([]))

    def candidate():
        raise kt.TraceUnavailable("pick the profiler, please")
    with pytest.raises(kt.TraceFailed, match="pick the profiler"):
        t.run(candidate)


def test_a_failed_flush_fails_the_trace():
    lib = FakeCupti([])
    lib.cuptiActivityFlushAll = lambda flag: 7
    t = _fake_trace(lib)
    with pytest.raises(kt.TraceFailed, match="FlushAll"):
        t.run(lambda: None)


def test_records_come_back_read_on_the_callers_thread_only():
    """The completion callback queues the buffer; the records are read after
    the flush (CUPTI's thread never runs more Python than a list append)."""
    rec, _ = _kernel_record("relu_kernel", 1000, 2000)
    lib = FakeCupti([rec])
    t = _fake_trace(lib)
    real_flush = lib.cuptiActivityFlushAll

    def flush(flag):
        rc = real_flush(flag)
        assert len(t.completed) == 1 and lib.cursor == 0  # queued, not yet read
        return rc
    t.flush = flush
    assert [k["name"] for k in t.run(lambda: None)] == ["relu_kernel"]


def test_dropped_records_fail_the_trace_rather_than_miss_a_kernel():
    rec, _ = _kernel_record("relu_kernel", 0, 1000)
    t = _fake_trace(FakeCupti([rec], dropped=3))
    with pytest.raises(kt.TraceFailed, match="dropped 3"):
        t.run(lambda: None)


def test_cupti_refusing_to_start_runs_nothing_and_says_so():
    lib = FakeCupti([], enable_rc=17)
    t = _fake_trace(lib)
    ran = []
    with pytest.raises(kt.TraceUnavailable, match="cuptiActivityEnable"):
        t.run(lambda: ran.append(1))
    assert not ran and not lib.enabled  # what it had enabled is off again


def test_a_failing_call_leaves_cupti_off_and_raises_its_own_error():
    lib = FakeCupti([])
    t = _fake_trace(lib)

    def boom():
        raise ValueError("the candidate's error")
    with pytest.raises(ValueError, match="candidate's error"):
        t.run(boom)
    assert not lib.enabled


def test_the_library_is_torchs_own_when_torch_loaded_one(tmp_path):
    """The one mapped into the process comes first (one CUPTI per
    process); a folder of torch's next; a toolkit's last."""
    torch_dir = tmp_path / "site" / "torch"
    (torch_dir / "lib").mkdir(parents=True)
    (torch_dir / "lib" / "libcupti.so.12").write_bytes(b"")
    nv = tmp_path / "site" / "nvidia" / "cuda_cupti" / "lib"
    nv.mkdir(parents=True)
    (nv / "libcupti.so.12").write_bytes(b"")
    paths = kt.library_candidates(str(torch_dir))
    mapped = [p for p in paths if p not in (str(torch_dir / "lib" / "libcupti.so.12"), str(nv / "libcupti.so.12"))
              and not p.startswith(("/usr/local/cuda", os.environ.get("CUDA_HOME") or "\0"))]
    ordered = [p for p in paths if p not in mapped]
    assert ordered[:2] == [str(torch_dir / "lib" / "libcupti.so.12"), str(nv / "libcupti.so.12")]
    assert len(paths) == len(set(paths))


def test_a_missing_cupti_is_unavailable_not_an_error(monkeypatch):
    monkeypatch.setattr(kt, "library_candidates", lambda torch_dir=None: ["/nonexistent/libcupti.so.99"])
    with pytest.raises(kt.TraceUnavailable, match="libcupti.so.99"):
        kt.KernelTrace()
    monkeypatch.setattr(kt, "library_candidates", lambda torch_dir=None: [])
    with pytest.raises(kt.TraceUnavailable, match="no libcupti"):
        kt.KernelTrace()


@pytest.mark.skipif(not kt.library_candidates(), reason="no libcupti on this machine")
def test_a_real_libcupti_binds_without_a_gpu():
    """Binding is dlopen and dlsym only: no CUPTI call, so no driver needed."""
    t = kt.KernelTrace()
    assert t.path and callable(t.enable)


class _Replying:
    """A candidate worker whose attribute reply is given."""

    def __init__(self, reply):
        self.reply = reply

    def request(self, req, timeout_s):
        assert req["op"] == "attribute"
        return dict(self.reply, ok=True), None


TRITON_SRC = ("import triton\n@triton.jit\ndef decoy(x):\n    pass\n"
              "class ModelNew:\n    pass\n")


def _attributed(reply, time_us):
    import random

    pytest.importorskip("torch", reason="evaluation.py imports torch (the wheel's test venv has none)")
    from kreward.kernelbench.evaluation import attribute_kernels
    res = {"notes": [], "time_us": time_us}
    attribute_kernels(_Replying(reply), TRITON_SRC, random.Random(1), res, 5)
    return res


def test_a_traced_call_busier_than_a_timed_one_is_not_attributed():
    """A candidate that knows it is traced can launch its own kernel over and
    over, so its share looks like the work: the traced call then keeps the
    GPU busy far longer than a timed call took, and the shares are refused
    (unattributed: no speed credit rests on them)."""
    kernels = [{"name": "decoy", "calls": 50, "us": 900.0},
               {"name": "void at::native::gemm_kernel<float>(int)", "calls": 1, "us": 100.0}]
    res = _attributed({"kernels": kernels, "tracer": "cupti", "busy_us": 1000.0}, time_us=110.0)
    assert res["torch_fallback"] is None and "kernels" not in res
    assert any("attribution refused" in n for n in res["notes"]), res["notes"]
    # the same kernels in a call as busy as a timed one: attributed
    honest = _attributed({"kernels": kernels, "tracer": "cupti", "busy_us": 1000.0}, time_us=1050.0)
    assert honest["torch_fallback"] is False and honest["custom_share"] == 0.9
    assert honest["attribution_via"] == "cupti"
    # the profiler's path reports no busy time: nothing to compare
    old = _attributed({"kernels": kernels, "tracer": "torch.profiler", "tracer_why": "no libcupti"}, time_us=110.0)
    assert old["torch_fallback"] is False
    assert any("CUPTI not used (no libcupti)" in n for n in old["notes"])
