"""Candidates in flight on a GPU (marked gpu; the CPU half is
test_in_flight.py): what stands between `in_flight` and being the default
(docs/kernelbench.md, "Several candidates in flight per GPU").

Four in flight on one lane, on one problem: honest candidates, every
deferral of test_attacks_gpu.py, and a neighbour that keeps the GPU busy
from a thread of its own while the others are verified and timed. Every
report comes back once and in order; no cheat earns more than the honest
candidate beside it; and the honest ones are either timed as honest (the
Model as its own candidate near 1) or not judged at all (the gate's idle
probe saw the neighbour's queued work: the environment's error, tried
again), never a number the neighbour bent."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")

from kreward.problems import KernelBenchProblem  # noqa: E402
from kreward.kernelbench.lanes import RunnerLane  # noqa: E402
from kreward.kernelbench.scheduler import Scheduler  # noqa: E402

from .test_attacks import _IN_GO  # noqa: E402
from .test_attacks_gpu import DEFERRED  # noqa: E402
from .test_in_flight import _collect  # noqa: E402

KB = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench"

HONEST = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n"
          "        return a @ b\n")

# right outputs; outside its own timed batches a thread of its own keeps
# ~40 ms of matmuls queued on a stream of its own, whoever is being timed
HOG = _IN_GO + """
import threading, torch, torch.nn as nn
_started = []
def _hog(device):
    side = torch.cuda.Stream(device=device)
    x = torch.randn(4096, 4096, device=device)
    with torch.cuda.stream(side):
        while True:
            for _ in range(40):
                x = (x @ x).clamp_(-1, 1)
            side.synchronize()
class ModelNew(nn.Module):
    def forward(self, a, b):
        if not _started and not _in_go():
            _started.append(threading.Thread(target=_hog, args=(a.device,), daemon=True))
            _started[0].start()
        return a @ b
"""


@pytest.mark.gpu
def test_attacks_and_a_gpu_hog_in_flight_earn_nothing_and_bend_no_honest_time(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    problem = KernelBenchProblem(str(KB / "level1" / "13_matmul_square.py"))
    sources = {"honest": HONEST, "hog": HOG, **DEFERRED, "honest again": HONEST,
               "the Model": (KB / "level1" / "13_matmul_square.py").read_text().replace(
                   "class Model(", "class ModelNew(")}
    lane = RunnerLane("cuda:0", {"cache_dir": str(tmp_path), "timeout_s": 300,
                                 "call_timeout_s": 60}, in_flight=4)
    with Scheduler({"cuda:0": lane}, in_flight=4) as s:
        tickets = [s.submit(problem, src, {"seed": 1}) for src in sources.values()]
        got = _collect(s, timeout=900)
    assert [t for t, _ in got] == tickets, "a report missing, twice or out of order"
    res = dict(zip(sources, (r for _, r in got)))
    for name, r in res.items():
        print(name, {k: r.get(k) for k in ("verdict", "speedup", "reward", "feedback")})
    judged = {n: r for n, r in res.items() if r["verdict"] != "error"}
    for name, r in res.items():
        if r["verdict"] == "error":  # not judged: the environment's, said why
            assert "idle" in (r.get("feedback") or "") or "lane" in (r.get("feedback") or ""), r
    honest = [judged[n]["speedup"] for n in ("honest", "honest again") if n in judged]
    assert honest, "no honest candidate was judged"
    for n in ("honest", "honest again", "the Model"):
        if n in judged:
            assert judged[n]["verdict"] == "pass", judged[n]
            assert 0.8 <= judged[n]["speedup"] <= 1.25, (n, judged[n]["speedup"])
    for name in DEFERRED:
        if name in judged:
            r = judged[name]
            assert r["verdict"] == "wrong" or (r["speedup"] or 0) < 1.2 * max(honest), (name, r)
