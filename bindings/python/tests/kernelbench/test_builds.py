"""The compile stage (kernelbench/builds.py, build_stage.py, build_env.py,
pch.py), on the CPU: a load_inline candidate built in a sandboxed CPU
worker ahead of its GPU turn, whose GPU worker's load then finds the build
current; builds side by side; a failed build as the candidate's
compile_error with the compiler's log; a hanging build killed at its
timeout with its processes; the stage's sandbox refusing writes outside
the source's folder, another candidate's folder, the precompiled header's
folder, and every way to a GPU; the scheduler starting builds ahead, so
candidate 2 builds while candidate 1 has its GPU turn.

Most builds here are a Python module of a few lines (load_inline without
torch's headers: a second each), so the stage's mechanics are tested in
seconds; test_a_cuda_candidate_is_built_once_for_its_gpu_worker builds the
corpus's honest CUDA relu (nvcc: minutes on a CPU of this project's)."""
import glob
import os
import shutil
import textwrap
import threading
import time

import pytest

torch = pytest.importorskip("torch", reason="the compile stage needs torch")

import kreward  # noqa: E402
from kreward.kernelbench import build_env, builds, folders, import_problem, pch  # noqa: E402
from kreward.kernelbench.build_stage import build  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402
from kreward.kernelbench.scheduler import Scheduler  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
KB = os.path.join(ROOT, "examples", "kernelbench")
OFFERED = kreward.Pool.sandbox()
sandboxed = pytest.mark.skipif(not (OFFERED["landlock"] and OFFERED["seccomp"]),
                               reason=f"no Landlock or seccomp: {OFFERED}")
needs_cxx = pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("c++")),
                               reason="load_inline needs ninja and c++")
ARCH = "9.0"  # an H200's: what the lanes would say (no GPU here to ask)


def tiny(name, before="", body="return PyModule_Create(&m);"):
    """A ModelNew whose import builds a Python module of a few lines
    through load_inline (no torch header: a second's build); `before` runs
    at module level first."""
    head = ("import os, subprocess, sys, time\nimport torch\n"
            "from torch.utils.cpp_extension import load_inline\n")
    src = textwrap.dedent('''
        SRC = """
        #include <Python.h>
        static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
        PyMODINIT_FUNC PyInit_{name}(void) {{ {body} }}
        """
        ext = load_inline(name="{name}", cpp_sources=SRC, no_implicit_headers=True)


        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return x.clamp_min(0)
    ''').format(name=name, body=body)
    return head + textwrap.dedent(before) + src


def so_of(cache, name):
    found = glob.glob(os.path.join(cache, "*", name, name + ".so"))
    assert len(found) == 1, found
    return found[0]


# ---- what a build depends on
def test_needs_build_reads_the_text():
    assert build_env.needs_build(tiny("kr_a"))
    assert build_env.needs_build("import torch.utils.cpp_extension as ce\n"
                                 "m = ce.load(name='x', sources=[])\n")
    assert not build_env.needs_build("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    assert not build_env.needs_build("import triton\n@triton.jit\ndef k(x): pass\nx = load(3)\n")


def test_the_arch_list_is_what_torch_picks_in_a_gpu_worker(monkeypatch):
    """TORCH_CUDA_ARCH_LIST set to torch_arch_list(...) gives the nvcc
    flags torch picks by itself in a GPU worker seeing those GPUs (so a
    build made on the CPU is the one the GPU worker finds current)."""
    from torch.utils import cpp_extension
    built_for = ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # (torch says none without a GPU)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: built_for)
    for caps in ([(9, 0)], [(9, 0), (8, 0)], [(8, 6), (8, 6)], [(10, 0), (9, 0)], [(13, 0)]):
        monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
        monkeypatch.setattr(torch.cuda, "device_count", lambda caps=caps: len(caps))
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i, caps=caps: caps[i])
        auto = cpp_extension._get_cuda_arch_flags()
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", build_env.torch_arch_list(caps, built_for))
        assert cpp_extension._get_cuda_arch_flags() == auto, caps


def test_the_header_folder_is_granted_for_reading_only_once_whole(tmp_path):
    env, reads = build_env.build_env("9.0", str(tmp_path / "not-yet"))
    assert env == {"TORCH_CUDA_ARCH_LIST": "9.0"} and reads == []
    (tmp_path / "made").mkdir()
    env, reads = build_env.build_env(None, str(tmp_path / "made"))
    assert env == {"CPATH": str(tmp_path / "made")} and reads == [str(tmp_path / "made")]


def test_stale_build_locks_go_without_following_links(tmp_path):
    ext = tmp_path / "ext"
    (ext / "kr_x").mkdir(parents=True)
    (ext / "kr_x" / "lock").write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "lock").write_text("the trainer's")
    os.symlink(elsewhere, ext / "kr_link")          # a candidate's link to a folder of another's
    assert folders.clear_stale_locks(str(ext)) == 1
    assert not (ext / "kr_x" / "lock").exists() and (elsewhere / "lock").exists()


# ---- one build
@sandboxed
@needs_cxx
def test_the_stage_builds_and_the_later_load_reuses_it(tmp_path):
    cache = str(tmp_path)
    src = tiny("kr_reuse")
    out = build(src, cache, ARCH, timeout_s=300)
    assert out["state"] == "built", out
    assert out["sandbox"]["applied"] and out["sandbox"]["landlock"] and out["sandbox"]["exec"]
    so = so_of(cache, "kr_reuse")
    before = os.stat(so).st_mtime_ns, open(os.path.join(os.path.dirname(so), ".ninja_log")).read()
    loaded = _load_in_worker(cache, src)
    assert loaded["ok"] and loaded["cached"], loaded
    after = os.stat(so).st_mtime_ns, open(os.path.join(os.path.dirname(so), ".ninja_log")).read()
    assert after == before  # ninja found it current: nothing compiled, nothing linked


def _load_in_worker(cache, src, pch_dir=None, timeout_s=300):
    """A candidate worker's load of src (the GPU worker's path, here on the
    CPU device), as the lanes' Runners make it: the stage's arch."""
    imp = import_problem(os.path.join(KB, "level1", "01_relu.py"))
    with Runner(imp, "cpu", cache_dir=cache, cuda_arch=ARCH, pch_dir=pch_dir, spare=False,
                timeout_s=timeout_s) as r:
        w, loaded = r._processes.start_candidate(src, "ModelNew")
        w.end()
    return loaded


@sandboxed
@needs_cxx
def test_a_failing_build_is_a_compile_error_with_the_log(tmp_path):
    out = build(tiny("kr_broken", body="return PyModule_Create(&m) nonsense;"), str(tmp_path), ARCH,
                timeout_s=300)
    assert out["state"] == "compile_error", out
    res = builds.verdict(out)
    assert res["verdict"] == "compile_error" and res["reward"] == 0.0
    assert "Error building extension 'kr_broken'" in res["feedback"]
    assert "error:" in res["feedback"] and "nonsense" in res["feedback"]  # gcc's own words


@sandboxed
@needs_cxx
def test_a_hanging_build_is_killed_at_its_timeout(tmp_path):
    """A build that never ends (here a program it starts, then a wait) is
    killed at timeout_s with every process it started: the candidate's
    verdict `timeout`, no GPU turn."""
    hang = tiny("kr_hang", before="""
        p = subprocess.Popen(["sleep", "300"])
        open(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "child.pid"), "w").write(str(p.pid))
        time.sleep(300)
    """)
    t0 = time.monotonic()
    out = build(hang, str(tmp_path), ARCH, timeout_s=8)
    took = time.monotonic() - t0
    assert out["state"] == "timeout" and "8 s" in out["error"], out
    assert took < 8 + 15, took
    pid = int(open(os.path.join(folders.source_folder(str(tmp_path), hang), "child.pid")).read())
    assert not _alive(pid), "the build's program outlived it"
    res = builds.verdict(out)
    assert res["verdict"] == "timeout" and res["reward"] == 0.0


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---- the stage's sandbox
@sandboxed
@needs_cxx
@pytest.mark.parametrize("what,attempt", [
    ("write outside its folder", "open(os.path.join(OUTSIDE, 'planted.txt'), 'w').write('x')"),
    ("read another candidate's folder", "os.listdir(OTHER)"),
    ("read another candidate's build", "open(os.path.join(OTHER, 'candidate.py')).read()"),
    ("write into the header's folder", "open(os.path.join(PCH, 'torch.h.gch'), 'w').write('x')"),
])
def test_a_build_that_reaches_outside_its_folder_is_refused(tmp_path, what, attempt):
    cache = str(tmp_path / "cache")
    other = tiny("kr_other")
    assert build(other, cache, ARCH, timeout_s=300)["state"] == "built"
    header = tmp_path / "cache" / "pch" / "made"   # a header's folder (granted for reading)
    header.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    before = (f"OUTSIDE, OTHER, PCH = {str(outside)!r}, "
              f"{folders.source_folder(cache, other)!r}, {str(header)!r}\n"
              f"os.listdir(PCH)\n"  # (reading the header's folder is allowed)
              f"{attempt}\n")
    out = build(tiny("kr_nosy", before=before), cache, ARCH, str(header), timeout_s=300)
    assert out["state"] == "denied", (what, out)
    assert "Permission denied" in out["error"] or "Operation not permitted" in out["error"], out
    assert not (outside / "planted.txt").exists() and os.listdir(header) == []
    # a refusal in the stage is not the candidate's verdict (the GPU worker's
    # grants differ): its GPU turn decides, under its own sandbox
    assert builds.verdict(out) is None


GPU_PATHS = ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "/proc/driver/nvidia",
             "/sys/bus/pci/devices", "/dev"]


@sandboxed
@needs_cxx
@pytest.mark.parametrize("path", GPU_PATHS)
def test_a_build_cannot_reach_a_gpu(tmp_path, path):
    """No GPU in the stage: CUDA_VISIBLE_DEVICES empty, torch sees none, and
    the ways to one (the driver's device files, its procfs folder, the PCI
    devices, /dev itself) are refused by the sandbox (no GPU grant). A
    path this machine lacks cannot be refused (no such file): skipped."""
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    touch = (f"os.listdir({path!r})" if os.path.isdir(path) else f"open({path!r}, 'rb')")
    before = ("assert os.environ['CUDA_VISIBLE_DEVICES'] == '' and not torch.cuda.is_available()\n"
              f"{touch}\n")
    out = build(tiny("kr_gpu", before=before), str(tmp_path), ARCH, timeout_s=300)
    assert out["state"] == "denied", out
    assert "Permission denied" in out["error"], out


@sandboxed
@needs_cxx
def test_a_build_sees_no_gpu_and_yields_the_cpu(tmp_path):
    """No GPU for torch, and the build's processes run niced (the GPU turns'
    timing processes go first)."""
    nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)  # (19 at most: this process may be niced)
    before = ("assert os.environ['CUDA_VISIBLE_DEVICES'] == '' and not torch.cuda.is_available()\n"
              f"assert os.getpriority(os.PRIO_PROCESS, 0) == {nice}\n")
    out = build(tiny("kr_nogpu", before=before), str(tmp_path), ARCH, timeout_s=300)
    assert out["state"] == "built", out


# ---- the pool
@sandboxed
@needs_cxx
def test_two_distinct_sources_build_in_parallel_and_each_once(tmp_path):
    slow = "time.sleep(3)\n"  # (at module level, before the build: its worker holds it)
    a, b = tiny("kr_par_a", before=slow), tiny("kr_par_b", before=slow)
    with builds.BuildPool(str(tmp_path), ARCH, workers=2, timeout_s=300, use_pch=False) as pool:
        assert pool.submit(a) and pool.submit(b)
        assert pool.submit(a) == builds.source_key(a)                   # the same source: one build
        outs = [pool.wait(a, 300), pool.wait(b, 300)]
        assert [o["state"] for o in outs] == ["built", "built"], outs
        spans = sorted((s, e) for _, s, e in pool.timeline())
        assert len(spans) == 2 and spans[1][0] < spans[0][1], spans     # side by side
        assert pool.status()["reused"] >= 1 and pool.status()["built"] == 2
        assert pool.wait("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n") is None


def test_a_build_waited_for_goes_to_the_front():
    started, gate = [], threading.Event()

    def fake(source, *a, **k):
        started.append(source)
        gate.wait(10)
        return {"state": "built"}

    srcs = [f"load_inline(name='k{i}')" for i in range(4)]
    with builds.BuildPool("/nonexistent", ARCH, workers=1, use_pch=False, build=fake) as pool:
        for s in srcs:
            pool.submit(s)
        time.sleep(0.2)                       # k0 runs, k1-k3 wait
        done = []
        t = threading.Thread(target=lambda: done.append(pool.wait(srcs[3], 10)))
        t.start()
        time.sleep(0.2)
        gate.set()
        t.join(10)
        assert done and done[0]["state"] == "built"
        assert started[:2] == [srcs[0], srcs[3]], started


def test_no_architecture_no_stage():
    with builds.BuildPool("/nonexistent", None, use_pch=False, build=lambda *a, **k: 1 / 0) as pool:
        assert pool.submit(tiny("kr_x")) is None and pool.wait(tiny("kr_x")) is None


# ---- the scheduler
class Problem:
    def __init__(self, key):
        self.key = self.name = key


class TimedLane:
    """A GPU lane that takes turn_s a candidate and records when."""

    def __init__(self, turn_s):
        self.turn_s, self.turns, self.closed = turn_s, {}, False

    def evaluate(self, problem, source, next_source=None, options=None):
        t0 = time.monotonic()
        time.sleep(self.turn_s)
        self.turns[source] = (t0, time.monotonic())
        return {"verdict": "pass", "notes": [], "cases": []}

    def abort(self):
        pass

    def healthy(self):
        return True

    def close(self):
        self.closed = True


@sandboxed
@needs_cxx
def test_the_scheduler_builds_ahead_of_the_gpu_turns(tmp_path):
    """One compile worker, one lane: candidate 2 builds while candidate 1
    has its GPU turn, and its own turn then waits for nothing; a
    candidate whose build fails gets compile_error without a turn."""
    c1 = tiny("kr_sched_1", before="time.sleep(2)\n")
    c2 = tiny("kr_sched_2", before="time.sleep(2)\n")
    bad = tiny("kr_sched_bad", body="return nonsense;")
    plain = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    lane = TimedLane(turn_s=5.0)
    pool = builds.BuildPool(str(tmp_path), ARCH, workers=1, timeout_s=300, use_pch=False)
    with Scheduler({"cpu": lane}, builds=pool) as s:
        tickets = [s.submit(Problem("p"), src) for src in (c1, c2, bad, plain)]
        results = [s.wait(t, 300) for t in tickets]
        spans = {k: (b, e) for k, b, e in pool.timeline()}
    assert [r["verdict"] for r in results] == ["pass", "pass", "compile_error", "pass"], results
    t1, b2 = lane.turns[c1], spans[builds.source_key(c2)]
    assert b2[0] < t1[1] and b2[1] > t1[0], (b2, t1)   # build 2 during GPU turn 1
    # its turn waited for what was left of its build after turn 1, nothing
    # more (a busy host makes the build outlast the turn: CI ran it at 7 s)
    left = max(0.0, b2[1] - t1[1])
    assert results[1]["build"]["state"] == "built", results[1]
    assert results[1]["build_wait_s"] < left + 1.0, (results[1]["build_wait_s"], left, b2, t1)
    assert bad not in lane.turns and "nonsense" in results[2]["feedback"]
    assert "build" not in results[3] and plain in lane.turns        # nothing to build: no stage
    assert s.counters["settled_by_build"] == 1 and pool._closed


def test_the_rail_starts_a_build_while_the_other_kind_has_the_gpus():
    from kreward import problems
    from kreward.rail import Rail

    class FakeScheduler:
        def __init__(self):
            self.ahead, self.submitted = [], []

        def build_ahead(self, source):
            self.ahead.append(source)

        def submit(self, problem, source, options, on_done):
            self.submitted.append(source)
            return len(self.submitted)

        def close(self):
            pass

    fake = FakeScheduler()
    rail = Rail(pool=None, scheduler_factory=lambda: fake)
    problem = problems.KernelBenchProblem.__new__(problems.KernelBenchProblem)
    rail._inflight[problems.KREWARD] = 1          # a kreward job holds the GPUs
    rail.submit(problem, source=tiny("kr_rail"))
    assert fake.ahead == [tiny("kr_rail")] and fake.submitted == []
    rail._inflight[problems.KREWARD] = 0
    with rail._cond:
        rail._pump()
    assert fake.submitted == [tiny("kr_rail")]
    rail._closed = True


# ---- the precompiled header
@pytest.fixture
def request_cleanup():
    """Removes the folders given once the test ends: a header is 750 MB, in
    folders made read-only (which a user's rmtree cannot empty)."""
    roots = []
    yield roots.append
    for root in roots:
        for d, _, _ in os.walk(root):
            os.chmod(d, 0o755)
        shutil.rmtree(root, ignore_errors=True)


@sandboxed
@needs_cxx
def test_a_build_uses_the_libraries_precompiled_header(tmp_path, monkeypatch, request_cleanup):
    """The header made once (here one variant: minutes of CPU otherwise);
    a torch C++ candidate built in the stage with it, which then asks gcc,
    inside the same sandbox and with the flags load_inline wrote into its
    build.ninja, which header it takes: `!` (the .gch, valid) for the
    library's. The folder is read-only to it (test above)."""
    monkeypatch.setattr(pch, "VARIANTS", {"plain": []})
    monkeypatch.setattr(pch, "_key_memo", {})
    root = str(tmp_path / "pch")
    made = pch.make(root)
    assert pch.ready(root) == made
    request_cleanup(root)
    src = textwrap.dedent('''
        import os, shlex, subprocess
        import torch
        from torch.utils.cpp_extension import load_inline
        ext = load_inline(name="kr_pch", functions=["twice"],
                          cpp_sources="torch::Tensor twice(torch::Tensor x) { return x * 2; }")
        here = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kr_pch")
        ninja = open(os.path.join(here, "build.ninja")).read()
        cflags = next(l.split("=", 1)[1] for l in ninja.splitlines() if l.startswith("cflags ="))
        said = subprocess.run(["c++", *shlex.split(cflags), "-H", "-fsyntax-only", "main.cpp"],
                              cwd=here, capture_output=True, text=True)
        open(os.path.join(here, "pch_check.txt"), "w").write(said.stderr[:4000])


        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return ext.twice(x)
    ''')
    out = build(src, str(tmp_path), ARCH, made, timeout_s=900)
    assert out["state"] == "built" and out["pch"] == made, out
    said = open(os.path.join(os.path.dirname(so_of(str(tmp_path), "kr_pch")), "pch_check.txt")).read()
    assert f"! {made}/torch/extension.h.gch/plain.gch" in said, said


# ---- the real thing
@sandboxed
@pytest.mark.skipif(not shutil.which("nvcc") and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="no nvcc")
def test_a_cuda_candidate_is_built_once_for_its_gpu_worker(tmp_path):
    """The corpus's honest CUDA relu (load_inline: c++ and nvcc), built in
    the stage with no GPU, for the lanes' architecture; its worker's load
    then takes about a second and rebuilds nothing."""
    src = open(os.path.join(KB, "candidates", "level1_01_relu", "honest_cuda.py")).read()
    out = build(src, str(tmp_path), ARCH, timeout_s=1200)
    assert out["state"] == "built", out
    so = so_of(str(tmp_path), "kb_relu_honest")
    log = os.path.join(os.path.dirname(so), ".ninja_log")
    before = os.stat(so).st_mtime_ns, open(log).read()
    assert "cuda.cuda.o" in before[1]
    loaded = _load_in_worker(str(tmp_path), src)
    assert loaded["ok"] and loaded["cached"], loaded
    assert loaded["compile_seconds"] < 10, loaded   # the import, ninja's check: no build
    assert (os.stat(so).st_mtime_ns, open(log).read()) == before


@sandboxed
@needs_cxx
def test_through_the_front_door(tmp_path):
    """kreward.Evaluator on CPU lanes with the stage (an architecture given:
    no GPU here to ask): a built candidate passes, its report carrying the
    build's seconds; a broken build is compile_error with gcc's words."""
    problem = os.path.join(KB, "level1", "01_relu.py")
    good = tiny("kr_door_ok")
    broken = tiny("kr_door_bad", body="return nonsense;")
    with kreward.Evaluator(reward="kernelbench", gpus="none", cache_dir=str(tmp_path),
                           kernelbench={"devices": ["cpu"], "builds": {"arch": ARCH, "pch": False},
                                        "runner": {"timeout_s": 300, "call_timeout_s": 60}}) as ev:
        reports = ev.evaluate_batch([problem, problem], [good, broken])
    ok, bad = reports
    assert ok.verdict == "passed", ok.feedback
    assert ok["build_seconds"] > 0 and ok["build_wait_s"] >= 0 and ok["compile_cached"] == 1.0
    assert bad.verdict == "compile_error" and bad.reward == 0.0 and "nonsense" in bad.feedback
    for r in reports:
        r.close()
