"""On a GPU (marked gpu): kernel_trace.py sees what torch.profiler sees.
One call (a cuBLAS matmul, torch's elementwise kernels, a fill, a memset,
device-to-device and device-to-host copies, a Triton kernel, a CUDA graph's
replay) traced by both in a fresh process: the same names, the same counts,
GPU times within measurement noise. And a candidate through the Runner is
attributed by CUPTI, its own kernel found. The CPU half is
test_kernel_trace.py."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")

ROOT = pathlib.Path(__file__).resolve().parents[4]
KB = ROOT / "examples" / "kernelbench"

BOTH = r"""
import json, os, sys, time
import torch, triton, triton.language as tl
sys.path.insert(0, sys.argv[1])
from kreward.kernelbench import kernel_trace

@triton.jit
def double_it(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)

a = torch.randn(512, 512, device="cuda")
b = torch.randn(512, 512, device="cuda")
buf = torch.empty(1 << 20, device="cuda")
g_in = torch.randn(4096, device="cuda")
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    torch.sigmoid(g_in)
    with torch.cuda.graph(g):
        g_out = torch.sigmoid(g_in) + 1
torch.cuda.current_stream().wait_stream(s)

def call():
    c = torch.relu(a @ b)
    torch.zeros(1000, device="cuda")          # a fill
    buf.zero_()                               # torch's memset path or a fill
    d = c.clone()                             # a device-to-device copy
    y = torch.empty_like(d)
    double_it[(triton.cdiv(d.numel(), 1024),)](d, y, d.numel(), B=1024)
    g.replay()
    y.sum().cpu()                             # a device-to-host copy
    torch.cuda.synchronize()

call()
torch.cuda.synchronize()
t = kernel_trace.KernelTrace(torch_dir=os.path.dirname(torch.__file__))
t0 = time.perf_counter()
ours = t.run(call)
ours_s = time.perf_counter() - t0
from torch.profiler import ProfilerActivity, profile
t0 = time.perf_counter()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    call()
theirs = {}
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        k = theirs.setdefault(e.name, [0, 0.0])
        k[0] += 1
        k[1] += getattr(e, "device_time_total", None) or e.cuda_time_total
theirs_s = time.perf_counter() - t0
print(json.dumps({"ours": ours, "theirs": [{"name": n, "calls": c, "us": us} for n, (c, us) in theirs.items()],
                  "ours_s": ours_s, "theirs_s": theirs_s, "lib": t.path}))
"""


@pytest.mark.gpu
def test_cupti_sees_the_kernels_torch_profiler_sees(tmp_path):
    script = tmp_path / "both.py"  # (Triton reads a @jit function's source from its file)
    script.write_text(BOTH)
    r = subprocess.run([sys.executable, str(script), str(ROOT / "bindings" / "python")], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    ours = {k["name"]: k for k in got["ours"]}
    theirs = {k["name"]: k for k in got["theirs"]}
    print(f"libcupti {got['lib']}: ours {got['ours_s']:.3f} s, torch.profiler {got['theirs_s']:.3f} s")
    for name in sorted(set(ours) | set(theirs)):
        print(f"  {name[:90]:<90} {ours.get(name, {}).get('calls')!s:>4} {theirs.get(name, {}).get('calls')!s:>4}")
    assert set(ours) == set(theirs)
    for name, k in ours.items():
        assert k["calls"] == theirs[name]["calls"], name
        # the same records' durations: equal but for the profiler's rounding
        assert abs(k["us"] - theirs[name]["us"]) <= max(0.1 * theirs[name]["us"], 2.0), (name, k, theirs[name])
    assert any("double_it" in n for n in ours) and len(ours) >= 5, sorted(ours)
    assert any(n.startswith("Memcpy DtoH") for n in ours) and any(n.startswith("Memcpy DtoD") for n in ours)


@pytest.mark.gpu
def test_a_candidate_is_attributed_by_cupti_through_the_runner(tmp_path):
    """An honest Triton softmax: its kernel found by the CUPTI trace, as by
    torch.profiler (Runner(attribution="torch")); the decoy kernel beside
    torch's matmul still mostly_torch."""
    from kreward.kernelbench import import_problem
    from kreward.kernelbench.runner import Runner

    imp = import_problem(str(KB / "level1" / "05_softmax.py"))
    src = (KB / "candidates" / "level1_05_softmax" / "honest_triton.py").read_text()
    with Runner(imp, "cuda", cache_dir=str(tmp_path / "a"), spare=False) as runner:
        res = runner.evaluate(src, seed=5)
        runner.attribution = "torch"
        old = runner.evaluate(src, seed=5)
    for r in (res, old):
        print({k: r.get(k) for k in ("verdict", "attribution_via", "custom_share", "phases_s", "notes")})
    assert res["verdict"] == "pass" and res["attribution_via"] == "cupti", res
    assert res["torch_fallback"] is False and res["kernels"]["custom"], res
    assert old["attribution_via"] == "torch.profiler" and not old["torch_fallback"], old
    assert [k["name"] for k in res["kernels"]["custom"]] == [k["name"] for k in old["kernels"]["custom"]]
    assert res["phases_s"]["attribute"] < old["phases_s"]["attribute"]

    imp = import_problem(str(KB / "level1" / "13_matmul_square.py"))
    decoy = (KB / "candidates" / "level1_13_matmul_square" / "cheat_decoy_kernel.py").read_text()
    with Runner(imp, "cuda", cache_dir=str(tmp_path / "b"), spare=False) as runner:
        res = runner.evaluate(decoy, seed=5)
    print({k: res.get(k) for k in ("verdict", "attribution_via", "custom_share", "mostly_torch", "reward")})
    assert res["attribution_via"] == "cupti" and res["mostly_torch"] is True, res


@pytest.mark.gpu
def test_a_decoy_grown_only_when_traced_gets_no_attribution(tmp_path):
    """The candidate that spots the traced call and launches its decoy
    there thousands of times (candidates/open/level1_13_matmul_decoy_when_traced.py):
    its shares are refused, so its speed credit is floored like the plain
    decoy's, never more."""
    from kreward.kernelbench import import_problem
    from kreward.kernelbench.runner import Runner

    imp = import_problem(str(KB / "level1" / "13_matmul_square.py"))
    src = (KB / "candidates" / "open" / "level1_13_matmul_decoy_when_traced.py").read_text()
    plain = (KB / "candidates" / "level1_13_matmul_square" / "cheat_decoy_kernel.py").read_text()
    with Runner(imp, "cuda", cache_dir=str(tmp_path), spare=False) as runner:
        res = runner.evaluate(src, seed=7)
        base = runner.evaluate(plain, seed=7)
    print({k: res.get(k) for k in ("verdict", "attribution_via", "attribution_busy_us", "time_us", "reward",
                                   "notes")})
    print({k: base.get(k) for k in ("verdict", "custom_share", "mostly_torch", "reward")})
    assert res["verdict"] == "pass" and res["torch_fallback"] is None, res
    assert any("attribution refused" in n for n in res["notes"]), res["notes"]
    assert res["reward"] <= max(base["reward"], 0.5) + 1e-9


MANY = r"""
import json, os, sys
import torch
sys.path.insert(0, sys.argv[1])
from kreward.kernelbench import kernel_trace
x = torch.randn(256, device="cuda")
torch.relu(x); torch.cuda.synchronize()
t = kernel_trace.KernelTrace(torch_dir=os.path.dirname(torch.__file__))

def call():
    for _ in range(20000):
        torch.relu(x)
    torch.cuda.synchronize()
got = t.run(call)
print(json.dumps({"kernels": got, "busy_us": t.busy_us}))
"""


@pytest.mark.gpu
def test_twenty_thousand_launches_are_all_counted():
    """Records from a long call (CUPTI may hand buffers back from its own
    thread): every launch counted, none dropped."""
    r = subprocess.run([sys.executable, "-c", MANY, str(ROOT / "bindings" / "python")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    print(got)
    assert sum(k["calls"] for k in got["kernels"]) == 20000
    assert 0 < got["busy_us"] <= sum(k["us"] for k in got["kernels"]) + 1e-6
