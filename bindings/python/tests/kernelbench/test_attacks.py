"""Attacks on the ModelNew evaluation (runner.py, worker.py) by the code it
runs, on the CPU. The worker process runs the candidate: everything in it
(torch, the worker's own objects, its pipe) is the candidate's to change.

- Replies are data: a candidate that writes its own reply on the worker's
  pipe, or replaces the worker's fetch, gets `error` (reward 0); the caller
  never allocates what a reply claims, and evaluate never raises.
- Outputs made after the clock: candidates that compute an output only when
  it is fetched (a patched torch.Tensor method, a trace function, the
  worker's fetch wrapped through gc) paid 500x on the CPU. The worker's
  commitment (go with prepare's "commit", asked for by the runner on every
  batch) catches each of them."""
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch", reason="the ModelNew runner needs torch")

from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench.inputs import fingerprint  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402

KB = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench"
RELU = KB / "candidates" / "level1_01_relu"
LAZY = ["cheat_lazy_detach.py", "cheat_lazy_trace.py", "cheat_lazy_worker_patch.py"]

# small enough for the CPU, slow enough (a few ms a call) that skipping the work shows
MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


n = 512


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
"""


def cpu_runner(tmp_path_factory, path):
    """A Runner on the CPU for the problem file at path (no spare worker)."""
    return Runner(import_problem(str(path)), "cpu", cache_dir=str(tmp_path_factory.mktemp("ext")),
                  timeout_s=120, call_timeout_s=30, spare=False)


def written(tmp_path_factory, name, text):
    path = tmp_path_factory.mktemp("problem") / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def relu_runner(tmp_path_factory):
    with cpu_runner(tmp_path_factory, KB / "level1" / "01_relu.py") as r:
        yield r


@pytest.fixture(scope="module")
def matmul_runner(tmp_path_factory):
    with cpu_runner(tmp_path_factory, written(tmp_path_factory, "matmul.py", MATMUL)) as r:
        yield r


def as_matmul(relu_cheat):
    """A relu cheat made a matmul cheat (the same mechanism, a slower call)."""
    src = relu_cheat.replace("torch.clamp_min(job[1], 0, out=self)", "torch.matmul(job[1], job[2], out=self)")
    src = src.replace("torch.clamp_min(job[1], 0, out=out)", "torch.matmul(job[1], job[2], out=out)")
    assert src != relu_cheat, "the cheat's relu call is not where as_matmul looks"
    src = src.replace("def forward(self, x):", "def forward(self, x, y):")
    src = src.replace("out = torch.empty_like(x)", "out = torch.empty(x.shape[0], y.shape[1])")
    return src.replace("_pending[id(out)] = (out, x)", "_pending[id(out)] = (out, x, y)")


def run(runner, source, **kw):
    return runner.evaluate(source, **{"seed": 3, "batches": 3, "checks": 2, **kw})


# ---------------------------------------------------------------- replies
FORGED_FETCH = """
import gc
import torch
import torch.nn as nn

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "fetch"):
        def _fetch(req, _real=_obj.fetch):
            reply, blobs = _real(req)
            reply["outputs"][0]["dtype"] = "{dtype}"  # torch.load as a dtype: a TypeError in the caller
            return reply, blobs
        _obj.fetch = _fetch


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""
WRITES_REPLY = """
import os, sys
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.write(int(sys.argv[2]), {line!r})
        return torch.relu(x)
"""


@pytest.mark.parametrize("source,why", [
    ((RELU / "cheat_forged_reply.py").read_text(), "announces 10000000000000 bytes"),
    (WRITES_REPLY.format(line=b"[1]\n"), "is not a reply"),
    (WRITES_REPLY.format(line=b"{not json\n"), "is not JSON"),
    (WRITES_REPLY.format(line=b'{"ok": true, "event_us": "0"}\n'), None),
    (FORGED_FETCH.format(dtype="load"), "reply to fetch has no valid outputs"),
], ids=["10TB", "not_an_object", "not_json", "desynchronised", "bad_dtype"])
def test_a_forged_reply_is_the_candidates_failure_not_an_exception(relu_runner, source, why):
    """Before worker_process checked replies: MemoryError (10 TB claimed),
    AttributeError / JSONDecodeError / KeyError / TypeError out of evaluate.
    Judged, as the candidate's own failure (crash, reward 0): as `error`
    (not judged, no number) a forged reply escaped a wrong answer's penalty."""
    res = run(relu_runner, source, calls=4)
    assert res["verdict"] == "crash" and res["reward"] == 0, res
    assert why is None or why in res["feedback"], res


RAISES = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if {init}:
            raise RuntimeError("CUDA error: device-side assert triggered (as a candidate's own)")

    def forward(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


@pytest.mark.parametrize("init", [True, False], ids=["in_init", "in_forward"])
def test_a_candidate_that_raises_is_judged_its_own_failure(relu_runner, init):
    """An exception out of ModelNew(...) or its forward (a device-side
    assert on the H200 at bc5b6d8) was `error`, not judged, no number: a
    policy could escape a wrong answer's penalty by failing on purpose
    (and stop a trainer that halts on unjudged streaks). It is the
    candidate's own outcome: crash, reward 0."""
    res = run(relu_runner, RAISES.format(init=init), calls=4)
    assert res["verdict"] == "crash" and res["reward"] == 0, res
    assert "device-side assert" in res["feedback"] if init else "illegal memory" in res["feedback"]


CLAIMS_SANDBOX_FAILED = """
import os, sys
import torch
import torch.nn as nn

_LINE = b'{{"ok": false, "error": "the sandbox could not be applied: x", "sandbox_failed": true}}\\n'
if {at_load}:
    os.write(int(sys.argv[2]), _LINE)


class ModelNew(nn.Module):
    def forward(self, x):
        os.write(int(sys.argv[2]), _LINE)
        return torch.relu(x)
"""


@pytest.mark.parametrize("at_load", [True, False], ids=["at_load", "in_forward"])
def test_a_candidate_cannot_claim_the_sandbox_failed(relu_runner, at_load):
    """A failed reply saying the sandbox could not be applied is the
    environment's failure (`error`, no number) only where load enters the
    sandbox ("init"); the candidate's code runs during load and after, and
    can write that line on its pipe, so anywhere else it is judged."""
    assert relu_runner.sandbox != "init"
    res = run(relu_runner, CLAIMS_SANDBOX_FAILED.format(at_load=at_load), calls=4)
    assert res["verdict"] in ("compile_error", "crash") and res["reward"] == 0, res


def test_an_endless_reply_line_is_bounded(relu_runner, monkeypatch):
    """A reply line without its end: the caller stops reading at MAX_LINE
    (it used to grow its buffer until the request's deadline)."""
    from kreward.kernelbench import worker_process
    monkeypatch.setattr(worker_process, "MAX_LINE", 1 << 20)
    src = WRITES_REPLY.format(line=b"x" * (4 << 20))
    res = run(relu_runner, src, calls=4)
    assert res["verdict"] == "crash" and "longer than" in res["feedback"], res


# ------------------------------------------------------- after the clock
@pytest.mark.parametrize("name", LAZY)
def test_outputs_computed_after_the_clock_get_no_speedup(matmul_runner, name):
    """Each of these passed at 400-600x on the CPU before the runner asked
    for the commitment (the batch did nothing; the calls checked were
    computed when fetched)."""
    res = run(matmul_runner, as_matmul((RELU / name).read_text()), baseline=True)
    assert res["verdict"] != "pass" or res["speedup"] < 2.0, res


@pytest.mark.parametrize("name", LAZY)
def test_the_lazy_relu_cheats_reach_the_commitment(relu_runner, name):
    """The manifest's lazy cheats as written (relu): caught by the
    commitment, not by an exception of their own (they once called
    torch.relu(out=), which torch refuses, and never reached it)."""
    res = run(relu_runner, (RELU / name).read_text(), baseline=True)
    assert res["verdict"] == "wrong" and "after the batch" in (res["feedback"] or ""), res


def committed_and_fetched(runner, source, seeds=(11, 12)):
    """The worker's commitment to each call's outputs (go) and the
    fingerprint of what a fetch then returns, per seed."""
    w, loaded = runner._processes.start_candidate(source, "ModelNew")
    try:
        assert loaded["ok"], loaded
        assert w.request({"op": "build", "case": 0}, 60)[0]["ok"]
        assert w.request({"op": "prepare", "case": 0, "seeds": list(seeds), "commit": True}, 60)[0]["ok"]
        go, _ = w.request({"op": "go", "case": 0}, 60)
        assert go["ok"], go
        out = []
        for seed, committed in zip(seeds, go["committed"]):
            reply, payload = w.request({"op": "fetch", "seed": seed}, 60)
            m = reply["outputs"][0]
            got = torch.frombuffer(bytearray(payload), dtype=torch.uint8).view(
                getattr(torch, m["dtype"])).reshape(m["shape"])
            out.append((committed[0], fingerprint(got)[:2]))
        return out
    finally:
        w.end()


def test_the_commitment_matches_an_honest_candidates_outputs(matmul_runner):
    src = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
    pairs = committed_and_fetched(matmul_runner, src)
    assert all(c == f for c, f in pairs), pairs
    assert pairs[0][0] != pairs[1][0]  # fresh inputs, other outputs


@pytest.mark.parametrize("name", LAZY)
def test_the_commitment_catches_outputs_computed_after_the_clock(matmul_runner, name):
    """The lazy cheats' outputs are right when fetched, and not what the
    batch committed to when its clock stopped (before worker.py's go
    committed: no "committed" in its reply)."""
    pairs = committed_and_fetched(matmul_runner, as_matmul((RELU / name).read_text()))
    assert all(c != f for c, f in pairs), pairs


# Work deferred past the end of the call: in a timed batch (the worker's
# `go` on the stack: verification calls compute at once) the forward
# returns an output not yet written and arranges for it to be written
# later, by a thread or by a collector's hook that runs when the worker
# next allocates (its fetch). The commitment is made when the batch's
# calls are done: what is written after it is not what it committed to.
_IN_GO = """
import sys
def _in_go():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "go":
            return True
        f = f.f_back
    return False
"""
DEFER_THREAD = _IN_GO + """
import threading, torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _in_go():
            return a @ b
        out = torch.empty(a.shape[0], b.shape[1])
        threading.Timer(0.002, lambda: torch.matmul(a, b, out=out)).start()
        return out
"""
DEFER_GC_HOOK = _IN_GO + """
import gc, torch, torch.nn as nn
_pending = []
def _finish(phase, info):
    while _pending:
        out, a, b = _pending.pop()
        torch.matmul(a, b, out=out)
gc.callbacks.append(_finish)
class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _in_go():
            return a @ b
        out = torch.empty(a.shape[0], b.shape[1])
        _pending.append((out, a, b))
        return out
"""
DEFER_DEL = _IN_GO + """
import torch, torch.nn as nn
class _Later:
    def __init__(self, job):
        self.job, self.me = job, self   # a cycle: freed by the collector, after the batch
    def __del__(self):
        out, a, b = self.job
        torch.matmul(a, b, out=out)
class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _in_go():
            return a @ b
        out = torch.empty(a.shape[0], b.shape[1])
        _Later((out, a, b))
        return out
"""
# the output written when the worker's process ends: never before the fetch
DEFER_ATEXIT = _IN_GO + """
import atexit, torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _in_go():
            return a @ b
        out = torch.empty(a.shape[0], b.shape[1])
        atexit.register(lambda: torch.matmul(a, b, out=out))
        return out
"""


@pytest.mark.parametrize("source", [DEFER_THREAD, DEFER_GC_HOOK, DEFER_DEL, DEFER_ATEXIT],
                         ids=["thread", "gc_callback", "del_in_a_cycle", "atexit"])
def test_work_deferred_past_the_call_is_wrong(matmul_runner, source):
    """Integrity round 3, item 1, on the CPU: each way of finishing an
    output after the call returned is caught by the commitment, or earns
    no speedup."""
    res = run(matmul_runner, source, baseline=True)
    assert res["verdict"] == "wrong" or res["speedup"] < 1.5, res


@pytest.mark.parametrize("shape,dtype", [((3, 5), torch.float32), ((7,), torch.float16), ((13,), torch.uint8),
                                         ((4, 1000), torch.bfloat16), ((0,), torch.float32),
                                         ((2, 3, 4), torch.int64),
                                         ((1100, 1000), torch.float64)])  # > _STACK_BELOW words
def test_the_batch_commitment_has_the_bits_of_one_sums_a_call(shape, dtype, monkeypatch):
    """go commits to a batch's outputs in one pass of a dozen operations
    (inputs.sums_of_many), and the caller checks each fetched output with
    fingerprint (inputs.sums): the two must agree bit for bit, for odd byte
    counts and across chunk boundaries (rows grouped, columns split)."""
    from kreward.kernelbench import inputs
    gen = torch.Generator().manual_seed(5)
    xs = [(torch.randn(shape, generator=gen) * 100).to(dtype) for _ in range(9)]
    one_by_one = [inputs.sums(x).tolist() for x in xs]
    assert [s.tolist() for s in inputs.sums_of_many(xs)] == one_by_one
    # several rows a group, several chunks a row (the large tensor: several
    # chunks each, summed one by one)
    monkeypatch.setattr(inputs, "_CHUNK", 4 if xs[0].numel() < 10000 else 1 << 18)
    assert [s.tolist() for s in inputs.sums_of_many(xs)] == one_by_one
    if xs[0].numel() > 1:  # any one byte changed changes that row's sums only
        ys = [x.clone() for x in xs]
        ys[3].view(torch.uint8).reshape(-1)[-1] ^= 1
        changed = [s.tolist() for s in inputs.sums_of_many(ys)]
        assert changed[3] != one_by_one[3] and changed[:3] + changed[4:] == one_by_one[:3] + one_by_one[4:]


TRITON_BITS = """
import sys, torch
sys.path.insert(0, {here!r})
import inputs
launch = inputs._make_triton_kernel()
gen = torch.Generator().manual_seed(9)
for shape, lo in (((5000,), 0), ((3, 777), 16), ((1,), 5), ((2, 4096), 1 << 24), ((4, 1025), 3)):
    w = torch.randint(-2**62, 2**62, shape, dtype=torch.int64, generator=gen)
    a, b = inputs._torch_mixed_sums(w, lo), launch(w, lo)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (shape, lo)
print("same bits")
"""


def test_the_triton_commitment_has_the_bits_of_torchs_steps():
    """The GPU's one-pass commitment kernel (inputs._make_triton_kernel),
    run in Triton's interpreter on the CPU, gives torch's steps' bits: the
    caller and the worker agree whichever of the two each one ran."""
    pytest.importorskip("triton", reason="needs triton")
    here = str(pathlib.Path(__file__).resolve().parents[2] / "kreward" / "kernelbench")
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", TRITON_BITS.format(here=here)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "same bits" in out.stdout, out.stderr[-2000:]


BIG_FETCH = """
import gc
import torch
import torch.nn as nn

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "fetch"):
        def _fetch(req, _real=_obj.fetch):
            reply, blobs = _real(req)
            return reply, [bytes({size})]  # more than a call's inputs and outputs, twice
        _obj.fetch = _fetch


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def test_a_fetch_carries_no_more_than_a_calls_outputs(relu_runner):
    """The runner bounds a reply's payload by the problem (twice the largest
    case's inputs and outputs, plus 1 MiB), not by the 4 GiB default: a
    candidate cannot make the trainer's process read what it likes."""
    bound = 2 * relu_runner.max_call_bytes + (1 << 20)
    assert bound < 1 << 30  # far under the 4 GiB default
    res = run(relu_runner, BIG_FETCH.format(size=bound + 4096), calls=4)
    assert res["verdict"] == "crash" and res["reward"] == 0, res  # its own failure: judged
    assert f"at most {bound}" in res["feedback"], res


# ------------------------------------------------- work outside the clock
PRECOMPUTE_IN_PREPARE = """
import gc, torch, torch.nn as nn
_cache = {}
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "prepare"):
        def _prepare(req, _real=_obj.prepare, W=_obj):
            r = _real(req)
            with torch.no_grad():
                for seed, args, state in W.order:
                    _cache[id(args[0])] = args[0] @ args[1]   # the real work, before the clock
            return r
        _obj.prepare = _prepare

class ModelNew(nn.Module):
    def forward(self, a, b):
        out = _cache.pop(id(a), None)
        return out if out is not None else a @ b
"""


TALL_MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(64, 16384), torch.randn(16384, 64)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def tall_matmul_runner(tmp_path_factory):
    with cpu_runner(tmp_path_factory, written(tmp_path_factory, "tall_matmul.py", TALL_MATMUL)) as r:
        yield r


def test_work_done_in_prepare_gets_no_speedup(tall_matmul_runner):
    """The worker's prepare wrapped through gc to compute the batch's
    outputs before the clock starts paid 66x on the CPU (helper-24's
    review; 9-184x on a loaded 2-core machine) when the worker made the
    inputs there. The caller now writes them into the input region after
    prepare answered: what prepare sees are the last batch's values, so
    the cached outputs are wrong and the calls checked say so, or the
    candidate computes in forward like anyone. The best of three, so a
    loaded machine's noise cannot pass for a gain."""
    assert tall_matmul_runner.inputs_from == "caller"
    results = [run(tall_matmul_runner, PRECOMPUTE_IN_PREPARE, baseline=True) for _ in range(3)]
    assert all(r["verdict"] != "pass" or r["speedup"] < 2.0 for r in results), results


WATCH_THE_REGION = """
import gc, threading, time, torch, torch.nn as nn
_done = {}
def _watch(W):
    # a thread that recomputes the batch whenever the region's values change
    seen = None
    while True:
        time.sleep(0.0002)
        order = list(W.order)
        if not order:
            continue
        a, b = order[0][1]
        key = (a[0, :4].tolist(), b[:4, 0].tolist())
        if key != seen:
            seen = key
            with torch.no_grad():
                for _, args, _ in order:
                    _done[id(args[0])] = args[0] @ args[1]
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "prepare"):
        threading.Thread(target=_watch, args=(_obj,), daemon=True).start()

class ModelNew(nn.Module):
    def forward(self, a, b):
        out = _done.pop(id(a), None)
        return out if out is not None else a @ b
"""


def test_a_thread_watching_the_region_gets_no_speedup(tall_matmul_runner):
    """The caller's values reach the region between prepare's reply and go:
    a thread polling it and computing as they change races the caller's
    writes (half-written values give wrong outputs) and, once they settle,
    has until go arrives, a request later: no gain worth the name."""
    results = [run(tall_matmul_runner, WATCH_THE_REGION, baseline=True) for _ in range(3)]
    assert all(r["verdict"] != "pass" or r["speedup"] < 2.0 for r in results), results


# helper-25's review of the input region (three ways through its first form)
SEEDS_IN_PREPARE = """
# The prepare request carries the batch's seeds; the caller makes the region's
# values with inputs.make_inputs(layout, seed, "cpu"), which the worker holds too.
import gc, torch, torch.nn as nn
_cache = {}
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "prepare"):
        def _prepare(req, _real=_obj.prepare, W=_obj):
            r = _real(req)
            lay = W.layouts[req["case"]]
            with torch.no_grad():
                for seed, args, state in W.order:
                    t = W.make_inputs(lay, seed, "cpu")     # the caller's values, before it writes them
                    _cache[id(args[0])] = t["a"] @ t["b"] if "a" in t else None
            return r
        _obj.prepare = _prepare

class ModelNew(nn.Module):
    def forward(self, a, b):
        out = _cache.pop(id(a), None)
        return out if out is not None else a @ b
"""

PIPELINE_OVER_THE_WRITES = """
# No seeds used. prepare (wrapped) fills the batch's region slots with a NaN
# sentinel before answering; the caller then makes and writes call after call.
# A thread computes call i as soon as its slot holds no sentinel word any more,
# i.e. while the caller is still making calls i+1.. : all but the last calls'
# outputs are made before go arrives (outside the caller's clock).
import gc, threading, time, torch, torch.nn as nn
SENT = 0x7FC0DEAD - (1 << 32) if 0x7FC0DEAD >= (1 << 31) else 0x7FC0DEAD
_st = {"epoch": 0, "slots": {}, "go": False}
_lock = threading.Lock()

def _filled(t):
    return not bool((t.view(torch.int32) == SENT).any())

def _watch(epoch, order):
    for i, (_, args, _) in enumerate(order):
        a, b = args
        while True:
            if _st["epoch"] != epoch or _st["go"]:
                return
            if _filled(a) and _filled(b):
                break
            time.sleep(0.00005)
        with _lock:
            if _st["epoch"] != epoch or _st["go"] or i in _st["slots"]:
                return
            ev = threading.Event(); _st["slots"][i] = [ev, None]
        with torch.no_grad():
            _st["slots"][i][1] = a @ b
        ev.set()

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "prepare"):
        def _prepare(req, _real=_obj.prepare, W=_obj):
            r = _real(req)
            with _lock:
                _st["epoch"] += 1; _st["slots"] = {}; _st["go"] = False
                _st["index"] = {id(args[0]): i for i, (_, args, _) in enumerate(W.order)}
            if req.get("region"):
                for _, args, _ in W.order:
                    for t in args:
                        t.view(torch.int32).fill_(SENT)
                threading.Thread(target=_watch, args=(_st["epoch"], list(W.order)), daemon=True).start()
            return r
        def _go(req, _real=_obj.go):
            with _lock:
                _st["go"] = True
            return _real(req)
        _obj.prepare, _obj.go = _prepare, _go

class ModelNew(nn.Module):
    def forward(self, a, b):
        i = _st.get("index", {}).get(id(a))
        slot = _st["slots"].get(i) if i is not None else None
        if slot is not None:
            slot[0].wait()
            return slot[1]
        return a @ b
"""

SHRINK_THE_REGION = """
# The worker closes region_fd after mapping it, but Python's mmap.mmap keeps
# its own dup of the descriptor (for size() and resize()). Through it the
# candidate shrinks the memfd the caller maps too: the caller's next write
# into its mapping of the region faults past the end of the file (SIGBUS in
# the trainer's process).
import gc, os, stat, torch, torch.nn as nn
done = []
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and getattr(_obj, "region", None) is not None:
        size = len(_obj.region)
        for fd in range(3, 1024):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size == size:
                try:
                    os.ftruncate(fd, 0)
                    done.append(fd)
                except OSError:
                    pass
        try:
            _obj.region.resize(1)
        except (OSError, ValueError, TypeError, SystemError):
            pass
class ModelNew(nn.Module):
    def forward(self, a, b): return a @ b
"""


@pytest.mark.parametrize("name", ["SEEDS_IN_PREPARE", "PIPELINE_OVER_THE_WRITES"])
def test_the_input_region_gives_nothing_before_the_clock(tall_matmul_runner, name):
    """Two cheats that paid against the region's first form (22-38x and
    3-6.7x): prepare was sent the seeds the caller makes the values from,
    and the caller wrote call after call in the clear, so a thread could
    compute each call as its slot filled. Now the worker gets call numbers,
    and the values arrive masked, the key only with go, unmasked a call at
    a time inside the clock."""
    results = [run(tall_matmul_runner, globals()[name], baseline=True) for _ in range(2)]
    assert all(r["verdict"] != "pass" or r["speedup"] < 2.0 for r in results), results


@pytest.fixture(scope="module")
def staged_matmul_runner(tmp_path_factory):
    """The tall matmul with a GPU's way to the region on the CPU: the
    worker's tensors are views of a buffer of its own, which `stage` fills
    from the region (masked) after the caller wrote it."""
    with cpu_runner(tmp_path_factory, written(tmp_path_factory, "tall_matmul.py", TALL_MATMUL)) as r:
        r.staged = True
        yield r


OWN_BUFFER = """
import gc, mmap, torch, torch.nn as nn
_W = [o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "region")][0]
_lo = torch.frombuffer(_W.region, dtype=torch.uint8).data_ptr()
_hi = _lo + len(_W.region)

class ModelNew(nn.Module):
    def forward(self, a, b):
        if _lo <= a.data_ptr() < _hi:
            raise RuntimeError("the inputs are views of the region, not staged")
        return a @ b
"""


def test_a_staged_region_gives_the_honest_candidate_its_inputs(staged_matmul_runner):
    """Staged (a GPU's way, here on the CPU): the calls' tensors live in the
    worker's own buffer, not the region, and carry the caller's values once
    go unmasked them (the checks regenerate them from the seeds)."""
    res = run(staged_matmul_runner, OWN_BUFFER, baseline=True)
    assert res["verdict"] == "pass", res
    assert run(staged_matmul_runner, TALL_MATMUL.replace("class Model(", "class ModelNew("),
               baseline=False)["verdict"] == "pass"


@pytest.mark.parametrize("name", ["PRECOMPUTE_IN_PREPARE", "WATCH_THE_REGION", "SEEDS_IN_PREPARE",
                                  "PIPELINE_OVER_THE_WRITES"])
def test_the_staged_region_gives_nothing_before_the_clock(staged_matmul_runner, name):
    """Every cheat on work before the clock, against the staged region: the
    device buffer holds last batch's values or masked ones until go."""
    results = [run(staged_matmul_runner, globals()[name], baseline=True) for _ in range(2)]
    assert all(r["verdict"] != "pass" or r["speedup"] < 2.0 for r in results), results


SKIP_THE_STAGE = """
import gc, torch, torch.nn as nn
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "stage"):
        _obj.stage = lambda req: {}   # the masked values never reach the calls' tensors

class ModelNew(nn.Module):
    def forward(self, a, b): return a @ b
"""


def test_a_worker_that_skips_the_stage_computes_on_the_wrong_inputs(staged_matmul_runner):
    """The stage is the worker's to run, so the candidate's to skip: its
    calls then read whatever the buffer held, and the input digest (or the
    outputs) say so."""
    res = run(staged_matmul_runner, SKIP_THE_STAGE, baseline=False)
    assert res["verdict"] == "wrong", res


def _shared_buffer_on_the_cpu(runner, monkeypatch):
    """A shared buffer whose descriptor no worker can map (a pipe's): the
    caller copies the masked chunks into it and asks the worker to stage
    from it, and the worker's ready could not map it. Returns the buffers
    made (one per worker)."""
    import types
    made = []

    def unmappable():
        r, w = os.pipe()
        os.close(w)
        return r

    def shared_buffer():
        n = 1 << 20  # (a chunk larger than this goes in pieces)
        made.append(types.SimpleNamespace(tensor=torch.zeros(n, dtype=torch.uint8), nbytes=n,
                                          export=unmappable, close=lambda: None,
                                          lock=threading.Lock()))
        return made[-1], None

    monkeypatch.setattr(runner._processes, "_shared_buffer", shared_buffer)
    return made


def test_a_worker_that_cannot_map_its_shared_buffer_is_staged_through_the_region(
        staged_matmul_runner, monkeypatch):
    """The first stage from its own buffer that the worker's driver refused
    (in ready, where it maps it) turns that worker to the host region for
    good (said in staging), and the batch goes on: the honest matmul
    passes."""
    _shared_buffer_on_the_cpu(staged_matmul_runner, monkeypatch)
    res = run(staged_matmul_runner, TALL_MATMUL.replace("class Model(", "class ModelNew("), baseline=False)
    assert res["verdict"] == "pass", res
    assert res["staging"]["candidate"].startswith("host (the worker could not map its shared buffer"), res


def test_a_staged_batch_goes_through_the_workers_shared_buffer_in_pieces(tmp_path_factory, monkeypatch):
    """The staging protocol end to end (on the CPU a Runner that stages as a
    GPU's does gets a host buffer with the same requests: cuda_ipc.py
    HostBuffer): each worker maps its own buffer in ready, a chunk larger
    than the buffer goes in pieces, each piece staged at its place; the
    honest matmul passes on both sides with staging "ipc", and a worker
    that skips the stage computes on the wrong inputs."""
    from kreward.kernelbench import processes
    monkeypatch.setattr(processes, "SHARED_BYTES", 64 << 10)
    with cpu_runner(tmp_path_factory, written(tmp_path_factory, "tall_matmul.py", TALL_MATMUL)) as r:
        r.staged = True
        sent = _requests(monkeypatch)
        res = run(r, TALL_MATMUL.replace("class Model(", "class ModelNew("), baseline=True)
        assert res["verdict"] == "pass", res
        assert res["staging"] == {"candidate": "ipc", "baseline": "ipc"}, res["staging"]
        pieces = [q for q in sent if q["op"] == "stage"]
        ipc = [q for q in pieces if "ipc" in q]
        assert ipc and all(q["n"] <= 64 << 10 for q in ipc), pieces[:3]
        # a chunk in pieces: one piece starting where the one before ended
        assert any(b["at"] == a["at"] + a["n"] for a, b in zip(ipc, ipc[1:])), ipc[:4]
        assert run(r, SKIP_THE_STAGE, baseline=False)["verdict"] == "wrong"


SMALL_RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
"""


def test_a_small_problems_staging_buffer_is_sized_by_its_batches(tmp_path_factory):
    """A worker's staging buffer holds what one batch can stage, not
    SHARED_BYTES whatever the problem: a 64 x 128 relu's largest batch
    (MAX_CALLS calls of 64 KiB in and out) is a few MiB, and its workers'
    buffers no larger (each had 128 MiB of the caller's GPU: helper-27)."""
    from kreward.kernelbench import processes
    from kreward.kernelbench.timing import MAX_CALLS
    with cpu_runner(tmp_path_factory, written(tmp_path_factory, "small_relu.py", SMALL_RELU)) as r:
        r.staged = True
        res = run(r, SMALL_RELU.replace("class Model(", "class ModelNew("), baseline=True)
        assert res["verdict"] == "pass" and res["staging"] == {"candidate": "ipc", "baseline": "ipc"}, res
        size = r._processes.baseline.shared.nbytes
        assert size <= MAX_CALLS * r.max_call_bytes + (1 << 20) < processes.SHARED_BYTES, size


def test_a_shared_buffer_that_cannot_be_exported_leaves_the_region(staged_matmul_runner, monkeypatch):
    """A buffer made but refused a descriptor (the driver's export failed):
    the worker starts without one, staged through the region (said why),
    and the buffer is freed at once."""
    import types
    closed = []

    def refused():
        raise OSError("export refused")

    monkeypatch.setattr(staged_matmul_runner._processes, "_shared_buffer", lambda: (types.SimpleNamespace(
        tensor=torch.zeros(1 << 20, dtype=torch.uint8), nbytes=1 << 20, export=refused,
        close=lambda: closed.append(1), lock=threading.Lock()), None))
    res = run(staged_matmul_runner, TALL_MATMUL.replace("class Model(", "class ModelNew("), baseline=False)
    assert res["verdict"] == "pass", res
    assert res["staging"]["candidate"] == "host (the shared buffer could not be exported: export refused)"
    assert closed, "the buffer was not freed"


def test_a_buffer_refused_for_lack_of_memory_is_refused_for_that_worker_only(tmp_path_factory, monkeypatch):
    """Out of device memory (another process filled the GPU) is passing:
    that worker is staged through the region, and the next one gets a
    buffer again; a refusal that lasts (a driver without the calls) is
    kept for every later worker of the Runner."""
    from kreward.kernelbench import cuda_ipc, processes
    with cpu_runner(tmp_path_factory, written(tmp_path_factory, "tall_matmul.py", TALL_MATMUL)) as r:
        r.staged = True
        real, refusals = processes.new_buffer, []

        def new_buffer(torch_, device, nbytes):
            if refusals:
                raise refusals.pop()
            return real(torch_, device, nbytes)

        monkeypatch.setattr(processes, "new_buffer", new_buffer)
        honest = TALL_MATMUL.replace("class Model(", "class ModelNew(")
        refusals.append(cuda_ipc.IpcError("cuMemCreate: CUDA error 2 (out of memory)", 2))
        res = run(r, honest, baseline=False)
        assert res["verdict"] == "pass" and "out of memory" in res["staging"]["candidate"], res
        assert r.ipc_why is None
        assert run(r, honest, baseline=False)["staging"]["candidate"] == "ipc"
        refusals.append(AttributeError("function 'cuMemCreate' not found"))
        assert run(r, honest, baseline=False)["staging"]["candidate"].startswith("host (no shared")
        assert run(r, honest, baseline=False)["staging"]["candidate"] == f"host ({r.ipc_why})"


def test_only_masked_bytes_reach_a_workers_shared_buffer(staged_matmul_runner, monkeypatch):
    """A worker reads its shared buffer whenever it likes (a thread, a
    kernel polling it), so the inputs are made and masked in memory of the
    caller's own and only the masked chunk is copied there (helper-35: made
    in the shared buffer itself, a batch's plain values sat there until the
    chunk was masked). Every write of plain values (stage_call) and every
    unmasking or masking (mask) is checked to land elsewhere."""
    from kreward.kernelbench import transfer
    made = _shared_buffer_on_the_cpu(staged_matmul_runner, monkeypatch)
    touched = []

    def outside(t):
        return all(not (b.tensor.data_ptr() <= t.data_ptr() < b.tensor.data_ptr() + b.nbytes)
                   for b in made)

    def stage_call(stage, *a, **kw):
        touched.append(("stage_call", outside(stage)))
        return real_stage_call(stage, *a, **kw)

    def mask(buf, *a, **kw):
        touched.append(("mask", outside(buf)))
        return real_mask(buf, *a, **kw)

    real_stage_call, real_mask = transfer.stage_call, transfer.mask
    monkeypatch.setattr(transfer, "stage_call", stage_call)
    monkeypatch.setattr(transfer, "mask", mask)
    res = run(staged_matmul_runner, TALL_MATMUL.replace("class Model(", "class ModelNew("), baseline=False)
    assert res["verdict"] == "pass", res
    assert made and {w for w, _ in touched} == {"stage_call", "mask"}, touched
    assert all(ok for _, ok in touched), [w for w, ok in touched if not ok]
    assert any(b.tensor.any() for b in made)  # the masked chunks did go there


def test_a_worker_that_says_it_staged_from_the_shared_buffer_is_not_believed(
        staged_matmul_runner, monkeypatch):
    """The worker's "ok" to a stage from the shared buffer is the
    candidate's to forge: it then computes on whatever its buffer held, and
    the checks say so (the same as skipping a stage from the region)."""
    _shared_buffer_on_the_cpu(staged_matmul_runner, monkeypatch)
    res = run(staged_matmul_runner, SKIP_THE_STAGE, baseline=False)
    assert res["verdict"] == "wrong", res


# ------------------------------------- outputs back through the shared buffer
@pytest.fixture(scope="module")
def staged_relu_runner(tmp_path_factory):
    """The relu (64 MB outputs) staged as on a GPU, with shared buffers of
    1 MiB: a checked call's outputs come back through the worker's shared
    buffer in 64 pieces."""
    from kreward.kernelbench import processes
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(processes, "SHARED_BYTES", 1 << 20)
        with cpu_runner(tmp_path_factory, KB / "level1" / "01_relu.py") as r:
            r.staged = True
            yield r


def _requests(monkeypatch):
    """Every request any worker is sent from now on, in order."""
    from kreward.kernelbench import worker_process
    sent = []

    def logging(real):
        def request(self, obj, *a, **kw):
            sent.append(dict(obj))
            return real(self, obj, *a, **kw)
        return request

    for name in ("request", "request_timed"):
        real = getattr(worker_process.WorkerProcess, name)
        monkeypatch.setattr(worker_process.WorkerProcess, name, logging(real))
    return sent


def test_checked_outputs_come_back_through_the_shared_buffer_in_pieces(staged_relu_runner, monkeypatch):
    """A GPU worker's checked outputs (64 MB a call here) are not written on
    the pipe (21 s a side for level2/1_Conv2D_ReLU_BiasAdd upstream on the
    H200): fetch says what they are, fetch_piece copies each piece into the
    shared buffer, the caller copies it out into memory of its own and
    checks that. Both sides fetch alike; the honest relu passes."""
    sent = _requests(monkeypatch)
    res = run(staged_relu_runner, "import torch\nclass ModelNew(torch.nn.Module):\n"
              "    def forward(self, x):\n        return torch.relu(x)\n", baseline=True)
    assert res["verdict"] == "pass", res
    assert res["staging"] == {"candidate": "ipc", "baseline": "ipc"}, res["staging"]
    fetches = [q for q in sent if q["op"] == "fetch"]
    pieces = [q for q in sent if q["op"] == "fetch_piece"]
    assert fetches and all(q.get("ipc") == {"bytes": 1 << 20} for q in fetches), fetches[:2]
    # every fetch's output copied from its start, in pieces of the buffer's
    # size at most; the file's own size (64 MB) in 64 of them
    assert sum(q["at"] == 0 for q in pieces) == len(fetches), (len(pieces), len(fetches))
    assert all(q["n"] <= 1 << 20 for q in pieces)
    assert [q["at"] for q in pieces[:3]] == [0, 1 << 20, 2 << 20]
    assert max(q["at"] for q in pieces) == 63 << 20


FORGED_PIECE = """
import gc, torch, torch.nn as nn
_obj = [o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "fetch_piece")][0]
_obj.fetch_piece = lambda req: {{}}   # "copied": the buffer keeps what it held
{extra}
class ModelNew(nn.Module):
    def forward(self, x): return torch.relu(x)
"""
# the right bytes of the first piece, put there ahead by the candidate: the
# caller still reads the same buffer for every piece
AHEAD = """
_real_fetch = _obj.fetch
def _fetch(req):
    reply, blobs = _real_fetch(req)
    if _obj.fetched and _obj.fetched[0] is not None:
        _obj.ipc.tensor[:1 << 20].copy_(_obj.fetched[0][:1 << 20])
    return reply, blobs
_obj.fetch = _fetch
"""


@pytest.mark.parametrize("extra", ["", AHEAD], ids=["stale", "first_piece_ahead"])
def test_a_worker_that_says_it_copied_a_piece_is_not_believed(staged_relu_runner, extra):
    """fetch_piece's "ok" is the candidate's to forge: the caller then reads
    whatever the buffer held (the last masked inputs, or one right piece
    put there ahead for every piece), and the outputs are wrong."""
    res = run(staged_relu_runner, FORGED_PIECE.format(extra=extra), baseline=False)
    assert res["verdict"] == "wrong", res


IPC_CLAIM = """
import gc, torch, torch.nn as nn
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "fetch"):
        def _fetch(req, _real=_obj.fetch):
            reply, blobs = _real(req)
            {change}
            return reply, blobs
        _obj.fetch = _fetch

class ModelNew(nn.Module):
    def forward(self, x): return torch.relu(x)
"""


@pytest.mark.parametrize("change,why", [
    ('reply["ipc_bytes"] = 10 ** 13', "no valid ipc_bytes"),
    ('reply["outputs"][0]["nbytes"] *= 2; reply["ipc_bytes"] *= 2', "no valid outputs"),
    ('reply["outputs"][0]["shape"] = [4096 * 2, 4096]; reply["outputs"][0]["nbytes"] *= 2; '
     'reply["ipc_bytes"] *= 2', "has shape (8192, 4096)"),
], ids=["10TB", "inconsistent", "other_shape"])
def test_an_ipc_fetch_reply_is_checked_before_anything_is_allocated(staged_relu_runner, change, why):
    """What an ipc fetch says of its outputs is checked as a payload's
    description is (worker_process.check_reply), and each output's shape
    against the reference's before the caller allocates its copy: a
    candidate cannot make the trainer allocate what it claims."""
    res = run(staged_relu_runner, IPC_CLAIM.format(change=change), baseline=False)
    assert res["verdict"] in ("crash", "wrong") and res["reward"] == 0, res  # judged
    assert why in res["feedback"], res


@pytest.mark.parametrize("name", LAZY)
def test_outputs_computed_when_fetched_through_the_shared_buffer_fail_the_commitment(
        staged_relu_runner, name):
    """The lazy cheats (outputs computed when fetched) against the ipc
    fetch: what comes through the shared buffer is checked against the
    commitment the batch made inside the clock."""
    res = run(staged_relu_runner, (RELU / name).read_text(), baseline=False)
    assert res["verdict"] == "wrong" and "after the batch" in (res["feedback"] or ""), res

FILLS_ITS_REQUEST_PIPE = """
import gc, os, sys, time, torch, torch.nn as nn
_obj = [o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "drop")][0]
def _drop(req, _o=_obj):
    fd = os.open("/proc/self/fd/%d" % int(sys.argv[1]), os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:
            os.write(fd, b" " * 4096)   # the caller's next request finds no room
    except BlockingIOError:
        pass
    _o.reply({{"ok": True}})
    time.sleep(10 ** 6)                 # and nothing reads it again
_obj.drop = _drop
class ModelNew(nn.Module):
    def forward(self, x): return torch.relu(x)
"""


def test_a_worker_that_stops_reading_its_requests_meets_the_deadline(tmp_path_factory):
    """helper-37: a worker can open its own request pipe for writing (by
    /proc/self/fd), fill it, answer and stop reading: the caller's next
    request's write blocked for good, past every deadline. The pipe does
    not block now: the write waits within the request's timeout and the
    evaluation's limit."""
    with Runner(import_problem(str(KB / "level1" / "01_relu.py")), "cpu", spare=False,
                cache_dir=str(tmp_path_factory.mktemp("ext")), timeout_s=120, call_timeout_s=30,
                eval_timeout_s=15) as r:
        t0 = time.monotonic()
        res = run(r, FILLS_ITS_REQUEST_PIPE.format(), baseline=False)
        took = time.monotonic() - t0
    assert res["verdict"] == "timeout" and "eval_timeout_s" in res["feedback"], res
    assert took < 15 + 10, took


PIPE_REPLY_SAYS_IPC = """
import gc, torch, torch.nn as nn
_obj = [o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "fetch")][0]
def _fetch(req, _real=_obj.fetch):
    reply, blobs = _real(req)
    if "ipc" not in req:   # asked for a payload: none, and "the bytes went through the buffer"
        reply["ipc_bytes"] = sum(m.get("nbytes", 0) for m in reply["outputs"])
        return reply, []
    return reply, blobs
_obj.fetch = _fetch
class ModelNew(nn.Module):
    def forward(self, x): return torch.relu(x) * 0 + 7
"""


def test_a_reply_through_the_buffer_unasked_is_refused(relu_runner):
    """helper-37: a fetch over the pipe answered with ipc_bytes and no
    payload left the caller building the outputs from its own memory (its
    feedback printed a number of the trainer's heap). ipc_bytes is taken
    only when the request asked for it."""
    res = run(relu_runner, PIPE_REPLY_SAYS_IPC, calls=4)
    assert res["verdict"] == "crash" and "no valid ipc_bytes" in res["feedback"], res


def test_an_output_of_many_dimensions_is_refused_at_once():
    """helper-37: _outputs_fit multiplied out any number of dimensions (a 16
    MB line holds ~800,000: minutes of the caller's CPU); more than MAX_DIMS
    is refused before any product."""
    from kreward.kernelbench import worker_process as wp
    shape = [2 ** 62] * 200_000
    reply = {"ok": True, "outputs": [{"shape": shape, "dtype": "float32", "nbytes": 4}],
             "input_digest": "x", "bytes": 4}
    t0 = time.monotonic()
    with pytest.raises(wp.WorkerProtocolError, match="no valid outputs"):
        wp.check_reply("fetch", reply, 1 << 20)
    assert time.monotonic() - t0 < 1.0
    ok = {"ok": True, "outputs": [{"shape": [1] * wp.MAX_DIMS, "dtype": "float32", "nbytes": 4}],
          "input_digest": "x", "bytes": 4}
    wp.check_reply("fetch", ok, 1 << 20)

SHRINK_THE_SHARED_BUFFER = """
import os, stat, torch, torch.nn as nn
_seen = 0
for _fd in range(3, 1024):   # (the sandbox refuses listing /proc/self/fd)
    try:
        _st = os.fstat(_fd)
    except OSError:
        continue
    if not stat.S_ISREG(_st.st_mode) or _st.st_size != 1 << 20:   # the shared buffer's size
        continue
    _seen += 1
    try:
        os.ftruncate(_fd, 0)
    except OSError:
        continue   # sealed: refused
    os.ftruncate(_fd, _st.st_size)   # (put back at once: the test's process must live)
    raise RuntimeError("shrank the shared buffer")
if not _seen:
    raise RuntimeError("found no shared buffer to shrink")
class ModelNew(nn.Module):
    def forward(self, x): return torch.relu(x)
"""


def test_a_candidate_cannot_shrink_the_shared_buffer_under_the_caller(staged_relu_runner):
    """On the CPU the shared buffer is a memfd the worker's mapping keeps a
    descriptor of: shrunk, the caller's next copy into or out of it would
    SIGBUS the trainer (helper-37). It is sealed at its size, as the input
    region is: the candidate's ftruncate fails and the relu passes."""
    res = run(staged_relu_runner, SHRINK_THE_SHARED_BUFFER, baseline=False)
    assert res["verdict"] == "pass", (res["verdict"], res["feedback"])

def test_a_candidate_cannot_shrink_the_region_under_the_caller(tall_matmul_runner):
    """The worker holds a descriptor of the region (Python's mmap keeps
    one): shrinking the memfd made the caller's next write into its own
    mapping SIGBUS, killing the trainer. The memfd is sealed at its size:
    the candidate's ftruncate and resize fail, and the evaluation ends
    normally (the honest matmul passes)."""
    res = run(tall_matmul_runner, SHRINK_THE_REGION, baseline=False)
    assert res["verdict"] == "pass", res


def test_the_calls_checked_come_from_the_os():
    """The calls of a batch that are checked are drawn by the OS's
    generator, not by the one whose outputs (the input seeds) the worker
    sees and could run forward; without a seed= the seeds are the OS's too."""
    import random
    from kreward.kernelbench import timing
    assert isinstance(timing._PICKS, random.SystemRandom)


FORGED_LOAD = """
import json, os, sys, torch, torch.nn as nn
os.write(int(sys.argv[2]), (json.dumps({"ok": True, "compile_seconds": 0, "cached": False, "hash": "x",
                                        "sandbox": {"applied": True},
                                        "isolation": {"applied": False}}) + "\\n").encode())
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def test_a_forged_load_reply_never_escapes_evaluate(relu_runner):
    """A load reply the checks let through (a refusal without its why) used
    to raise KeyError out of evaluate."""
    res = run(relu_runner, FORGED_LOAD, calls=4)
    assert res["verdict"] in ("crash", "wrong", "compile_error") and res["reward"] == 0, res
