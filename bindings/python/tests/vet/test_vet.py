"""kreward problems vet (kreward/vet): a small task set of honest,
duplicated, random, broken, weak and tight problems vetted on the CPU,
each refused for what it is and the rest kept; the run's folder, resuming
and the command line. The GPU's part (timing, launch-bound sizes) is in
test_vet_gpu.py."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="vetting KernelBench files runs them under torch")

from kreward import problems  # noqa: E402
from kreward.vet import Limits, judge, kernelbench_file  # noqa: E402
from kreward.vet.output import RunFolder  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]
TAIL = '''

n = 512


def get_inputs():
    return [torch.randn(n, 64)]


def get_init_inputs():
    return []
'''


def kb(forward, doc="A test problem.", tail=TAIL, extra=""):
    return (f'import torch\nimport torch.nn as nn\n{extra}\n\nclass Model(nn.Module):\n'
            f'    """{doc}"""\n\n    def __init__(self):\n        super().__init__()\n\n'
            f'    def forward(self, x):\n        {forward}\n' + tail)


SET = {
    "relu.py": kb("return torch.relu(x)"),
    # the same function written otherwise, with other comments: a duplicate
    "relu_clamp.py": kb("return x.clamp(min=0)  # rectifier", doc="Clamp at zero."),
    "gelu.py": kb("return torch.nn.functional.gelu(x)"),
    # random state drawn in forward: two runs differ
    "noisy.py": kb("return x + torch.randn_like(x)"),
    # a file that raises when imported
    "broken.py": kb("return x", extra="raise RuntimeError('this file cannot load')"),
    # constant in its inputs: nothing breaks a constant answer
    "ones.py": kb("return torch.isfinite(x).float().mean(dim=1)"),
    "notes.txt": "not a problem\n",
    "helper.py": "def helper():\n    return 1\n",
}


@pytest.fixture(scope="module")
def task_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    for name, text in SET.items():
        (root / name).write_text(text)
    sub = root / "kreward"
    sub.mkdir()
    subprocess.run(["cp", "-r", str(ROOT / "examples/problems/l1_gelu"), str(sub)], check=True)
    bad = sub / "bad_spec"
    bad.mkdir()
    (bad / "problem.json").write_text('{"name": "bad", "tensors": [')
    return root


@pytest.fixture(scope="module")
def vetted(task_set, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KREWARD_IMPORT_CACHE", "")  # every import probed: nothing from earlier runs
        out = tmp_path_factory.mktemp("run") / "vetted"
        seen = []
        run = problems.vet([task_set], out=out, devices="cpu", compile=False, jobs=2,
                           progress=lambda done, total, r: seen.append((done, total, r["problem"])))
        yield run, out, seen


def by_name(run):
    return {r["problem"]: r for r in run.records}


def test_every_problem_gets_one_record_and_non_problems_are_skipped(vetted, task_set):
    run, out, seen = vetted
    names = sorted(by_name(run))
    assert names == sorted(["broken.py", "gelu.py", "noisy.py", "ones.py", "relu.py",
                            "relu_clamp.py", "kreward/bad_spec", "kreward/l1_gelu"])
    assert [s[0] for s in seen] == list(range(1, 9)) and all(s[1] == 8 for s in seen)
    assert sorted(map(str, run.skipped)) == [str(task_set / "helper.py")]
    lines = (out / "vet.jsonl").read_text().splitlines()
    assert [json.loads(ln)["problem"] for ln in lines] == names


def test_honest_problems_are_kept_with_their_measurements(vetted):
    r = by_name(vetted[0])
    for name in ("relu.py", "gelu.py"):
        rec = r[name]
        # where its seconds went, step by step, none of them missing
        steps = rec["steps_s"]
        assert set(steps) == {"import_s", "device_wait_s", "setup_s", "determinism_s",
                              "headroom_s", "timing_s"}, steps
        assert all(v >= 0 for v in steps.values()) and steps["import_s"] > 0
        assert rec["kept"], rec["reasons"]
        assert rec["import"]["ok"] and rec["deterministic"] and rec["device"] == "cpu"
        assert rec["reference_ms"]["eager"] > 0 and rec["reference_ms"]["compile"] is None
        assert set(rec["cases_ms"]) == set(rec["import"]["cases"]) - {"strong"}
        assert rec["tolerance_headroom"] >= 2 and rec["duplicate_of"] is None
        assert rec["trivial"] == {"zeros": False, "constant": False, "input": False,
                                  "other_case": False}


def test_the_same_function_written_otherwise_is_a_duplicate(vetted):
    r = by_name(vetted[0])
    assert r["relu_clamp.py"]["duplicate_of"] == "relu.py"
    assert not r["relu_clamp.py"]["kept"]
    assert r["relu_clamp.py"]["reasons"] == ["duplicate of relu.py"]
    assert r["gelu.py"]["duplicate_of"] is None  # same inputs, another function


NONNEGATIVE = '''import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.{fn}(x)


batch = 256
dim = 4096


def get_inputs():
    return [torch.rand(batch, dim)]


def get_init_inputs():
    return []
'''


def test_functions_alike_on_one_draw_of_a_strengthened_recipe_are_not_duplicates(tmp_path):
    """ReLU, LeakyReLU and ELU on torch.rand inputs: the input passed
    through passes, so each is strengthened with inputs at other scales and
    offsets, on which they differ. A fingerprint of one draw (a positive
    offset there) called relu.py a duplicate of leaky.py, as the upstream
    level 1's 20_LeakyReLU and 31_ELU were called 19_ReLU's on an H100."""
    for name, fn in (("relu", "relu"), ("leaky", "leaky_relu"), ("elu", "elu")):
        (tmp_path / f"{name}.py").write_text(NONNEGATIVE.format(fn=fn))
    run = problems.vet([tmp_path / "relu.py", tmp_path / "leaky.py", tmp_path / "elu.py"],
                       out=tmp_path / "v", devices="cpu", compile=False, jobs=2)
    r = by_name(run)
    assert all(rec["strengthened"] for rec in r.values()), r
    # the first draw alone cannot tell ReLU from LeakyReLU here: the others do
    first = [r[n]["fingerprint"]["samples"][0]["values"] for n in ("relu.py", "leaky.py")]
    assert first[0] == pytest.approx(first[1], rel=1e-3, abs=1e-5)
    assert [r[n]["duplicate_of"] for n in ("elu.py", "leaky.py", "relu.py")] == [None] * 3, r
    assert all(rec["kept"] for rec in r.values())


def test_random_state_in_forward_is_refused_as_not_deterministic(vetted):
    rec = by_name(vetted[0])["noisy.py"]
    assert not rec["kept"] and rec["deterministic"] is False
    assert "not deterministic" in rec["reasons"][0]


def test_a_file_that_raises_is_refused_with_its_error(vetted):
    rec = by_name(vetted[0])["broken.py"]
    assert not rec["kept"] and not rec["import"]["ok"]
    assert "this file cannot load" in rec["reasons"][0]


def test_a_problem_passed_by_a_constant_is_refused_as_weak(vetted):
    rec = by_name(vetted[0])["ones.py"]
    assert not rec["kept"] and rec["weak"] and rec["trivial"]["constant"]
    assert rec["strengthened"] is None
    assert any(x.startswith("weak:") for x in rec["reasons"])


def test_kreward_problems_are_vetted_too(vetted):
    r = by_name(vetted[0])
    good, bad = r["kreward/l1_gelu"], r["kreward/bad_spec"]
    assert good["kind"] == "kreward" and good["import"]["ok"] and good["kept"]
    assert "reference time (" in " ".join(good["unchecked"])  # no GPU: said, not passed over
    assert not bad["kept"] and not bad["import"]["ok"]
    assert "problem.json" in bad["reasons"][0] or "JSON" in bad["reasons"][0]


def test_the_kept_and_refused_folders_hold_the_files_at_their_names(vetted):
    run, out, _ = vetted
    kept = sorted(str(p.relative_to(out / "kept")) for p in (out / "kept").rglob("*.py"))
    assert kept == ["gelu.py", "relu.py"]
    assert (out / "kept/kreward/l1_gelu/problem.json").exists()
    assert (out / "refused/relu_clamp.py").read_text() == SET["relu_clamp.py"]
    assert (out / "refused/kreward/bad_spec/problem.json").exists()
    summary = (out / "summary.md").read_text()
    assert summary == run.summary and "3 of 8 problems kept" in summary
    for name in by_name(run):
        assert f"| {name} |" in summary


def test_a_resumed_run_measures_only_what_changed(vetted, task_set, monkeypatch, tmp_path):
    _, out, _ = vetted
    work = tmp_path / "tasks"
    subprocess.run(["cp", "-r", str(task_set), str(work)], check=True)
    first = problems.vet([work], out=tmp_path / "v", devices="cpu", compile=False, jobs=2)
    calls = []
    real = kernelbench_file.import_step
    monkeypatch.setattr(kernelbench_file, "import_step",
                        lambda path, *a, **k: calls.append(os.path.basename(path)) or real(path, *a, **k))
    (work / "gelu.py").write_text(SET["gelu.py"].replace("n = 512", "n = 256"))
    again = problems.vet([work], out=tmp_path / "v", devices="cpu", compile=False, jobs=2)
    assert calls == ["gelu.py"]
    assert [r["problem"] for r in again.records] == [r["problem"] for r in first.records]
    # other limits judge the same measurements again, without running anything
    calls.clear()
    strict = problems.vet([work], out=tmp_path / "v", devices="cpu", compile=False,
                          limits=Limits(max_reference_ms=1e-6))
    assert calls == []
    assert all(not r["kept"] for r in strict.records if r["kind"] == "kernelbench")
    assert any("slow reference" in x for x in by_name(strict)["relu.py"]["reasons"])


def test_an_interrupted_log_line_is_dropped_on_resume(tmp_path):
    folder = RunFolder(tmp_path / "v")
    folder.append({"path": "/a", "sha256": "1", "measure_key": "k", "problem": "a"})
    with open(folder.log, "a") as f:
        f.write('{"path": "/b", "sha2')  # killed mid-write
    assert list(folder.earlier()) == [("/a", "1", "k")]


def test_a_folder_of_something_else_is_not_written_into(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="something else"):
        problems.vet([ROOT / "examples/problems/l1_gelu"], out=tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_a_vetting_step_that_fails_still_gives_the_problem_a_refused_record(tmp_path, monkeypatch):
    (tmp_path / "t").mkdir()
    (tmp_path / "t/relu.py").write_text(SET["relu.py"])

    def explode(*a, **k):
        raise MemoryError("out of memory in the vetting process")
    monkeypatch.setattr(kernelbench_file, "import_step", explode)
    run = problems.vet([tmp_path / "t"], devices="cpu", compile=False)
    (rec,) = run.records
    assert not rec["kept"] and "out of memory" in rec["measure_error"]
    assert "did not run" in rec["reasons"][0]


def test_a_tolerance_tighter_than_the_references_own_rounding_is_refused(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t/matmul.py").write_text(kb("return x @ x.T"))
    run = problems.vet([tmp_path / "t"], devices="cpu", compile=False, atol=1e-7, rtol=1e-7)
    (rec,) = run.records
    assert rec["import"]["ok"], rec["reasons"]
    assert rec["tolerance_headroom"] < 2
    assert any(x.startswith("tolerance too tight") for x in rec["reasons"])


def test_judge_reports_what_it_could_not_check_without_refusing():
    rec = {"kind": "kernelbench", "import": {"ok": True}, "deterministic": True,
           "reference_ms": None, "time_skipped": "no GPU here", "tolerance_headroom": 50.0}
    kept, reasons, unchecked = judge(rec, Limits())
    assert kept and reasons == [] and unchecked == ["reference time (no GPU here)"]
    rec.update(reference_ms={"eager": 150.0}, launch_bound=True, weak="zeros pass")
    kept, reasons, _ = judge(rec, Limits())
    assert not kept and len(reasons) == 3
    kept, reasons, _ = judge(rec, Limits(max_reference_ms=200, refuse_launch_bound=False,
                                         refuse_weak=False))
    assert kept and reasons == []


def test_the_command_line_vets_and_prints_the_table(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t/relu.py").write_text(SET["relu.py"])
    (tmp_path / "t/broken.py").write_text(SET["broken.py"])
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings/python"), KREWARD_IMPORT_CACHE="")
    out = subprocess.run([sys.executable, "-m", "kreward.vet", str(tmp_path / "t"), "--out",
                          str(tmp_path / "v"), "--devices", "cpu", "--no-compile", "-q",
                          "--html", str(tmp_path / "vet.html")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "1 of 2 problems kept" in out.stdout and "| broken.py |" in out.stdout
    assert "1 kept, 1 refused" in out.stdout
    page = (tmp_path / "vet.html").read_text()
    assert "relu.py" in page and "broken.py" in page and "this file cannot load" in page
    bad = subprocess.run([sys.executable, "-m", "kreward.vet", str(tmp_path / "nothing")],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr


def test_the_output_sample_reaches_the_last_element_of_a_large_output():
    """Positions from a float32 linspace rounded past the end of a 100M
    element output (upstream KernelBench's 19_ReLU): integer positions."""
    import torch
    from kreward.vet import measure
    n = 1 << 25  # n - 1 in float32 rounds up to n
    x = torch.arange(n, dtype=torch.int32)
    s = measure._sample(torch, x)
    assert len(s["values"]) == measure.SAMPLE
    assert s["values"][0] == 0 and s["values"][-1] == n - 1


EVIL = '''import json, os, sys
import torch
import torch.nn as nn
# a forged answer for whichever process runs this file, and writes outside it
print(json.dumps({{"ok": True, "weak": None, "strong": None, "trivial": {{}},
                  "deterministic": True, "tolerance_headroom": 1e9, "forged": True}}))
for target in ({targets!r}):
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write("planted")
    except OSError:
        pass


class Model(nn.Module):
    def forward(self, x):
        return torch.isfinite(x).float().mean(dim=1)


n = 256


def get_inputs():
    return [torch.randn(n, 64)]


def get_init_inputs():
    return []
'''


def test_a_problem_file_cannot_forge_its_verdict_or_write_outside(tmp_path, monkeypatch):
    """The file runs in the probes, the soundness check and the measuring
    process: it prints a forged answer line and writes into the import
    cache and next to the vetting folder. Its prints go to stderr (each
    process answers on a channel of its own) and its writes are refused
    (the sandbox: a temporary folder is its only write): it is judged on
    what it computes, a constant, and refused as weak."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KREWARD_IMPORT_CACHE", str(cache))
    targets = (str(cache / "planted.json"), str(tmp_path / "planted" / "x.txt"),
               str(tmp_path / "v" / "vet.jsonl"))
    (tmp_path / "t").mkdir()
    (tmp_path / "t/evil.py").write_text(EVIL.format(targets=targets))
    run = problems.vet([tmp_path / "t"], out=tmp_path / "v", devices="cpu", compile=False)
    (rec,) = run.records
    assert "forged" not in rec and rec["weak"] and not rec["kept"], rec
    assert rec["trivial"]["constant"] is True
    assert not (cache / "planted.json").exists() and not (tmp_path / "planted").exists()
    assert "planted" not in (tmp_path / "v" / "vet.jsonl").read_text()


def test_an_original_is_one_kept_on_every_other_count():
    """A problem refused for another reason (a noisy reading, a failed
    measurement) does not take its copy down with it."""
    from kreward.vet import duplicates
    fp = {"key": "k", "samples": [{"values": [1.0, 2.0], "sum": 3.0, "abs_sum": 3.0}]}
    records = [{"problem": "a.py", "kind": "kernelbench", "import": {"ok": True}, "kept": False,
                "fingerprint": fp},
               {"problem": "b.py", "kind": "kernelbench", "import": {"ok": True}, "kept": True,
                "fingerprint": fp},
               {"problem": "c.py", "kind": "kernelbench", "import": {"ok": True}, "kept": True,
                "fingerprint": fp}]
    duplicates.mark(records)
    assert [r["duplicate_of"] for r in records] == ["b.py", None, "b.py"]


def test_gpus_are_named_as_this_process_sees_them(monkeypatch):
    """Under a scheduler's CUDA_VISIBLE_DEVICES=2,3 torch's GPU 1 is the
    machine's 3: the measuring process is given 3, and a GPU named twice
    is one slot."""
    from kreward.vet.placement import Devices
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    devs = Devices([1, 1])
    with devs.acquire() as where:
        assert where.visible_devices == "3" and where.times
    assert devs.names == ["cuda:1"]
    with pytest.raises(ValueError, match="sees 2 GPU"):
        with Devices([5]).acquire():
            pass


def test_a_run_inside_its_own_input_does_not_vet_its_output(tmp_path, monkeypatch):
    monkeypatch.setenv("KREWARD_IMPORT_CACHE", "")
    (tmp_path / "relu.py").write_text(SET["relu.py"])
    calls = []
    real = kernelbench_file.import_step
    monkeypatch.setattr(kernelbench_file, "import_step",
                        lambda path, *a, **k: calls.append(path) or real(path, *a, **k))
    first = problems.vet([tmp_path], out=tmp_path / "vetted", devices="cpu", compile=False)
    again = problems.vet([tmp_path], out=tmp_path / "vetted", devices="cpu", compile=False)
    assert [r["problem"] for r in first.records] == [r["problem"] for r in again.records] == ["relu.py"]
    assert len(calls) == 1 and (tmp_path / "vetted" / "kept" / "relu.py").exists()


def test_a_record_whose_measurement_failed_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KREWARD_IMPORT_CACHE", "")
    (tmp_path / "t").mkdir()
    (tmp_path / "t/relu.py").write_text(SET["relu.py"])
    real = kernelbench_file.measure_step
    monkeypatch.setattr(kernelbench_file, "measure_step", lambda *a, **k: dict(
        real(*a, **k), measure_error="the measuring process ended (killed: out of memory?)"))
    failed = problems.vet([tmp_path / "t"], out=tmp_path / "v", devices="cpu", compile=False)
    assert not failed.records[0]["kept"]
    monkeypatch.setattr(kernelbench_file, "measure_step", real)
    again = problems.vet([tmp_path / "t"], out=tmp_path / "v", devices="cpu", compile=False)
    assert again.records[0]["kept"] and "measure_error" not in again.records[0]


def test_kreward_problems_launched_otherwise_are_not_duplicates(tmp_path):
    from kreward.vet.kreward_file import _normalised_source
    a = "// kreward: launch k grid=(N) block=(256) args=(a, b, N)\n__global__ void k() {}\n"
    b = "// kreward: launch k grid=(N) block=(256) args=(b, a, N)\n__global__ void k() {}\n"
    c = "// a comment\n// kreward: launch k grid=(N)   block=(256) args=(a, b, N)\n__global__ void k()  {}\n"
    assert _normalised_source(a) != _normalised_source(b)
    assert _normalised_source(a) == _normalised_source(c)


def test_a_soundness_check_that_could_not_run_is_no_pass(tmp_path, monkeypatch):
    """Unknown soundness is not sound: the problem gets weak_problem (no
    speed credit), vetting lists it as not checked, and the import is not
    kept, so the next one checks again."""
    from kreward.kernelbench import import_problem, soundness
    calls = []
    monkeypatch.setattr(soundness, "check", lambda imp, timeout_s=300, process=None: calls.append(1) or
                        {"error": "the soundness check ran past 300 s"})
    (tmp_path / "relu.py").write_text(SET["relu.py"])
    for _ in range(2):
        imp = import_problem(str(tmp_path / "relu.py"), cache_dir=str(tmp_path / "cache"))
        assert imp.weak and "could not be checked" in imp.weak and not imp.from_cache
    assert len(calls) == 2
    rec = {"kind": "kernelbench", "import": {"ok": True}, "deterministic": True,
           "reference_ms": {"eager": 1.0}, "tolerance_headroom": 10.0,
           "soundness_error": "ran past 300 s", "weak": imp.weak}
    kept, reasons, unchecked = judge(rec, Limits())
    assert not kept and unchecked == ["soundness (ran past 300 s)"]


def test_a_file_with_a_byte_order_mark_imports(tmp_path):
    """Python imports a UTF-8 file with a BOM; the probes compiled its text
    and refused it (U+FEFF): they compile its bytes now."""
    from kreward.kernelbench import import_problem
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + SET["relu.py"].encode())
    imp = import_problem(str(tmp_path / "bom.py"), cache_dir=None)
    assert imp.weak is None and [c[0] for c in imp.cases][0] == "base"


def test_torch_compile_runs_inside_the_sandbox(tmp_path):
    """The reference timed under torch.compile too, in the sandboxed
    measurement process: inductor names its caches by user, and the
    sandbox refuses the password file (on the H200 at 2fd32eb every
    compile timing came back None: "getpwuid(): uid not found")."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t/mm.py").write_text(
        kb("return torch.relu(x @ x.T) + 1", doc="A small matmul.").replace("n = 512", "n = 64"))
    run = problems.vet([tmp_path / "t"], out=tmp_path / "v", devices="cpu", compile=True)
    rec = run.records[0]
    assert not any("without a sandbox" in n for n in rec["notes"]), rec["notes"]
    assert not any("torch.compile failed" in n for n in rec["notes"]), rec["notes"]
    assert rec["reference_ms"]["compile"] > 0, rec


def test_a_run_imports_and_measures_chunk_by_chunk(tmp_path, monkeypatch):
    """A run stopped midway keeps the records of the chunks it finished:
    no file of a later chunk is imported before the earlier chunk is
    measured and written."""
    (tmp_path / "t").mkdir()
    for i in range(5):
        (tmp_path / f"t/relu{i}.py").write_text(SET["relu.py"].replace("n = 512", f"n = {512 + i}"))
    events = []
    real_import, real_measure = kernelbench_file.import_step, kernelbench_file.measure_step

    def imported(path, *a, **k):
        events.append(("import", os.path.basename(path)))
        return real_import(path, *a, **k)

    def measured(record, imp, *a, **k):
        rec = real_measure(record, imp, *a, **k)
        events.append(("measure", os.path.basename(imp.path)))
        return rec
    monkeypatch.setattr(kernelbench_file, "import_step", imported)
    monkeypatch.setattr(kernelbench_file, "measure_step", measured)
    lines_at = []
    out = tmp_path / "v"
    problems.vet([tmp_path / "t"], out=out, devices="cpu", compile=False, jobs=2, chunk=2,
                 progress=lambda done, total, r: lines_at.append(
                     len((out / "vet.jsonl").read_text().splitlines())))
    chunks = [events[i:i + 4] for i in (0, 4)] + [events[8:]]
    for c in chunks[:2]:
        assert [e[0] for e in c] == ["import", "import", "measure", "measure"]
        assert {e[1] for e in c if e[0] == "import"} == {e[1] for e in c if e[0] == "measure"}
    assert [e[0] for e in chunks[2]] == ["import", "measure"]
    assert lines_at == [1, 2, 3, 4, 5]  # each record written as it finished
    with pytest.raises(ValueError, match="at least one file"):
        problems.vet([tmp_path / "t"], devices="cpu", compile=False, chunk=0)


def json_module(tmp_path, monkeypatch, name, text):
    """A json_process module of the test's own, importable by a child."""
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))


def test_a_measuring_process_started_ahead_has_imported_before_its_request(tmp_path, monkeypatch):
    """json_process.start: the child's warm step (torch's import, for
    vetting) runs while the caller waits for a device, not after."""
    import time
    from kreward import json_process
    json_module(tmp_path, monkeypatch, "warm_probe",
                "import time\nfrom kreward import json_process\nWARMED = []\n"
                "def warm():\n    time.sleep(1.0)\n    WARMED.append(time.time())\n"
                "def run(req):\n    return {'warmed': WARMED[0], 'asked': time.time(), 'x': req['x']}\n"
                "json_process.serve(run, warm=warm)\n")
    child = json_process.start("warm_probe")
    time.sleep(1.5)  # the caller's wait for a free device
    t0 = time.time()
    answer = child.call({"x": 7}, 30, "the probe")
    assert answer["x"] == 7 and answer["warmed"] < t0 <= answer["asked"]
    assert time.time() - t0 < 1.0
    child.kill()  # after it answered: nothing to do, no error
    late = json_process.start("warm_probe")
    late.kill()  # never asked: ended, its session with it
    assert late.proc.returncode is not None


def test_a_finished_measuring_process_leaves_nothing_running(tmp_path, monkeypatch):
    """Child.kill() ends the whole session even after its leader answered
    and exited: a process the problem file started does not outlive it."""
    import time
    from kreward import json_process
    json_module(tmp_path, monkeypatch, "spawner",
                "import subprocess\nfrom kreward import json_process\n"
                "def run(req):\n"
                "    p = subprocess.Popen(['sleep', '60'], stdin=subprocess.DEVNULL,\n"
                "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                "    return {'pid': p.pid}\n"
                "json_process.serve(run)\n")
    child = json_process.start("spawner")
    pid = child.call({}, 30, "the spawner")["pid"]

    def running():
        try:
            with open(f"/proc/{pid}/status") as f:
                return "\nState:\tZ" not in f.read()
        except FileNotFoundError:
            return False
    assert running()
    child.kill()
    deadline = time.time() + 5
    while running() and time.time() < deadline:
        time.sleep(0.05)
    assert not running()
