"""The ModelNew runner on the CPU: candidates in a worker process, checked
by the caller. The corpus' pure-torch cheats run on the CPU too; the CUDA
and Triton candidates, timing and kernel attribution need the GPU
(test_gpu.py)."""
import json
import os
import pathlib
import time

import pytest

torch = pytest.importorskip("torch", reason="the ModelNew runner needs torch")

from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402
from kreward.kernelbench.report import reward_of  # noqa: E402
from kreward.kernelbench.scoring import (MOSTLY_TORCH_SHARE, attribute, custom_kernel_names, custom_share,  # noqa: E402
                                        kernel_share, launch_luck, luck_note)

ROOT = pathlib.Path(__file__).resolve().parents[4]
KB = ROOT / "examples" / "kernelbench"
RELU = KB / "candidates" / "level1_01_relu"


@pytest.fixture(scope="module")
def relu_runner(tmp_path_factory):
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    return Runner(imp, "cpu", cache_dir=str(tmp_path_factory.mktemp("ext")), timeout_s=120, call_timeout_s=30)


def run(runner, source, **kw):
    kw = {"seed": 3, "batches": 3, "calls": 4, "checks": 2, "baseline": False, **kw}
    return runner.evaluate(source, **kw)


def test_honest_torch_candidate_passes_every_case(relu_runner):
    src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
           "        print('to stdout: must not reach the protocol')\n        return x.clamp_min(0)\n")
    res = run(relu_runner, src, baseline=True)
    assert res["verdict"] == "pass", res
    assert [c["name"] for c in res["cases"]] == ["base", "small", "odd"]
    assert res["time_us"] > 0 and res["baseline_us"] > 0 and res["speedup"] > 0
    # where the time went, in the order the phases ran
    # (the next candidate's worker started once this one loaded, its start
    # over before the timed batches: test_spare_ahead.py)
    assert list(res["phases_s"]) == ["start_and_load", "start_spare", "verify", "baseline_ready",
                                     "spare_ready", "timed", "attribute", "end_candidate",
                                     "baseline_timed"]
    assert all(v >= 0 for v in res["phases_s"].values())
    # the batches behind the medians, both sides on the same schedule
    per_batch = res["batches_us"]
    assert len(per_batch["candidate"]) == len(per_batch["baseline"]) == 3
    assert sorted(per_batch["candidate"])[1] == pytest.approx(res["time_us"], abs=1e-3)
    assert sorted(per_batch["baseline"])[1] == pytest.approx(res["baseline_us"], abs=1e-3)
    assert res["timing_mismatch"] is False
    assert res["torch_fallback"] is None  # no attribution without CUDA
    assert res["reward"] == 0.5
    # each worker's launch time, measured in its ready before any candidate
    # code; the first candidate's worker started beside the baseline's, so
    # its time says nothing of its luck (helper-33: 2x on this machine)
    lu = res["launch_us"]
    assert lu["candidate"] > 0 and lu["baseline"] > 0
    assert lu["overlapped"] is True and res["launch_luck"] is None
    again = run(relu_runner, src, baseline=True)
    lu = again["launch_us"]
    assert "overlapped" not in lu and lu["candidate"] > 0 and lu["baseline"] > 0
    assert again["launch_luck"] == pytest.approx(lu["candidate"] / lu["baseline"], rel=1e-3)


def test_a_triton_modelnew_loads(relu_runner):
    """@triton.jit reads its function's source back (inspect): the worker
    loads the candidate from a file, or every Triton ModelNew is a
    compile_error (it was, on the H200 at 67f5547). Decorating needs no GPU;
    the forward here stays on the CPU."""
    pytest.importorskip("triton", reason="needs triton to decorate a kernel")
    src = ("import torch\nimport triton\nimport triton.language as tl\n\n"
           "@triton.jit\ndef relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
           "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
           "    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=i < n), 0), mask=i < n)\n\n"
           "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
           "        assert relu_kernel.src  # decorated, with its source\n"
           "        return x.clamp_min(0)\n")
    res = run(relu_runner, src)
    assert res["verdict"] == "pass", res


@pytest.mark.parametrize("name,why", [
    ("cheat_constant.py", "differs from the reference"),
    ("cheat_cache.py", "differs from the reference"),
    ("cheat_shape_overfit.py", "case small"),
    ("cheat_skip_unchecked.py", "timed call"),
    ("cheat_write_input.py", "the inputs changed"),
])
def test_corpus_cheats_are_caught(relu_runner, name, why):
    res = run(relu_runner, (RELU / name).read_text())
    assert res["verdict"] == "wrong", res
    assert why in res["feedback"]
    assert res["reward"] == 0.0


def test_crash_hang_and_load_errors_are_verdicts(relu_runner):
    crash = "import os, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        os._exit(3)\n"
    res = run(relu_runner, crash)
    assert res["verdict"] == "crash" and "exit status 3" in res["feedback"]
    relu_runner.call_timeout_s = 3
    try:
        hang = "import time, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        time.sleep(60)\n"
        res = run(relu_runner, hang)
        assert res["verdict"] == "timeout"
    finally:
        relu_runner.call_timeout_s = 30
    res = run(relu_runner, "import torch\nraise ImportError('no such extension')\n")
    assert res["verdict"] == "compile_error" and "no such extension" in res["feedback"]
    res = run(relu_runner, "import torch\nclass Other(torch.nn.Module):\n    pass\n")
    assert res["verdict"] == "compile_error" and "no class ModelNew" in res["feedback"]


def test_an_evaluation_ends_at_its_limit_however_each_request_fits_its_own(tmp_path):
    """Each call answers well inside call_timeout_s; together they take
    longer than eval_timeout_s: the evaluation ends there, a timeout that
    says so (without the limit this candidate passes, slowly: checked by
    the same source with a longer limit)."""
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    slow = ("import time, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        time.sleep(0.7)\n        return torch.relu(x)\n")
    with Runner(imp, "cpu", cache_dir=str(tmp_path), timeout_s=120, call_timeout_s=5,
                eval_timeout_s=6, spare=False) as runner:
        t0 = time.monotonic()
        res = run(runner, slow, batches=2, calls=2, checks=1)
        took = time.monotonic() - t0
        assert res["verdict"] == "timeout", res
        assert "ran past its limit of 6 s (eval_timeout_s)" in res["feedback"]
        assert took < 6 + 5, took  # the limit, not a request's timeout after it
        runner.eval_timeout_s = 120
        res = run(runner, slow, batches=2, calls=2, checks=1)
        assert res["verdict"] == "pass", res

def test_weights_are_lifted_or_seeded(tmp_path):
    imp = import_problem(str(KB / "level2" / "01_gemm_bias_relu.py"))
    runner = Runner(imp, "cpu", cache_dir=str(tmp_path), timeout_s=120, call_timeout_s=30)
    same = ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self, i, o):\n"
            "        super().__init__()\n        self.linear = torch.nn.Linear(i, o)\n"
            "    def forward(self, x):\n        return torch.relu(self.linear(x))\n")
    res = run(runner, same)
    assert res["verdict"] == "pass" and {c["weights"] for c in res["cases"]} == {"lifted"}
    # other names: the KernelBench convention (both seeded alike) still checks it
    other = same.replace("self.linear", "self.fc")
    res = run(runner, other)
    assert res["verdict"] == "pass" and {c["weights"] for c in res["cases"]} == {"seeded"}
    assert any("seeded" in n for n in res["notes"])
    # a candidate that ignores the weights it is given fails on lifted ones
    ignore = same.replace("return torch.relu(self.linear(x))", "return torch.relu(x[:, :self.linear.out_features])")
    assert run(runner, ignore)["verdict"] == "wrong"


def test_kernel_attribution_and_the_fallback_gate():
    src = (RELU / "honest_cuda.py").read_text() + (KB / "candidates" / "level1_05_softmax" / "honest_triton.py").read_text()
    assert custom_kernel_names(src) == ["relu_kernel", "softmax_kernel"]
    kernels = [{"name": "relu_kernel(float const*, float*, long)", "calls": 1, "us": 5.0},
               {"name": "void at::native::vectorized_elementwise_kernel<4, ...>", "calls": 1, "us": 3.0}]
    mine, other = attribute(kernels, ["relu_kernel"])
    assert [k["us"] for k in mine] == [5.0] and [k["us"] for k in other] == [3.0]
    assert attribute(kernels, ["relu"])[0] == []  # a name must match whole, not as a prefix
    fast = {"verdict": "pass", "speedup": 4.0, "torch_fallback": False, "timing_mismatch": False}
    assert reward_of(fast) == 1.0
    assert reward_of(dict(fast, torch_fallback=True)) == 0.5
    assert reward_of(dict(fast, timing_mismatch=True)) == 0.5
    assert reward_of(dict(fast, verdict="wrong")) == 0.0


def test_mostly_torch_candidates_get_speed_credit_in_proportion_to_their_own_kernels():
    """The decoy: a kernel of its own launched for show (1 % of the GPU
    time) while torch does the work and takes the speedup. Its credit is
    2 % of a candidate's whose own kernels do at least half of the work."""
    decoy = [{"name": "touch_kernel", "calls": 1, "us": 2.0}]
    cublas = [{"name": "sm90_xmma_gemm_f32f32_tf32", "calls": 1, "us": 198.0}]
    assert custom_share(decoy, cublas) == 0.01 and custom_share([], []) is None
    fast = {"verdict": "pass", "speedup": 4.0, "torch_fallback": False, "timing_mismatch": False}
    assert reward_of(dict(fast, custom_share=0.01)) == 0.5 + 0.5 * 0.01 / MOSTLY_TORCH_SHARE
    assert reward_of(dict(fast, custom_share=0.25)) == 0.75
    assert reward_of(dict(fast, custom_share=MOSTLY_TORCH_SHARE)) == reward_of(dict(fast, custom_share=1.0)) == 1.0
    assert reward_of(dict(fast, custom_share=None)) == 1.0  # no kernel time seen: as before
    assert reward_of(dict(fast, speedup=0.5, custom_share=0.01)) == 0.5  # no credit to scale


def test_the_runner_marks_a_decoy_from_the_profiled_kernels():
    """evaluation.attribute_kernels on a profiled call (the attribute reply, as a GPU
    worker sends it) of the corpus's decoy cheat: a custom kernel seen, so
    no torch_fallback, but mostly torch, said in the notes, and the reward
    keeps 2 % of the speed credit."""
    import random
    import types
    from kreward.kernelbench.evaluation import attribute_kernels
    src = (KB / "candidates" / "level1_13_matmul_square" / "cheat_decoy_kernel.py").read_text()
    assert custom_kernel_names(src) == ["touch_kernel"]
    reply = {"ok": True, "kernels": [{"name": "touch_kernel", "calls": 1, "us": 2.0},
                                     {"name": "sm90_xmma_gemm_f32f32_tf32f32", "calls": 1, "us": 198.0}]}
    worker = types.SimpleNamespace(request=lambda req, timeout: (reply, b""))
    res = {"verdict": "pass", "speedup": 4.0, "timing_mismatch": False, "time_us": 210.0, "notes": []}
    attribute_kernels(worker, src, random.Random(0), res, timeout_s=1.0)
    assert res["torch_fallback"] is False and res["mostly_torch"] is True and res["custom_share"] == 0.01
    assert any(n.startswith("mostly torch: its own kernels take 1%") for n in res["notes"]), res["notes"]
    assert reward_of(res) == 0.5 + 0.5 * 0.01 / MOSTLY_TORCH_SHARE
    honest = dict(reply, kernels=[{"name": "touch_kernel", "calls": 1, "us": 150.0}])
    worker.request = lambda req, timeout: (honest, b"")
    res = {"verdict": "pass", "speedup": 4.0, "timing_mismatch": False, "time_us": 160.0, "notes": []}
    attribute_kernels(worker, src, random.Random(0), res, timeout_s=1.0)
    assert res["mostly_torch"] is False and reward_of(res) == 1.0


def test_a_cuda_graph_of_its_own_kernels_is_its_own_work():
    """A graph of the candidate's own kernels comes with copies into and out
    of its static buffers and torch.cuda.CUDAGraph.replay's two constant
    fills: counted as torch's they made it mostly torch (46 % own on the
    H200). Bytes moved or set compute nothing: they count for no one;
    torch's real work beside a decoy still does, and so do torch's copy
    kernels, which can transpose."""
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, " \
           "std::array<char*, 1ul> >(int, at::native::FillFunctor<long>, std::array<char*, 1ul>)"
    graph = [{"name": "Memcpy DtoD (Device -> Device)", "calls": 3, "us": 9.0},
             {"name": "add_kernel", "calls": 1, "us": 1.6}, {"name": "scale_kernel", "calls": 1, "us": 1.5},
             {"name": fill, "calls": 2, "us": 3.6}, {"name": "Memset (Device)", "calls": 1, "us": 0.8}]
    mine, other = attribute(graph, ["add_kernel", "scale_kernel"])
    assert custom_share(mine, other) == 1.0
    decoy = [{"name": "touch_kernel", "calls": 1, "us": 2.0}, {"name": fill, "calls": 2, "us": 3.6},
             {"name": "sm90_xmma_gemm_f32f32_tf32", "calls": 1, "us": 198.0}]
    assert custom_share(*attribute(decoy, ["touch_kernel"])) == 0.01
    transpose = [{"name": "touch_kernel", "calls": 1, "us": 2.0},
                 {"name": "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>",
                  "calls": 1, "us": 98.0}]
    assert custom_share(*attribute(transpose, ["touch_kernel"])) == 0.02


def test_a_kernel_is_its_own_by_what_it_defines_not_by_a_word_in_its_text():
    """A pure-torch candidate once claimed every at::native kernel with one
    comment (`# __global__ void native(`): names come from the string
    literals its code uses and its @triton.jit functions, never from a
    comment or a docstring, and a profiled kernel is its own only by its
    identifier, outside the libraries' namespaces and names."""
    from kreward.kernelbench.scoring import kernel_identifier
    torch_softmax = ("import torch\n# __global__ void native(\n"
                     "class ModelNew(torch.nn.Module):\n"
                     "    \"\"\"@triton.jit\n    def void(x): pass\n    __global__ void cutlass(\"\"\"\n"
                     "    def forward(self, x):\n        return torch.softmax(x, -1)\n")
    assert custom_kernel_names(torch_softmax) == []
    profiled = [{"name": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)",
                 "calls": 1, "us": 9.0},
                {"name": "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor>(int)",
                 "calls": 1, "us": 3.0}]
    assert attribute(profiled, ["native", "cunn_SoftMaxForward"], torch_softmax)[0] == []
    # a kernel named like a library's, or defined in a library's namespace, is not its own
    named_like = ('import torch\nsrc = """__global__ void vectorized_elementwise_kernel(float *x) {}\n'
                  '__global__ void sm90_xmma_gemm_f32f32(float *x) {}\n'
                  'namespace at { __global__ void relu_kernel(float *x) {} }"""\n')
    assert custom_kernel_names(named_like) == ["relu_kernel"]
    assert attribute([{"name": "void at::relu_kernel(float*)", "calls": 1, "us": 5.0}],
                     ["relu_kernel"], named_like)[0] == []
    # its own namespace is its own
    own_space = 'src = """namespace mine { __global__ void relu_kernel(float *x) {} }"""\n'
    assert attribute([{"name": "void mine::relu_kernel<float>(float*)", "calls": 1, "us": 5.0}],
                     custom_kernel_names(own_space), own_space)[0] != []
    assert kernel_identifier("relu_kernel(float const*, float*, long)") == ([], "relu_kernel")
    assert kernel_identifier("softmax_kernel") == ([], "softmax_kernel")


def test_kernel_share_says_how_launch_bound_a_call_is():
    # level2/02 on the H200: ~81 us of kernels in a ~300 us call
    kernels = [{"name": "conv", "calls": 1, "us": 51.2}, {"name": "add", "calls": 2, "us": 23.6},
               {"name": "clamp", "calls": 1, "us": 6.2}]
    assert kernel_share(kernels, 300.0) == 0.27
    assert kernel_share(kernels, 70.0) == 1.0  # one profiled call against a median: capped
    assert kernel_share(kernels, None) is None and kernel_share([], 10.0) == 0.0


def test_launch_luck_is_noted_for_launch_bound_candidates_only():
    """launch_luck: the candidate's worker's launch time over the
    baseline's (91af0ed: fresh identical processes 1.44x apart on the
    H200); noted where the call is launch-bound and the two processes
    differ by more than 15 %, either way."""
    assert launch_luck(13.0, 10.0) == 1.3
    assert launch_luck(None, 10.0) is None and launch_luck(12.0, 0) is None
    assert "1.30x the baseline's" in luck_note(1.3, 0.27)
    assert "0.80x the baseline's" in luck_note(0.8, 0.27)
    assert luck_note(1.3, 0.9) is None      # its kernels take most of a call
    assert luck_note(1.1, 0.27) is None     # within 15 %
    assert luck_note(None, 0.27) is None and luck_note(1.3, None) is None


def test_a_ready_reply_without_its_launch_time_is_refused():
    """ready's reply is the worker's own, written before any candidate code
    runs; one without a launch time (or with a negative or infinite one) is
    not a ready reply."""
    from kreward.kernelbench.worker_process import WorkerProtocolError, check_reply
    check_reply("ready", {"ok": True, "no_subreaper": None, "launch_us": 6.5}, 0)
    for bad in (None, -1.0, float("inf"), "6.5", True):
        with pytest.raises(WorkerProtocolError):
            check_reply("ready", {"ok": True, "no_subreaper": None, "launch_us": bad}, 0)


def test_manifest_names_existing_candidates():
    manifest = json.loads((KB / "candidates" / "manifest.json").read_text())
    assert sum(len(v) for v in manifest.values()) >= 12
    for problem, cands in manifest.items():
        assert (KB / problem).is_file()
        for cand, expect in cands.items():
            assert (KB / "candidates" / cand).is_file() and expect in ("pass", "torch_fallback", "mostly_torch", "wrong", "caught")


def test_a_torch_compile_baseline(tmp_path):
    """Runner(baseline="compile"): the speedup is against torch.compile of
    the reference, compiled in the baseline worker before its seal (the
    compile starts a C++ compiler here, which the seal would refuse), and
    the result says so."""
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    with Runner(imp, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300, call_timeout_s=60,
                baseline="compile", spare=False) as r:
        src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
               "        return torch.relu(x)\n")
        res = run(r, src, baseline=True)
        assert res["verdict"] == "pass", res
        assert res["baseline_kind"] == "torch.compile"
        assert res["baseline_compile_seconds"] > 0 and res["baseline_us"] > 0
        assert r._processes.baseline_facts["graphs"] >= 1  # dynamo really made a graph
    with pytest.raises(ValueError, match="eager"):
        Runner(imp, "cpu", baseline="inductor")


def test_the_eager_baseline_is_said(relu_runner):
    res = run(relu_runner, "import torch\nclass ModelNew(torch.nn.Module):\n"
              "    def forward(self, x):\n        return x.clamp_min(0)\n", baseline=True)
    assert res["baseline_kind"] == "eager" and "baseline_compile_seconds" not in res


def test_a_worker_whose_ready_failed_runs_no_source():
    """The runner sends load before it reads ready's reply; a worker whose
    ready failed (here: CUDA asked for on a machine without it) must not
    run the source then (the "auto" sandbox's fallback relies on it)."""
    if torch.cuda.is_available():
        pytest.skip("needs a machine where CUDA cannot start")
    from kreward.kernelbench.processes import library_path
    from kreward.kernelbench.worker_process import WorkerProcess
    w = WorkerProcess()
    try:
        w.send({"op": "ready", "device": "cuda", "library": library_path()})
        w.send({"op": "load", "source": "open('/tmp/kreward-should-not-exist', 'w')"})
        ready, _ = w.receive(120)
        loaded, _ = w.receive(120)
    finally:
        w.end()
    assert not ready["ok"], ready
    assert not loaded["ok"] and "did not start" in loaded["error"], loaded


def test_a_reply_taken_by_another_reader_meets_the_deadline():
    """A candidate can open its worker's reply pipe for reading too (by
    /proc/self/fd) and take the bytes a wait here saw arrive. The caller's
    read must then not wait for more: the wait is told it saw data (the
    stolen reply) while the pipe is empty, and receive must still raise
    WorkerTimeout at its deadline, where a blocking read would hold the
    caller until the worker wrote again, past every deadline."""
    import threading
    from kreward.kernelbench.worker_process import WorkerProcess, WorkerTimeout
    w = WorkerProcess()
    real_wait, fooled = w._wait, []

    def wait_that_saw_a_stolen_reply(deadline):
        if not fooled:
            fooled.append(True)
            return
        real_wait(deadline)

    w._wait = wait_that_saw_a_stolen_reply
    got = []

    def receive():
        try:
            w.receive(0.5)
        except Exception as e:  # noqa: BLE001 - what it raised is the assertion's
            got.append(e)

    t = threading.Thread(target=receive, daemon=True)
    try:
        t.start()
        t.join(10)
        held = t.is_alive()
    finally:
        w.end()  # (a read still blocked ends at the pipe's EOF)
        t.join(10)
    assert fooled and not held, "the caller's read waited past the deadline"
    assert len(got) == 1 and isinstance(got[0], WorkerTimeout), got


def test_a_spare_folder_is_adopted_by_a_link_that_resolves(tmp_path, monkeypatch):
    """folders.adopt links a source's name to a "start" spare's fresh folder
    with a relative link: with a relative cache_dir an absolute-looking
    target dangled from the start (helper-34), and every repeat of the
    source then built again in a new folder. A source that has a folder is
    not adopted."""
    import hashlib
    import shutil
    from kreward.kernelbench import folders
    monkeypatch.chdir(tmp_path)
    cache = os.path.join("rel", "cache")
    spare = os.path.join(cache, "spare-0123")
    os.makedirs(os.path.join(spare, "tmp"))
    name = folders.adopt(cache, spare, "class ModelNew: pass")
    assert name == os.path.join(cache, hashlib.sha256(b"class ModelNew: pass").hexdigest()[:24])
    assert os.path.islink(name) and os.path.isdir(os.path.join(name, "tmp"))
    assert os.path.realpath(name) == os.path.realpath(spare)
    assert folders.adopt(cache, spare, "class ModelNew: pass") is None  # it has a folder now
    # a link whose folder was removed is made anew as a folder by source_folder
    shutil.rmtree(spare)
    assert os.path.islink(name) and not os.path.exists(name)
    assert folders.source_folder(cache, "class ModelNew: pass") == name
    assert os.path.isdir(os.path.join(name, "tmp")) and not os.path.islink(name)


def test_orphaned_spare_folders_are_swept_and_no_other(tmp_path):
    """A trainer killed before close() leaves its warm Runner's unused spare
    folder behind. A Runner sweeps at its start the fresh folders whose
    process is gone and that no source took; a live process's (this
    one's, another trainer's), one a source's name links to (its builds),
    folders of other names and a link named like a spare stay."""
    import secrets
    import subprocess
    import sys
    from kreward.kernelbench import folders
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    dead = p.pid  # (a pid is not reused this soon)
    hexes = [secrets.token_hex(12) for _ in range(4)]
    orphan = tmp_path / f"spare-{dead}-{hexes[0]}"
    taken = tmp_path / f"spare-{dead}-{hexes[1]}"
    live = tmp_path / f"spare-{os.getpid()}-{hexes[2]}"
    other = tmp_path / "0123456789abcdef01234567"   # a source's own folder
    old = tmp_path / f"spare-{hexes[3]}"              # an older version's name
    for d in (orphan, taken, live, other, old):
        (d / "tmp").mkdir(parents=True)
    (tmp_path / "fedcba9876543210fedcba98").symlink_to(taken.name)
    (tmp_path / f"spare-{dead}-{'0' * 24}").symlink_to(other.name)
    made = folders.fresh_folder(str(tmp_path))
    assert os.path.basename(made).startswith(f"spare-{os.getpid()}-")
    # the lock decides where there is one: held by a live process whose pid
    # means nothing here (another container), kept; held by none though the
    # pid in the name is alive here (a reused pid), swept
    elsewhere = tmp_path / f"spare-{dead}-{secrets.token_hex(12)}"
    unheld = tmp_path / f"spare-{os.getpid()}-{secrets.token_hex(12)}"
    for d in (elsewhere, unheld):
        (d / "tmp").mkdir(parents=True)
        (d / "owner.lock").write_text("")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"),
        str(elsewhere / "owner.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert folders.sweep_orphan_spares(str(tmp_path)) == 2
    finally:
        holder.kill()
        holder.wait()
    assert not orphan.exists() and not unheld.exists() and elsewhere.is_dir()
    assert all(d.is_dir() for d in (taken, live, other, old, pathlib.Path(made))), os.listdir(tmp_path)
    assert (tmp_path / f"spare-{dead}-{'0' * 24}").is_symlink() and other.is_dir()
    # its holder gone, the next sweep takes it; then nothing is left to sweep
    assert folders.sweep_orphan_spares(str(tmp_path)) == 1 and not elsewhere.exists()
    assert folders.sweep_orphan_spares(str(tmp_path)) == 0


def test_a_sweep_never_takes_a_folder_adopted_or_made_meanwhile(tmp_path, monkeypatch):
    """Two trainers on one cache_dir (helper-34): a sweep that read the links
    before a spare was adopted, and found its lock let go after, must still
    see the new link (it reads them again with the lock held); and a fresh
    folder is never under a spare's name without its lock held (made under
    another name, locked, renamed)."""
    import fcntl
    import secrets
    from kreward.kernelbench import folders
    adopted = tmp_path / f"spare-{os.getpid()}-{secrets.token_hex(12)}"
    (adopted / "tmp").mkdir(parents=True)
    (adopted / "owner.lock").write_text("")  # its owner adopted it and let the lock go
    (tmp_path / "fedcba9876543210fedcba98").symlink_to(adopted.name)
    real, readings = folders._linked, []

    def first_reading_before_the_link(cache_dir):
        readings.append(cache_dir)
        return set() if len(readings) == 1 else real(cache_dir)
    monkeypatch.setattr(folders, "_linked", first_reading_before_the_link)
    assert folders.sweep_orphan_spares(str(tmp_path)) == 0 and adopted.is_dir()
    assert len(readings) == 2
    monkeypatch.setattr(folders, "_linked", real)

    renamed = []
    real_rename = os.rename

    def locked_when_named(src, dst):
        assert os.path.basename(src).startswith(".making-spare-")
        fd = os.open(os.path.join(src, "owner.lock"), os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        renamed.append(dst)
        real_rename(src, dst)
    monkeypatch.setattr(folders.os, "rename", locked_when_named)
    made = folders.fresh_folder(str(tmp_path))
    assert renamed == [made] and os.path.isdir(os.path.join(made, "tmp"))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".making-")]
    folders.discard(made)


def test_a_runner_sweeps_its_cache_at_its_start(tmp_path):
    """The sweep runs when a Runner is made on its cache_dir: a dead
    process's unused spare folder there is gone."""
    import secrets
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    orphan = tmp_path / f"spare-{p.pid}-{secrets.token_hex(12)}"
    (orphan / "tmp").mkdir(parents=True)
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    with Runner(imp, "cpu", cache_dir=str(tmp_path), spare=False):
        assert not orphan.exists()


def test_the_names_runner_exported_before_its_split_still_import():
    """runner.py was the whole evaluation; it is now the Runner over the
    components (processes, transfer, timing, verification, evaluation), and
    the names others imported from it still come from there."""
    from kreward.kernelbench import processes, report, runner, scoring
    # the reward is the reward table's now (report.py), the rest scoring.py's
    assert runner.reward_of is report.reward_of
    for name in ("attribute", "custom_kernel_names", "custom_share", "kernel_share",
                 "launch_luck", "luck_note", "LAUNCH_BOUND", "MOSTLY_TORCH_SHARE"):
        assert getattr(runner, name) is getattr(scoring, name), name
    assert runner._library_path is processes.library_path
    assert runner._start_sandbox_refused is processes.start_sandbox_refused
    assert callable(runner.evaluate_modelnew) and runner.DEFAULT_CACHE.endswith("kernelbench")


def test_close_from_another_thread_ends_the_evaluation_in_progress(tmp_path):
    """Runner.close() from another thread (a scheduler's backstop, a trainer
    shutting down) ends the candidate's worker too, not only the baseline's
    and the spare: the evaluation returns at once with the worker's death as
    its verdict, instead of waiting out the candidate's sleep."""
    import threading
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    hang = ("import time, torch\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n        time.sleep(120)\n        return x.clamp_min(0)\n")
    with Runner(imp, "cpu", cache_dir=str(tmp_path), timeout_s=300, call_timeout_s=200) as runner:
        timer = threading.Timer(5.0, runner.close)
        timer.start()
        t0 = time.monotonic()
        res = run(runner, hang)
        took = time.monotonic() - t0
        timer.join()
    assert res["verdict"] in ("crash", "error"), res
    assert took < 60, took  # not the candidate's 120 s sleep


def test_kr_profile_says_where_each_verify_batch_spent_its_time(tmp_path, monkeypatch):
    """KR_PROFILE in the caller: each verify case's `go` reports its parts
    (the forward, the commitment: each from a synchronised device to a
    synchronised device) and its heaviest functions, in the result's
    verify_go_profile by case; a forward that sleeps shows there. Without
    it, no profile and the timed batches are the same requests."""
    src = ("import time, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
           "        time.sleep(0.05)\n        return x.clamp_min(0)\n")
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    monkeypatch.setenv("KR_PROFILE", "1")
    with Runner(imp, "cpu", cache_dir=str(tmp_path), timeout_s=120, call_timeout_s=30, spare=False) as r:
        res = run(r, src)
    assert res["verdict"] == "pass", res
    prof = res["verify_go_profile"]
    assert list(prof) == [c["name"] for c in res["cases"]]
    for case in prof.values():
        parts = case["parts_s"]
        assert set(parts) >= {"forward", "commit"} and parts["forward"] >= 0.05, case
        assert 0 < case["total_s"] <= case["wall_s"] and parts["forward"] <= case["total_s"]
        assert "forward" in case["top"] and "cumulative" in case["top"]
    monkeypatch.setenv("KR_PROFILE", "0")
    with Runner(imp, "cpu", cache_dir=str(tmp_path), timeout_s=120, call_timeout_s=30, spare=False) as r:
        assert "verify_go_profile" not in run(r, src)


def test_a_go_profile_from_the_worker_is_bounded():
    """The worker runs the candidate's code: what its profile says is kept
    only as a few named numbers and a bounded text."""
    from kreward.kernelbench.worker_process import PROFILE_PARTS, PROFILE_TEXT, go_profile
    flood = {"profile": {"parts_s": {f"p{i}": 1.0 for i in range(100)} | {"bad": "x", "neg": -1},
                         "total_s": float("inf"), "top": "x" * (10 * PROFILE_TEXT)}}
    p = go_profile(flood)
    assert len(p["parts_s"]) <= PROFILE_PARTS and all(v == 1.0 for v in p["parts_s"].values())
    assert p["total_s"] is None and len(p["top"]) == PROFILE_TEXT
    assert go_profile({"profile": "not a dict"}) is None and go_profile({}) is None
