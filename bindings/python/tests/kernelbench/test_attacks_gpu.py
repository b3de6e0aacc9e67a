"""On a GPU (marked gpu): a candidate that ends a timed batch with its
kernels still queued (the worker's synchronisation replaced through gc)
gets no speed for it: the runner checks go's commitment, and reading the
sums back waits for the queued kernels. Work done before the clock (in
prepare, or in a thread as the inputs arrive) gets none either: the inputs
come from the caller, masked until go. The CPU half is
test_attacks.py."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")

from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402

from .test_attacks import _IN_GO  # noqa: E402 - the timed batch's marker, as the CPU half finds it

KB = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench"


@pytest.mark.gpu
def test_a_batch_ended_before_its_kernels_gets_no_speed_credit(tmp_path):
    imp = import_problem(str(KB / "level1" / "13_matmul_square.py"))
    src = (KB / "candidates" / "open" / "level1_13_matmul_skip_sync.py").read_text()
    with Runner(imp, "cuda", cache_dir=str(tmp_path), spare=False) as runner:
        honest = runner.evaluate((KB / "candidates" / "level1_13_matmul_square" / "slow_cuda.py").read_text(), seed=1)
        res = runner.evaluate(src, seed=1)
    print({k: res.get(k) for k in ("verdict", "feedback", "time_us", "baseline_us", "speedup", "reward")},
          {k: honest.get(k) for k in ("time_us", "speedup")})
    # the same kernel: it must not time faster than the honest candidate
    assert res["reward"] <= max(honest["reward"], 0.5) and (res.get("speedup") or 0) < 1.2 * honest["speedup"], res


@pytest.mark.gpu
def test_the_commitment_is_one_pass_on_the_gpu():
    """inputs._mixed_sums takes the Triton kernel on a GPU (after warm, as a
    worker does before its seal), with torch's steps' bits, and costs about
    one read of the outputs: printed against the steps for 64 MB."""
    from kreward.kernelbench import inputs
    inputs.warm("cuda")
    assert inputs._TRITON["kernel"], "the commitment fell back to torch's steps on the GPU"
    gen = torch.Generator(device="cuda").manual_seed(3)
    for shape, lo in (((5000,), 0), ((3, 777), 16), ((1 << 23,), 1 << 24)):
        w = torch.randint(-2**62, 2**62, shape, dtype=torch.int64, device="cuda", generator=gen)
        a, b = inputs._torch_mixed_sums(w, lo), inputs._mixed_sums(w, lo)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (shape, lo)
    w = torch.randint(-2**62, 2**62, (1 << 23,), dtype=torch.int64, device="cuda", generator=gen)
    times = {}
    for name, f in (("triton", inputs._mixed_sums), ("torch steps", inputs._torch_mixed_sums)):
        f(w, 0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            f(w, 0)
        end.record()
        torch.cuda.synchronize()
        times[name] = start.elapsed_time(end) / 20 * 1e3
    print({k: f"{v:.1f} us for 64 MB" for k, v in times.items()})
    assert times["triton"] < times["torch steps"]


def _cpu_attacks():
    from . import test_attacks as cpu
    return cpu


# Where each CPU cheat's work before the clock ends, and what makes it
# finished work on a GPU: a kernel only queued there would still run inside
# the caller's clock (go's final synchronisation waits for it), so a cheat
# that does not wait for its own work would prove nothing either way.
_WAIT_FOR_THE_GPU = {
    "PRECOMPUTE_IN_PREPARE": [("            return r\n",
                               "            torch.cuda.synchronize()\n            return r\n")],
    "SEEDS_IN_PREPARE": [('W.make_inputs(lay, seed, "cpu")', "W.make_inputs(lay, seed, args[0].device)"),
                         ("            return r\n",
                          "            torch.cuda.synchronize()\n            return r\n")],
    "WATCH_THE_REGION": [("                    _done[id(args[0])] = args[0] @ args[1]\n",
                          "                    _done[id(args[0])] = args[0] @ args[1]\n"
                          "                torch.cuda.synchronize()\n")],
    "PIPELINE_OVER_THE_WRITES": [("        ev.set()", "        torch.cuda.synchronize()\n        ev.set()")],
}


def _gpu_cheat(name):
    """The CPU cheat `name`, waiting for its own GPU work before the clock."""
    src = getattr(_cpu_attacks(), name)
    for old, new in _WAIT_FOR_THE_GPU[name]:
        assert src.count(old) == 1, (name, old)
        src = src.replace(old, new)
    return src


def test_each_gpu_cheat_waits_for_its_work():
    """(CPU) the rewrites above still find their places in the CPU cheats."""
    for name in _WAIT_FOR_THE_GPU:
        assert "torch.cuda.synchronize()" in _gpu_cheat(name)


@pytest.fixture(scope="module")
def big_matmul(tmp_path_factory):
    """A 4096 matmul: a few ms a call on the H200, so work moved out of the
    clock shows as a large speedup."""
    path = tmp_path_factory.mktemp("problem") / "matmul_4096.py"
    path.write_text(_cpu_attacks().TALL_MATMUL.replace("(64, 16384)", "(4096, 4096)")
                    .replace("(16384, 64)", "(4096, 4096)"))
    return import_problem(str(path))


@pytest.mark.gpu
def test_the_prepare_cheat_pays_when_the_worker_makes_the_inputs(big_matmul, tmp_path):
    """The control: with inputs="worker" (prepare makes the batch's inputs
    from the seeds, untimed) the cheat below computes the outputs there. If
    this stops paying, the test after it proves nothing."""
    cheat = _gpu_cheat("PRECOMPUTE_IN_PREPARE")
    with Runner(big_matmul, "cuda", cache_dir=str(tmp_path), spare=False, inputs="worker") as runner:
        res = runner.evaluate(cheat, seed=3, batches=3)
    print({k: res.get(k) for k in ("verdict", "speedup", "time_us", "baseline_us", "prepare_us")})
    assert res["verdict"] == "pass" and res["speedup"] > 3.0, res


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["PRECOMPUTE_IN_PREPARE", "WATCH_THE_REGION", "SEEDS_IN_PREPARE",
                                  "PIPELINE_OVER_THE_WRITES"])
def test_work_done_before_the_clock_gets_no_speedup_on_the_gpu(big_matmul, tmp_path, name):
    """The CPU's cheats on work before the clock (test_attacks.py)
    on a GPU, by default: the caller makes the inputs, the worker stages
    them masked into device memory (`stage`, untimed), the key comes with
    go."""
    with Runner(big_matmul, "cuda", cache_dir=str(tmp_path), spare=False) as runner:
        assert runner.inputs_from == "caller" and runner.staged
        results = [runner.evaluate(_gpu_cheat(name), seed=3, batches=3)
                   for _ in range(2)]
        honest = runner.evaluate(_cpu_attacks().TALL_MATMUL.replace("class Model(", "class ModelNew("),
                                 seed=3, batches=3)
    print([(r["verdict"], r.get("speedup"), r.get("prepare_us")) for r in results],
          {k: honest.get(k) for k in ("verdict", "speedup", "prepare_us", "baseline_prepare_us")})
    assert honest["verdict"] == "pass", honest
    assert all(r["verdict"] != "pass" or r["speedup"] < 2.0 for r in results), results


# Integrity round 3, item 1: in a timed batch the forward returns an output
# the GPU has not written yet, the writing arranged for later: on another
# stream behind a sleep, on another stream the candidate makes current
# for everything after it, or launched by a thread a little later.
DEFERRED = {
    "side_stream_after_a_sleep": _IN_GO + """
import torch, torch.nn as nn
_side = None
class ModelNew(nn.Module):
    def forward(self, a, b):
        global _side
        if not _in_go():
            return a @ b
        _side = _side or torch.cuda.Stream()
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        _side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side):
            torch.cuda._sleep(2_000_000)
            torch.matmul(a, b, out=out)
        return out
""",
    "current_stream_switched": _IN_GO + """
import torch, torch.nn as nn
_side = None
class ModelNew(nn.Module):
    def forward(self, a, b):
        global _side
        if not _in_go():
            return a @ b
        _side = _side or torch.cuda.Stream()
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        _side.wait_stream(torch.cuda.current_stream())
        torch.cuda.set_stream(_side)  # and left so: the worker's sums would queue behind it
        torch.cuda._sleep(2_000_000)
        torch.matmul(a, b, out=out)
        return out
""",
    "thread_launches_later": _IN_GO + """
import threading, torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _in_go():
            return a @ b
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        def later():
            torch.matmul(a, b, out=out)
        threading.Timer(0.001, later).start()
        return out
""",
    # a host function (cuLaunchHostFunc) holding a side stream: the kernels
    # queued behind it run when it returns, after forward did
    "host_function_holds_a_stream": _IN_GO + """
import ctypes, time, torch, torch.nn as nn
_cuda = ctypes.CDLL("libcuda.so.1")
_HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_hold = _HOSTFN(lambda _: time.sleep(0.002))
_side = None
class ModelNew(nn.Module):
    def forward(self, a, b):
        global _side
        if not _in_go():
            return a @ b
        _side = _side or torch.cuda.Stream()
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        _side.wait_stream(torch.cuda.current_stream())
        _cuda.cuLaunchHostFunc(ctypes.c_void_p(_side.cuda_stream), _hold, None)
        with torch.cuda.stream(_side):
            torch.matmul(a, b, out=out)
        return out
""",
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(DEFERRED))
def test_work_deferred_past_the_call_gets_no_speed(tmp_path, name):
    """Each way is either wrong (the commitment, made once every stream is
    quiet, summed outputs not yet written) or timed with its work inside
    the clock: no more than the honest candidate beside it earns."""
    imp = import_problem(str(KB / "level1" / "13_matmul_square.py"))
    with Runner(imp, "cuda", cache_dir=str(tmp_path), spare=False) as runner:
        honest = runner.evaluate("import torch\nclass ModelNew(torch.nn.Module):\n"
                                 "    def forward(self, a, b):\n        return a @ b\n", seed=1)
        res = runner.evaluate(DEFERRED[name], seed=1)
    print(name, {k: res.get(k) for k in ("verdict", "feedback", "speedup", "reward")},
          {k: honest.get(k) for k in ("speedup", "reward")})
    assert res["verdict"] == "wrong" or (res["speedup"] or 0) < 1.2 * honest["speedup"], res
