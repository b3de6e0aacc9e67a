"""bench/bench_kernelbench.py and its replica of KernelBench's eval loop
(bench/kernelbench_reference_eval.py), on the CPU: the loop's logic (trial
seeds, the order reference-then-candidate, what each check records, timing
trial counts, the excessive-speedup flag, loading, the spawned process with
its timeout) and the bench's selection, verdicts and table. The timed run
itself needs a GPU (the lead's command in docs/kernelbench.md)."""
import importlib
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench"
RELU = ROOT / "examples" / "kernelbench" / "candidates" / "level1_01_relu"


@pytest.fixture(scope="module")
def kbe():
    pytest.importorskip("torch", reason="the replicated KernelBench loop needs torch")
    pytest.importorskip("numpy", reason="KernelBench's timing stats use numpy")
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("kernelbench_reference_eval")
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("bench_kernelbench")
    finally:
        sys.path.remove(str(BENCH))


# a small problem: the loop's logic, not the corpus' sizes, is under test
PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(16, 32)]

def get_init_inputs():
    return []
"""

HONEST = """
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
"""


def run(kbe, cand, **kw):
    kw = {"num_correct_trials": 5, "num_perf_trials": 4, "measure_performance": True,
          "device": "cpu", **kw}
    return kbe.eval_kernel_against_ref(PROBLEM, cand, **kw)


def test_honest_candidate_passes_every_trial_and_is_timed(kbe):
    res = run(kbe, HONEST)
    assert res["compiled"] and res["correctness"], res
    assert res["metadata"]["correctness_trials"] == "(5 / 5)"
    assert res["runtime_stats"]["num_trials"] == 4 and res["ref_runtime_stats"]["num_trials"] == 4
    assert res["runtime"] == res["runtime_stats"]["mean"] > 0
    assert "excessive_speedup" not in res["metadata"]


def test_a_wrong_candidate_is_recorded_on_every_trial(kbe):
    # KernelBench does not stop at the first mismatch: each trial's diff is kept
    res = run(kbe, (RELU / "cheat_constant.py").read_text())
    assert res["compiled"] and not res["correctness"]
    assert res["metadata"]["correctness_issue"] == "Output mismatch"
    assert len(res["metadata"]["max_difference"]) == 5
    assert res["metadata"]["correctness_trials"] == "(0 / 5)"
    assert res["runtime"] == -1.0  # not timed


def test_trials_use_fresh_inputs_so_a_shape_keyed_cache_fails_after_the_first(kbe):
    res = run(kbe, (RELU / "cheat_cache.py").read_text())
    assert not res["correctness"]
    assert res["metadata"]["correctness_trials"] == "(1 / 5)"


def test_what_the_loop_does_not_catch(kbe):
    # the reference runs first, so a candidate that writes its input passes;
    # only 5 calls are checked, so work skipped on later calls passes too
    for name in ("cheat_write_input.py", "cheat_skip_unchecked.py", "cheat_torch_fallback.py"):
        res = run(kbe, (RELU / name).read_text())
        assert res["correctness"], (name, res)


def test_shape_mismatch_runtime_error_and_load_failures(kbe):
    res = run(kbe, HONEST.replace("x.clamp_min(0)", "x.clamp_min(0).t()"))
    assert not res["correctness"]
    assert res["metadata"]["correctness_issue"].startswith("Output shape mismatch")
    res = run(kbe, HONEST.replace("return x.clamp_min(0)", "raise RuntimeError('boom' * 100)"))
    assert not res["correctness"] and res["metadata"]["runtime_error_name"] == "builtins.RuntimeError"
    assert len(res["metadata"]["runtime_error"]) == 200  # truncated as KernelBench does
    res = run(kbe, "def broken(:\n")
    assert not res["compiled"] and res["metadata"]["compilation_error_name"] == "SyntaxError"
    res = run(kbe, "import torch\n")
    assert not res["compiled"]  # no ModelNew
    res = run(kbe, "import torch\nraise ImportError('no such extension')\n")
    assert not res["compiled"] and "no such extension" in res["metadata"]["compilation_error"]


def test_excessive_speedup_is_flagged(kbe):
    slow_ref = PROBLEM.replace("return torch.relu(x)", "import time; time.sleep(0.02); return torch.relu(x)")
    res = kbe.eval_kernel_against_ref(slow_ref, HONEST, num_correct_trials=1, num_perf_trials=3,
                                      measure_performance=True, device="cpu")
    assert res["correctness"] and res["metadata"].get("excessive_speedup") is True
    assert res["ref_runtime"] > 10 * res["runtime"]


def test_trial_seeds_are_drawn_from_the_seed(kbe):
    import torch
    seen = []

    class Log(torch.nn.Module):
        def forward(self, x):
            seen.append(x.sum().item())
            return x

    def get_inputs():
        return [torch.randn(8)]

    for _ in range(2):
        kbe.run_and_check_correctness(Log(), Log(), get_inputs, {}, 3, 42, "cpu", torch.float32)
    first, second = seen[:6], seen[6:]
    assert first == second                      # reproducible from the seed
    assert first[0] == first[1]                 # reference and candidate get the same inputs ...
    assert len({first[0], first[2], first[4]}) == 3  # ... and each trial fresh ones


def test_cuda_event_timing_counts(kbe):
    calls = []
    times = kbe.time_execution_with_cuda_event(lambda: calls.append(1), [], num_warmup=3, num_trials=7,
                                               device="cpu")
    assert len(times) == 7 and len(calls) == 3 + 7 + 1  # warm-ups, trials, the discarded first
    stats = kbe.get_timing_stats([1.23456, 2.0, 3.0])
    assert stats == {"mean": 2.08, "std": 0.723, "min": 1.23, "max": 3.0, "num_trials": 3}


def test_build_dir_and_triton_tempfile_loading(kbe, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    ctx = {}
    src = HONEST + "\nimport os\nSEEN = os.environ['TORCH_EXTENSIONS_DIR']\n"
    assert kbe.load_custom_model(src, ctx, str(tmp_path / "build")) is ctx["ModelNew"]
    assert ctx["SEEN"] == str(tmp_path / "build") == ctx["BUILD_DIRECTORY"]
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    res = run(kbe, HONEST, backend="triton")
    assert res["correctness"]
    assert [p.name for p in tmp_path.iterdir()] == []  # the module file was removed


def test_one_sample_in_a_spawned_process_with_its_timeout(kbe):
    res, err = kbe.evaluate_in_fresh_process(PROBLEM, HONEST, timeout_s=120, num_correct_trials=2,
                                             device="cpu")
    assert err is None and res["correctness"], (res, err)
    hang = HONEST.replace("return x.clamp_min(0)", "import time; time.sleep(120)")
    res, err = kbe.evaluate_in_fresh_process(PROBLEM, hang, timeout_s=20, device="cpu")
    assert res is None and err == "timeout after 20 s"


def test_bench_refuses_without_a_gpu_and_parses_its_arguments(tmp_path):
    probe = "import sys, torch; sys.exit(3 if torch.cuda.is_available() else 0)"  # no torch: 1
    have_gpu = subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 3
    if have_gpu:
        pytest.skip("a GPU is here: the bench would run for real")
    p = subprocess.run([sys.executable, str(BENCH / "bench_kernelbench.py"), "--json", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "bench_kernelbench: needs a GPU (skipped" in p.stdout, p
    assert not (tmp_path / "x").exists()
    p = subprocess.run([sys.executable, str(BENCH / "bench_kernelbench.py"), "--budget-s", "soon"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--budget-s" in p.stderr


def test_selection_follows_the_manifest(bench):
    manifest = json.loads((ROOT / "examples" / "kernelbench" / "candidates" / "manifest.json").read_text())
    work = bench.select(bench.parse_args([]))
    assert len(work) == sum(len(c) for c in manifest.values())
    relu = bench.select(bench.parse_args(["--problems", "01_relu", "--reference"]))
    assert {p for p, _, _ in relu} == {"level1/01_relu.py"}
    assert relu[-1] == ("level1/01_relu.py", None, "torch_fallback")
    assert len(relu) == len(manifest["level1/01_relu.py"]) + 1
    every = bench.select(bench.parse_args(["--all"]))
    corpus = list((ROOT / "examples" / "kernelbench").glob("level*/*.py"))
    assert sum(1 for _, c, _ in every if c is None) == len(corpus)
    models = bench.select(bench.parse_args(["--all", "--models-only", "--problems", "level2", "01_relu"]))
    assert models and all(c is None for _, c, _ in models)
    assert {p for p, _, _ in models} == {"level1/01_relu.py"} | {
        f"level2/{p.name}" for p in (ROOT / "examples" / "kernelbench" / "level2").glob("*.py")}

    # a folder of problems not ours (a KernelBench checkout): every
    # level*/*.py, each problem's Model only, the corpus manifest unread
    upstream = ROOT / "examples" / "kernelbench"
    other = bench.select(bench.parse_args(["--problems-dir", str(upstream), "--problems", "level3"]))
    assert other and all(c is None and e == "torch_fallback" for _, c, e in other)
    assert {p for p, _, _ in other} == {f"level3/{p.name}" for p in (upstream / "level3").glob("*.py")}


def test_the_spare_switch(bench):
    """--no-spare-ahead: the spare started once a candidate is done, or none
    where KernelBench's timing follows each candidate (that start would
    overlap it); the default starts it while the candidate runs."""
    assert bench.spare_options(bench.parse_args([])) == {"spare": True, "spare_ahead": True}
    assert bench.spare_options(bench.parse_args(["--no-spare-ahead"])) == {"spare": False}
    assert bench.spare_options(bench.parse_args(["--no-spare-ahead", "--no-kernelbench"])) == \
        {"spare": True, "spare_ahead": False}


def test_a_table_without_kernelbench_runs(bench):
    rows = [{"problem": "level1/23_Softmax.py", "candidate": "Model (itself)", "cand_path": None,
             "expected": "torch_fallback", "kreward_verdict": "pass (torch_fallback)",
             "kreward_caught": True, "kreward_s": 4.0, "kb_verdict": "not run", "kb_caught": False,
             "kb_s": 0.0}]
    assert bench.table(rows).splitlines()[1].split()[-3:] == ["4.00", "-", "-"]
    assert bench.totals(rows, 2.0) == ("totals over 1 candidates: kreward 4.0 s (4.00 s/candidate); "
                                       "problem setup (import + reference) 2.0 s in all")

def test_the_baseline_memo_line(bench):
    """--no-baseline-memo, and how often the memo stood in (the results'
    baseline_memo; a row without a baseline timed counts for nothing)."""
    assert bench.parse_args(["--no-baseline-memo"]).no_baseline_memo and not bench.parse_args([]).no_baseline_memo
    memo = {"used": False, "compared": False, "fresh": 5, "memo": 0, "why": "no samples for this schedule yet"}
    rows = [{"kreward_baseline_memo": memo},
            {"kreward_baseline_memo": dict(memo, used=True, compared=True, fresh=3, memo=5)},
            {"kreward_baseline_memo": dict(memo, compared=True)},
            {"kreward_baseline_memo": None}]
    assert bench.memo_report(rows, False) == ("kreward baseline memo: used in 1 of 3 baseline timings (1 fell "
                                              "back to the full schedule: their fresh batches disagreed)")
    assert bench.memo_report(rows, True).startswith("kreward baseline memo: off")
    assert bench.memo_report(rows[3:], False) == "kreward baseline memo: no baseline timed"


def test_verdicts_and_the_table(bench, kbe):
    wrong = run(kbe, (RELU / "cheat_constant.py").read_text())
    ok = run(kbe, HONEST)
    assert bench.kb_verdict(wrong, None) == "wrong" and bench.kb_caught(wrong, None)
    assert bench.kb_verdict(ok, None) == "pass" and not bench.kb_caught(ok, None)
    assert bench.kb_verdict(None, "timeout after 180 s") == "timeout"
    assert bench.kb_verdict(None, None) == "retry" and not bench.kb_caught(None, None)
    fallback = {"verdict": "pass", "torch_fallback": True}
    assert bench.kreward_verdict(fallback) == "pass (torch_fallback)" and bench.kreward_caught(fallback)
    assert not bench.kreward_caught({"verdict": "pass", "torch_fallback": False, "timing_mismatch": False})
    rows = [{"problem": "level1/01_relu.py", "candidate": "cheat_constant.py",
             "cand_path": "level1_01_relu/cheat_constant.py", "expected": "wrong",
             "kreward_verdict": "wrong", "kreward_caught": True, "kreward_s": 2.0,
             "kb_verdict": bench.kb_verdict(wrong, None), "kb_caught": True, "kb_s": 5.0}]
    text = bench.table(rows)
    assert text.splitlines()[0].split()[:3] == ["problem", "candidate", "expected"]
    assert text.splitlines()[1].split()[-3:] == ["2.00", "5.00", "2.50"]
    assert "KernelBench/kreward 2.50x" in bench.totals(rows, 1.0)
    assert "caught by kreward and KernelBench" in bench.cheats_report(rows)
    assert bench.phases_report(rows) == "kreward phases: none recorded"
    rows[0]["kreward_phases_s"] = {"start_and_load": 1.0, "verify": 0.5}
    rows.append(dict(rows[0], kreward_phases_s={"start_and_load": 3.0}))
    assert bench.phases_report(rows) == "kreward phases (mean s per candidate): start_and_load 2.00, verify 0.50"


def test_timing_noise_bench_runs_identical_code_on_the_cpu(tmp_path):
    """bench/kernelbench_timing_noise.py: one problem, two evaluations of its
    own Model on the CPU, every run in the JSON with both sides' batches."""
    pytest.importorskip("torch", reason="the runner needs torch")
    out = tmp_path / "noise.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "kernelbench_timing_noise.py"), "--device",
                        "cpu", "--repeats", "2", "--problems", "level1/01_relu", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "baseline alone: before" in p.stdout and "2 runs: speedup" in p.stdout
    runs = json.loads(out.read_text())[0]["runs"]
    assert [r["verdict"] for r in runs] == ["pass", "pass"]
    assert all(len(r["batches_us"]["candidate"]) == len(r["batches_us"]["baseline"]) == 5 for r in runs)


@pytest.mark.parametrize("script", ["bench_staging.py", "gpu_idle_clock.py", "profiler_after_cost.py",
                                    "process_placement.py"])
def test_gpu_experiments_say_what_they_need(script):
    """The GPU experiments load and, without a GPU, say so and exit 0 (CI
    and this machine); on one they print their table."""
    torch = pytest.importorskip("torch", reason="the experiments need torch")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / script)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    if torch.cuda.is_available():
        assert "| way |" in p.stdout, p.stdout
    else:
        assert "needs a GPU (skipped)" in p.stdout, p.stdout


def _bench_module(name):
    """A bench script imported as a module (bench/ on sys.path meanwhile:
    each script imports its siblings, as `python3 bench/<name>.py` does)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def test_the_batch_bench_runs_kernelbench_s_method_on_its_candidates(kbe):
    """bench_kernelbench_batch.py --kernelbench-method: KernelBench's own
    method on the batch's candidates, one fresh process each, judged as the
    batch expects them (here on the CPU: the Model as ModelNew passes, the
    wrong one, its outputs shifted, fails every trial)."""
    pytest.importorskip("triton", reason="the batch bench's Triton candidates import triton")
    batch_bench = _bench_module("bench_kernelbench_batch")
    made = batch_bench.candidates("level1/01_relu.py", 3, 3, triton_ok=False)
    batch = [("level1/01_relu.py", *c) for c in (made[0], made[2])]
    assert [want for _, _, want, _ in batch] == ["passed", "incorrect"]
    row = batch_bench.run_kernelbench_method(batch, 5, device="cpu")
    assert row["n"] == 2 and row["wrong"] == [], row
    assert row["wall_s"] > 0 and row["rate"] == pytest.approx(2 / row["wall_s"])
    # a candidate KernelBench judges otherwise is listed, with what it said
    row = batch_bench.run_kernelbench_method([("level1/01_relu.py", made[2][0], "passed", False)], 1,
                                             device="cpu")
    assert row["wrong"] == [("level1/01_relu.py", "wrong", "pass", "")], row


def test_the_timed_phase_profile_runs_both_ways_on_the_cpu(capsys):
    """bench/kb_timed_profile.py --device cpu: the Model as its own
    candidate, inputs made apart (the old way, with the checks patched to
    match) and in place, both passing, a row each with its timed phases."""
    pytest.importorskip("torch", reason="the profile needs torch")
    profile = _bench_module("kb_timed_profile")
    assert profile.main(["--device", "cpu", "--problems", "level1/22_layernorm.py", "--evals", "2",
                         "--top", "3"]) == 0
    out = capsys.readouterr().out
    failed = [ln for ln in out.splitlines() if ln.startswith("  level1/22_layernorm.py ")]
    assert failed == [], failed  # (an evaluation that did not pass prints its verdict so)
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("22_layernorm ")]
    assert [r[1] for r in rows] == ["apart", "inplace"], out
    for r in rows:
        timed, baseline_timed = float(r[2]), float(r[3])
        assert timed > 0 and baseline_timed > 0, r
