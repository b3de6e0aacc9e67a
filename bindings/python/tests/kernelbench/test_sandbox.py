"""The ModelNew worker in libkreward's sandbox (kernelbench/confine.py,
worker.py), on the CPU: candidates that read the caller's files or
environment, open a socket, write outside their build folder or start a
program once sealed get the verdict `denied`; honest ones pass, a
load_inline build (ninja and the C++ compiler, started inside the
sandbox) included. A kernel without Landlock or seccomp skips the checks of
that layer with its reason. The GPU half (CUDA, Triton, the corpus) is
test_gpu.py::test_sandbox_*."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="the ModelNew runner needs torch")

import kreward  # noqa: E402
from kreward.kernelbench import folders, import_problem  # noqa: E402
from kreward.kernelbench.confine import missing, python_reads, spec  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402

CORPUS_CHEATS = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench" / "candidates" / "sandbox"
OFFERED = kreward.Pool.sandbox()
pytestmark = [
    pytest.mark.skipif(not OFFERED["landlock"], reason=f"no Landlock: {OFFERED['landlock_why']}"),
    pytest.mark.skipif(not OFFERED["seccomp"], reason=f"no seccomp: {OFFERED['seccomp_why']}"),
]

PROBLEM = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    batch_size = 64
    dim = 128


    def get_inputs():
        return [torch.randn(batch_size, dim)]


    def get_init_inputs():
        return []
""")

HONEST = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
          "        return x.clamp_min(0)\n")


def cheat(body, top=""):
    """A correct ModelNew that first does body in its forward (top: at
    module level, while it loads)."""
    return ("import os, socket, subprocess, torch\n" + top +
            "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n" +
            textwrap.indent(textwrap.dedent(body), " " * 8) + "        return x.clamp_min(0)\n")


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    d = tmp_path_factory.mktemp("kb_sandbox")
    (d / "small_relu.py").write_text(PROBLEM)
    secret = d / "caller_secret.txt"  # a file of the caller's, outside every tree
    secret.write_text("the caller's secret")
    return import_problem(str(d / "small_relu.py")), d, secret


def runner(problem, tmp, mode="start", zygote=False):
    imp, d, _ = problem
    return Runner(imp, "cpu", cache_dir=str(d / f"ext-{tmp}-{int(zygote)}"), timeout_s=300, call_timeout_s=30,
                  sandbox=mode, zygote=zygote)


def run(r, source):
    return r.evaluate(source, seed=5, verify_seeds=1, batches=1, calls=2, checks=1, baseline=False)


# zygote: the workers forked from a process with torch imported (zygote.py):
# the same sandbox, entered by a worker that is its only thread
@pytest.mark.parametrize("zygote", [False, True])
@pytest.mark.parametrize("mode", ["start", "init"])
def test_honest_candidate_passes_sealed(problem, mode, zygote):
    res = run(runner(problem, mode, mode, zygote), HONEST)
    assert res["verdict"] == "pass", res
    assert res["worker_start"] == ("zygote" if zygote else "exec"), res
    sb = res["sandbox"]
    assert sb["applied"] and sb["when"] == mode and sb["landlock"] and sb["seccomp"]
    assert sb["exec"] is False and sb["network"] is False  # sealed after the cases ran
    said = [n for n in res["notes"] if n.startswith("sandbox:")]
    if mode == "start":  # entered before torch: no thread outside it
        assert sb["landlock_why"] == "" and said == [], res["notes"]
    else:  # torch's threads were there first, and the report says so
        assert all("started before" in n for n in said), said


@pytest.mark.parametrize("mode", ["start", "init"])
@pytest.mark.parametrize("what,body", [
    ("the password file", "open('/etc/passwd').read()\n"),
    ("the caller's environment", "open(f'/proc/{os.getppid()}/environ', 'rb').read()\n"),
    ("its own environment file", "open('/proc/self/environ', 'rb').read()\n"),
    ("a caller's file", "open(SECRET).read()\n"),
    ("a file outside its build folder", "open(os.path.join(os.path.dirname(SECRET), 'planted.txt'), 'w').write('x')\n"),
    ("a TCP socket", "socket.create_connection(('127.0.0.1', 22), timeout=1)\n"),
    ("a UDP socket", "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"),
    ("a program, once sealed", "subprocess.run(['/bin/true'], check=True) if SEALED() else None\n"),
])
@pytest.mark.parametrize("zygote", [False, True])
def test_cheating_forward_is_denied(problem, mode, what, body, zygote):
    _, d, secret = problem
    # SEALED: true from the timed calls on, when exec is refused (before,
    # during the first call of every case, programs may run: Triton compiles)
    top = (f"SECRET = {str(secret)!r}\n_calls = [0]\n"
           "def SEALED():\n    _calls[0] += 1\n    return _calls[0] > 3\n")
    res = run(runner(problem, f"{mode}-cheat", mode, zygote), cheat(body, top))
    assert res["verdict"] == "denied", (what, res)
    assert "refused by the sandbox" in res["feedback"] and res["reward"] == 0.0
    assert not (d / "planted.txt").exists()


@pytest.mark.parametrize("mode", ["start", "init"])
def test_no_file_grows_past_the_limit(problem, mode):
    """A file in the build folder (TMPDIR points there) cannot be written
    past confine.FILE_BYTES (EFBIG: Python ignores SIGXFSZ), so one file
    cannot fill the caller's disk: `denied`, reward 0 (not `error`, which
    trainers may score as no answer). A byte written 3 GiB in makes a sparse
    file without the limit (nothing filled): the test costs nothing where
    it fails."""
    body = ("import tempfile\nwith tempfile.NamedTemporaryFile() as f:\n"
            "    f.seek(3 << 30)\n    f.write(b'x')\n    f.flush()\n")
    res = run(runner(problem, f"{mode}-fsize", mode), cheat(body))
    assert res["verdict"] == "denied" and res["reward"] == 0.0, res
    assert "File too large" in res["feedback"], res


def test_the_limits_come_with_the_first_layer_only(tmp_path):
    """A later layer cannot set limits (kr_sandbox_enter refuses): the seal
    carries none."""
    assert spec(str(tmp_path), gpu=False, exec_allowed=True)["file_bytes"] == 2 << 30
    assert "file_bytes" not in spec(str(tmp_path), gpu=False, exec_allowed=False, first=False)


def test_cheating_module_level_read_is_denied(problem):
    res = run(runner(problem, "toplevel"), cheat("pass\n", top="LEAK = open('/etc/passwd').read()\n"))
    assert res["verdict"] == "denied" and "Permission denied: '/etc/passwd'" in res["feedback"], res


@pytest.mark.parametrize("cand", sorted(p.name for p in CORPUS_CHEATS.glob("cheat_*.py")))
def test_corpus_sandbox_cheats_are_denied(problem, cand):
    """examples/kernelbench/candidates/sandbox/ (written for the relu problem;
    the GPU test runs them there) on the small relu, on the CPU."""
    r = runner(problem, "corpus")
    res = r.evaluate((CORPUS_CHEATS / cand).read_text(), seed=5, batches=1, calls=2, checks=1,
                     baseline=False)
    assert res["verdict"] == "denied" and res["feedback"].startswith("refused by the sandbox"), res


def test_a_started_program_is_inside_the_sandbox(problem):
    """Before the seal a program may run (compilers do), but it reads no more
    than the worker: cat of the caller's file fails, and its output never
    reaches the candidate."""
    _, _, secret = problem
    body = (f"out = subprocess.run(['/bin/cat', {str(secret)!r}], capture_output=True)\n"
            "if out.returncode == 0:\n    return x  # leaked: wrong on purpose\n")
    res = run(runner(problem, "child"), cheat(body))
    # the verification calls run it (exec allowed, cat refused the file);
    # the timed calls are sealed, so starting cat is refused outright
    assert res["verdict"] == "denied" and "Operation not permitted" in res["feedback"], res
    assert res["cases"] and all(c["passed"] for c in res["cases"])


def test_without_the_sandbox_the_same_cheat_is_not_caught(problem):
    """The control: the denied verdicts above are the sandbox's doing."""
    res = run(runner(problem, "off", mode=None), cheat("open('/etc/passwd').read()\n"))
    assert res["verdict"] == "pass", res
    assert res["sandbox"] == {"applied": False, "why": "the runner asked for no sandbox"}
    assert any(n.startswith("no sandbox") for n in res["notes"])


@pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("c++")), reason="load_inline needs ninja and c++")
def test_load_inline_builds_inside_the_sandbox_and_is_cached(problem):
    src = textwrap.dedent('''
        import torch
        from torch.utils.cpp_extension import load_inline

        SRC = """
        #include <torch/extension.h>
        torch::Tensor relu_cpu(torch::Tensor x) {
            auto a = x.contiguous();
            auto y = torch::empty_like(a);
            const float *in = a.data_ptr<float>();
            float *out = y.data_ptr<float>();
            for (int64_t i = 0; i < a.numel(); i++)
                out[i] = in[i] > 0.f ? in[i] : 0.f;
            return y;
        }
        """
        mod = load_inline(name="kr_sandbox_relu_cpu", cpp_sources=SRC, functions=["relu_cpu"])


        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return mod.relu_cpu(x)
    ''')
    r = runner(problem, "inline")
    first = run(r, src)
    assert first["verdict"] == "pass" and first["compile_cached"] is False, first
    again = run(r, src)
    assert again["verdict"] == "pass" and again["compile_cached"] is True, again
    assert again["compile_seconds"] < first["compile_seconds"]


def test_spec_grants_no_user_folder(tmp_path):
    s = spec(str(tmp_path), gpu=False, exec_allowed=True)
    home, cwd = os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.getcwd())
    for p in s["read"]:
        rp = os.path.realpath(p)
        assert rp not in ("/", home, cwd, "/etc", "/tmp", "/proc") and not home.startswith(rp + "/"), p
    assert "/etc/passwd" not in s["read"] and s["write"] == [os.path.realpath(str(tmp_path))]
    assert any(p.endswith("site-packages") or p.endswith("dist-packages") for p in python_reads())


def test_missing_layers_are_said():
    assert missing({"landlock": True, "seccomp": True}) == []
    said = missing({"landlock": False, "landlock_why": "this kernel has no Landlock",
                    "seccomp": False, "seccomp_why": "no seccomp"})
    assert "no Landlock here (this kernel has no Landlock)" in said[0] and "network" in said[1]


def test_a_fresh_spare_folder_takes_a_source_name_only_after_its_ready(problem, monkeypatch):
    """A fresh spare warms the library's kernels in its ready, loading what
    was planted in its folder before its isolation filter; once the folder
    takes a source's name, every worker of that source may write it. So the
    name is given only after the spare's ready was read (helper-31: a
    candidate that failed its verify left its spare mid-ready), and a spare
    whose ready failed gives its folder to no one."""
    from kreward.kernelbench import processes
    from kreward.kernelbench.worker_process import WorkerProcess
    adopted, adopt = [], processes.folders.adopt
    readies, receive_ready = [], WorkerProcess.receive_ready

    def logged_receive_ready(self, timeout_s):
        out = receive_ready(self, timeout_s)
        readies.append((self.folder, out.get("ok")))
        return out

    def logged_adopt(cache_dir, spare_ext, source):
        adopted.append((spare_ext, list(readies)))
        return adopt(cache_dir, spare_ext, source)
    monkeypatch.setattr(WorkerProcess, "receive_ready", logged_receive_ready)
    monkeypatch.setattr(processes.folders, "adopt", logged_adopt)
    # (another test's "init" Runner in this process turns fresh starts off)
    monkeypatch.setattr(processes.folders, "_marked", set())
    r = runner(problem, "adopt-after-ready", "start")
    try:
        assert run(r, HONEST)["verdict"] == "pass"
        # wrong in its verify: it ends before waiting for the spare started
        # at its load, whose ready is then still unread
        wrong = run(r, HONEST.replace("clamp_min(0)", "clamp_min(0) + 1"))
        assert wrong["verdict"] == "wrong" and wrong["started_ahead"] is True, wrong
        spare_ext = r._processes.spare_folder
        third = run(r, HONEST.replace("clamp_min(0)", "relu()"))
        assert third["verdict"] == "pass" and third["started_ahead"] is True, third
        assert [a[0] for a in adopted][-1] == spare_ext
        assert (spare_ext, True) in adopted[-1][1]  # its ready read before, and said it started
        # a fresh spare whose ready fails: ended, its folder given to no one
        spare, n = r._processes.spare, len(adopted)
        spare.receive_ready(30)  # (its real reply read and kept)
        spare.ready_reply = {"ok": False, "error": "a device it could not get"}
        fourth = run(r, HONEST.replace("clamp_min(0)", "clamp(min=0)"))
        assert fourth["verdict"] == "pass" and fourth["started_ahead"] is False, fourth
        # (the worker started for it instead starts in a fresh folder of its
        # own, named after that one's ready: _spawn_for)
        assert spare.ended is not None and spare.folder not in [a[0] for a in adopted]
        assert len(adopted) == n + 1 and (adopted[-1][0], True) in adopted[-1][1]
        assert any("a device it could not get" in n for n in fourth["notes"]), fourth["notes"]
    finally:
        r.close()


def test_start_sandbox_spares_follow_the_source_named_next(problem):
    """A "start" worker may write only its own build folder, so its spare is
    started for the source named next (evaluate_many, or
    evaluate(next_source=)) and used only by that source, or, none named,
    with a fresh folder that the next source without a folder takes (its
    name then links that folder); the "init" spare takes any source."""
    other = HONEST.replace("clamp_min(0)", "relu()")
    third = HONEST.replace("clamp_min(0)", "clamp(min=0)")
    r = runner(problem, "start-ahead", "start")
    kw = dict(seed=5, verify_seeds=1, batches=1, calls=2, checks=1, baseline=False)
    results = r.evaluate_many([HONEST, other, HONEST], **kw)
    assert [x["verdict"] for x in results] == ["pass"] * 3, results
    assert [x["started_ahead"] for x in results] == [False, True, True]
    assert all(x["sandbox"]["when"] == "start" and x["sandbox"]["landlock_why"] == "" for x in results)
    # a spare started for one source (one with a folder: `other` ran) is
    # not given to another
    assert r.evaluate(HONEST, next_source=other, **kw)["started_ahead"] is False
    assert r._processes.spare_source == other
    # a new source named next, or one that builds (the compile stage writes
    # its folder): a fresh folder's spare (its ready may warm the library's
    # kernels: nothing a candidate wrote can be there) or the source's own
    fresh_next = HONEST.replace("clamp_min(0)", "clamp_min(-0.0)")
    builds = HONEST + "\n# load_inline(name='x', cpp_sources='')\n"
    for named, own in ((fresh_next, False), (builds, True)):
        r._processes.end_spare()
        r._processes.start_spare(named)
        assert (r._processes.spare_source == named) is own, named
        assert bool(r._processes.spare_folder) is not own
        assert not folders.has_folder(r.cache_dir, named) or own
    r._processes.end_spare()
    r._processes.start_spare(other)
    res = r.evaluate(third, **kw)
    assert res["verdict"] == "pass" and res["started_ahead"] is False, res
    # nothing named next: a spare with a fresh folder, taken by a new source
    spares = r._processes
    assert spares.spare is not None and spares.spare_source is None and spares.spare_folder
    spare_ext = spares.spare_folder
    fourth = HONEST.replace("clamp_min(0)", "clamp_min(0.0)")
    res = r.evaluate(fourth, **kw)
    assert res["verdict"] == "pass" and res["started_ahead"] is True, res
    name = os.path.join(r.cache_dir, hashlib.sha256(fourth.encode()).hexdigest()[:24])
    assert os.path.islink(name) and os.path.realpath(name) == os.path.realpath(spare_ext)
    assert res["sandbox"]["applied"] and res["sandbox"]["when"] == "start"
    # the same source again: its folder exists, so the fresh spare is not
    # taken (and its folder removed); a worker of that folder starts instead
    again = r.evaluate(fourth, **kw)
    assert again["verdict"] == "pass" and again["started_ahead"] is False, again
    r.close()
    spares = [d for d in os.listdir(r.cache_dir) if d.startswith("spare-")]
    linked = {os.path.basename(os.path.realpath(os.path.join(r.cache_dir, d)))
              for d in os.listdir(r.cache_dir) if os.path.islink(os.path.join(r.cache_dir, d))}
    assert spares and set(spares) == linked  # no folder of an unused spare is left
    r = runner(problem, "init-ahead", "init")
    results = [r.evaluate(src, **kw) for src in (HONEST, other)]
    assert [x["started_ahead"] for x in results] == [False, True], results
    r.close()



SEAL_AFTER_A_THREAD = r"""
import importlib.util, json, sys, threading, time
path, lib, write, when = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("kb_worker", path)
worker = importlib.util.module_from_spec(spec); spec.loader.exec_module(worker)
if when == "init":  # torch's threads, before any layer
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
sb = worker.Sandbox({"library": lib, "write": write, "gpu": True, "when": when})
if when == "start":  # the first layer before the thread below, as the worker does
    sb.enter(exec_allowed=True)
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # CUDA's, a candidate's
if when == "init":
    sb.enter(exec_allowed=True)
sb.enter(exec_allowed=False)  # the seal
print(json.dumps(sb.report()))
"""


@pytest.mark.parametrize("when,outside", [("start", 0), ("init", 2)])
def test_the_seal_reports_the_threads_outside_the_first_layer(tmp_path, when, outside):
    """The seal's layer counts the threads started before it. In "start"
    every thread is inside the first layer, so none keeps its file access
    and the report says so (the H200 at d816279 reported CUDA's 17 threads
    as outside). In "init" the threads started before the first layer may
    have started more since: the seal's own count stands (here 2: the one
    from before, and one started between the layers, which it cannot tell
    apart). With the GPU grants /proc/self/status is readable, so the
    layers can count threads (on the CPU's grants they cannot)."""
    from kreward.kernelbench import processes, worker
    p = subprocess.run([sys.executable, "-c", SEAL_AFTER_A_THREAD, worker.__file__,
                        processes.library_path(), str(tmp_path), when],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    assert rep["applied"] and rep["exec"] is False, rep
    if outside:
        assert f"not to the {outside} started before" in rep["landlock_why"], rep
    else:
        assert "started before" not in rep["landlock_why"], rep


def test_auto_falls_back_to_init_where_a_start_worker_cannot_start(problem, monkeypatch):
    """The default sandbox ("auto") is "start" unless a "start" worker fails
    before it has seen any source (on a GPU: CUDA refused inside the
    sandbox, cuInit 304 with another driver's needs); then "init" for the
    rest of the Runner's life, said in every result. Explicit "start" does
    not fall back. The failure is made here by a "start" config naming a
    library that does not exist."""
    from kreward.kernelbench.processes import Processes
    real = Processes._sandbox_config

    def broken_start(self, ext):
        c = real(self, ext)
        if c and c["when"] == "start":
            c = dict(c, library="/nonexistent/libkreward.so.1")
        return c

    monkeypatch.setattr(Processes, "_sandbox_config", broken_start)
    imp, d, _ = problem
    r = Runner(imp, "cpu", cache_dir=str(d / "ext-auto"), timeout_s=300, call_timeout_s=30)
    assert r.sandbox == "start"
    # the first with the baseline: its worker, started as "start" too, is
    # started again as "init" and times the reference
    results = [r.evaluate(HONEST, seed=5, verify_seeds=1, batches=1, calls=2, checks=1),
               run(r, HONEST.replace("clamp_min(0)", "relu()"))]
    assert results[0]["speedup"] is not None and not any("no baseline" in n for n in results[0]["notes"])
    for res in results:
        assert res["verdict"] == "pass", res
        assert res["sandbox"]["when"] == "init" and res["sandbox"]["landlock"], res["sandbox"]
        said = [n for n in res["notes"] if 'the "start" sandbox could not start' in n]
        assert len(said) == 1 and "nonexistent" in said[0], res["notes"]
    assert r.sandbox == "init" and "nonexistent" in r.sandbox_fallback
    r.close()
    strict = Runner(imp, "cpu", cache_dir=str(d / "ext-strict"), timeout_s=300, call_timeout_s=30,
                    sandbox="start")
    res = run(strict, HONEST)
    assert res["verdict"] == "error" and "did not start" in res["feedback"], res
    assert "nonexistent" in res["feedback"]
    strict.close()


def test_auto_decides_once_and_for_the_sandbox_only(problem, monkeypatch):
    """Once a "start" worker has started, a later failure (which a candidate
    might provoke: memory held, a busy device) is an error, never a switch
    to the weaker "init" for the candidates after it; nor does a failure
    that is not the sandbox's switch it."""
    from kreward.kernelbench.processes import Processes, start_sandbox_refused
    assert start_sandbox_refused({"error": "RuntimeError: ... cudaGetDeviceCount() ... Error 304: OS call failed"})
    assert start_sandbox_refused({"error": "x", "sandbox_failed": True})
    assert start_sandbox_refused({"error": "cuInit returned 304"})
    assert not start_sandbox_refused({"error": "RuntimeError: CUDA error: out of memory"})
    assert not start_sandbox_refused({"error": "out of memory: tried to allocate 304.00 MiB"})
    assert not start_sandbox_refused({"error": "CUDA-capable device(s) is/are busy or unavailable"})
    imp, d, _ = problem
    # no spare: the later worker must be started after the sandbox breaks
    # (a spare started at the end of the first evaluation would take the source)
    r = Runner(imp, "cpu", cache_dir=str(d / "ext-auto-once"), timeout_s=300, call_timeout_s=30,
               spare=False)
    assert run(r, HONEST)["sandbox"]["when"] == "start"
    real = Processes._sandbox_config
    monkeypatch.setattr(Processes, "_sandbox_config", lambda self, ext: dict(
        real(self, ext), library="/nonexistent/libkreward.so.1"))
    res = run(r, HONEST.replace("clamp_min(0)", "relu()"))
    assert res["verdict"] == "error" and "did not start" in res["feedback"], res
    assert r.sandbox == "start" and r.sandbox_fallback is None
    r.close()


def test_evaluate_many_gives_every_source_one_result_whatever_the_one_before_did(problem):
    """A candidate that kills its worker, one that does not load and one that
    is denied, between honest ones: a result each, in order, and the honest
    ones after them still run in workers started ahead for them."""
    kw = dict(seed=5, verify_seeds=1, batches=1, calls=2, checks=1, baseline=False)
    crash = HONEST.replace("return x.clamp_min(0)", "os._exit(3)").replace("import torch", "import os, torch")
    broken = "this is not python\n"
    denied = cheat("open('/etc/passwd').read()\n")
    other = HONEST.replace("clamp_min(0)", "relu()")
    r = runner(problem, "start-many", "start")
    results = r.evaluate_many([crash, HONEST, broken, other, denied, HONEST], **kw)
    assert [x["verdict"] for x in results] == ["crash", "pass", "compile_error", "pass", "denied", "pass"], \
        [(x["verdict"], x.get("feedback")) for x in results]
    assert [x["started_ahead"] for x in results[1::2]] == [True, True, True]
    r.close()


GPU_WORKER_READS = r"""
import importlib.util, json, os, sys, threading
path, lib, write = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("kb_worker", path)
worker = importlib.util.module_from_spec(spec); spec.loader.exec_module(worker)
worker.Sandbox({"library": lib, "write": write, "gpu": True, "when": "start"}).enter(exec_allowed=False)
tid = threading.get_native_id()
out = {}
for what, f in [("shm", lambda: os.listdir("/dev/shm")),
                ("net", lambda: open(f"/proc/self/task/{tid}/net/unix").read()),
                ("comm", lambda: open(f"/proc/self/task/{tid}/comm", "w").write("kr-worker"))]:
    try:
        f()
        out[what] = "ok"
    except PermissionError as e:
        out[what] = "refused"
print(json.dumps(out))
"""


def test_a_gpu_worker_reads_neither_dev_shm_nor_the_socket_tables(tmp_path):
    """The ModelNew worker's GPU grants (confine.spec with gpu) leave out
    /dev/shm and the task files' read right, which CUDA starts without (the
    probe on the H200 at 2772c70); thread names stay writable, as the
    driver needs. No GPU is needed to see the grants: with the default
    GPU grants (kr_sandbox_enter without the narrowing) both reads work
    (test_sandbox gpu_worker), so this fails if the worker's spec loses
    either key. The corpus cheats cheat_read_shm/cheat_read_sockets are the
    same reads as candidates (test_sandbox_gpu.py)."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    from kreward.kernelbench import processes, worker
    p = subprocess.run([sys.executable, "-c", GPU_WORKER_READS, worker.__file__,
                        processes.library_path(), str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {
        "shm": "refused", "net": "refused", "comm": "ok"}, p.stdout


def test_triton_is_pointed_at_the_loaded_libcuda_not_at_ldconfig(monkeypatch):
    """A sandbox that refuses exec refuses Triton's /sbin/ldconfig: the
    loaded libcuda's folder is given instead (where none is loaded, as on
    this CPU, nothing is set), and a path already set is kept."""
    from kreward.kernelbench.libcuda_path import point_triton_at_loaded_libcuda
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    with open("/proc/self/maps") as maps:
        loaded = [line.split()[-1] for line in maps if "/libcuda.so" in line]
    got = point_triton_at_loaded_libcuda()
    if loaded:
        assert got == os.path.dirname(loaded[0]) == os.environ["TRITON_LIBCUDA_PATH"]
    else:
        assert got is None and "TRITON_LIBCUDA_PATH" not in os.environ
    monkeypatch.setenv("TRITON_LIBCUDA_PATH", "/opt/elsewhere")
    assert point_triton_at_loaded_libcuda() == "/opt/elsewhere"


COMPILE_IN_SANDBOX = r"""
import importlib.util, json, os, subprocess, sys
path, lib, write = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("kr_kb_confine", path)
confine = importlib.util.module_from_spec(spec); spec.loader.exec_module(confine)
confine.enter(lib, confine.spec(write, gpu=False, exec_allowed=True))
p = subprocess.run(["gcc", "-c", "-x", "c", "-o", write + "/x.o", "-"], input="int f(void){return 1;}",
                   capture_output=True, text=True, env={"PATH": os.environ["PATH"], "TMPDIR": write})
print(json.dumps({"rc": p.returncode, "err": p.stderr[-500:]}))
"""


def test_a_compiler_outside_the_system_trees_runs_in_the_sandbox(tmp_path):
    """A gcc installed under its own prefix (/opt/gcc/bin/gcc, as on the GPU
    machine, first on PATH) is granted with its prefix's libexec and lib:
    vetting's torch.compile got "Permission denied: '/opt/gcc/bin/gcc'" on
    the H100 at 13910f7 when only the system trees were. The stand-in gcc
    reads a file of its libexec (cc1's place) before it compiles."""
    real = shutil.which("gcc")
    if not real:
        pytest.skip("no gcc here")
    prefix = tmp_path / "opt-gcc"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "libexec").mkdir()
    (prefix / "libexec" / "cc1").write_text("cc1's stand-in\n")
    gcc = prefix / "bin" / "gcc"
    gcc.write_text(f'#!/bin/sh\ncat "$(dirname "$0")/../libexec/cc1" > /dev/null || exit 3\n'
                   f'exec {real} "$@"\n')
    gcc.chmod(0o755)
    write = tmp_path / "scratch"
    write.mkdir()
    from kreward.kernelbench import confine, processes
    env = dict(os.environ, PATH=f"{prefix / 'bin'}:{os.environ.get('PATH', '')}")
    assert str(prefix / "libexec") in confine.compiler_reads(env)
    p = subprocess.run([sys.executable, "-c", COMPILE_IN_SANDBOX, confine.__file__,
                        processes.library_path(), str(write)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["rc"] == 0 and (write / "x.o").exists(), out
