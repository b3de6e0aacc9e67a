"""The binding on the CPU: loading, errors, compile, problems, reports,
rewards with Python terms, evaluate without a GPU, threads."""
import subprocess
import sys
import threading

import pytest

import kreward
from kreward import _lib


def test_loads_and_checks_abi():
    n = _lib.fn.version_number()
    assert kreward.__version__ == f"{n // 10000}.{n // 100 % 100}.{n % 100}"
    assert _lib.fn.abi_version() == _lib.ABI_VERSION == 1
    assert kreward.library_path.endswith("libkreward.so.1")


def test_wrong_library_is_a_clear_error(tmp_path):
    bogus = tmp_path / "libkreward.so.1"
    bogus.write_bytes(b"not a library")
    code = "import kreward"
    env = {"KREWARD_LIBRARY": str(bogus), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(_lib.__file__).rsplit("/kreward/", 1)[0]}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode != 0
    assert "cannot load libkreward" in out.stderr or "KREWARD_LIBRARY" in out.stderr


def test_compile_and_program(ctx, vadd_fast):
    p = ctx.compile(vadd_fast, name="fast.cu")
    assert p.kernels == ["add4"]
    info = p.info()
    assert info["kernels"][0]["params"][3]["size"] == 8
    assert len(p.hash) == 32
    again = ctx.compile(vadd_fast, name="fast.cu")
    assert again.info()["cache"] == "memory"
    p.close()
    with pytest.raises(ValueError):
        p.kernels


def test_compile_error_carries_the_log(ctx):
    with pytest.raises(kreward.KrewardError) as e:
        ctx.compile('extern "C" __global__ void k(float* x) { x[0] = 1 }', name="bad.cu")
    assert e.value.name == "KR_ECOMPILE"
    assert e.value.code == -5
    assert "bad.cu(1): error" in e.value.message
    assert 'expected a ";"' in e.value.detail


def test_binary_program(ctx, vadd_fast):
    p = ctx.compile(vadd_fast)
    cubin, kind = p.binary()
    assert kind == "cubin" and cubin[:4] == b"\x7fELF"
    q = ctx.program_from_binary(cubin, "fast.cubin")
    assert q.kernels == ["add4"] and q.hash != p.hash
    with pytest.raises(kreward.KrewardError) as e:
        ctx.program_from_binary(b"junk junk junk")
    assert e.value.name == "KR_EPARSE"


def test_problem_errors_say_where(ctx):
    with pytest.raises(kreward.KrewardError) as e:
        ctx.parse_problem('{"name": "p", "dims": ["N"],\n "cases": [{"N": 4}],\n'
                          ' "tensors": [{"name": "y", "dtype": "f33", "shape": ["N"], "role": "out"}],'
                          ' "reference": {"golden": true}}', name="p.json")
    assert "p.json:3:" in e.value.message
    assert "unsupported dtype 'f33'" in e.value.message


def test_problem_and_host_inputs(ctx, vadd):
    p = ctx.load_problem(vadd)
    assert p.name == "vector_add"
    assert [t[0] for t in p.tensors()] == ["a", "b", "c"]
    assert p.shape(0, 1) == (100003,)
    seed = kreward.Problem.case_seed(42, 1)
    a1, a2 = p.generate(0, 1, seed), p.generate(0, 1, seed)
    assert a1 == a2 and len(a1) == 4 * 100003
    assert p.generate(0, 1, seed + 1) != a1
    with pytest.raises(kreward.KrewardError):
        p.generate(2, 1, seed)  # an output is never generated


def test_plans(ctx, vadd, vadd_fast):
    p = ctx.load_problem(vadd)
    prog = ctx.compile(vadd_fast)
    ctx.check_plan(ctx.plan_from_source(vadd_fast), p, prog)
    bad = ctx.plan_from_json({"launches": [{"kernel": "add4", "grid": [1], "block": [2048],
                                            "args": ["a", "b", "c", "N"]}]})
    with pytest.raises(kreward.KrewardError) as e:
        ctx.check_plan(bad, p, prog)
    assert "block.x = 2048" in e.value.message


def test_report_by_hand_and_presets(ctx):
    r = kreward.Report()
    r.verdict = "passed"
    r["speedup"] = 2.0
    r["memory_bytes"] = 1e9
    r["code_lines"] = 80
    r.flags = ["nondeterministic"]
    assert r.flags == ["nondeterministic"] and r["speedup"] == 2.0
    with pytest.raises(KeyError):
        r["nothing"]
    with ctx.reward("kevin") as w:
        assert w.score(r) == pytest.approx(0.3 + 2.0)
    assert r.to_dict()["reward"]["terms"][1]["name"] == "speedup"
    with pytest.raises(ValueError):
        r.verdict = "great"
    assert set(kreward.presets()) >= {"makora", "kernelgym", "cuda_agent", "fast_p"}


def test_python_terms(ctx):
    r = kreward.Report()
    r.verdict = "passed"
    r["speedup"] = 3.0
    w = ctx.reward()
    w.add("correct", {"pass": 1}, weight=0.5)
    w.add_python("bonus", lambda rep: rep["speedup"] ** 2, weight=0.1)
    assert w.score(r) == pytest.approx(0.5 + 0.9)
    assert [t["term"] for t in w.config()["terms"]] == ["correct", "bonus"]

    def broken(rep):
        raise RuntimeError("my term is broken")
    w.add_python("broken", broken)
    with pytest.raises(RuntimeError, match="my term is broken"):
        w.score(r)
    w.close()


def test_reward_config_errors(ctx):
    with pytest.raises(kreward.KrewardError) as e:
        ctx.reward({"terms": [{"term": "nope"}]})
    assert "unknown term 'nope'" in e.value.message


def test_evaluate_without_gpu(ctx, vadd, vadd_fast):
    r = ctx.evaluate(vadd, vadd_fast, reward="makora", name="fast.cu")
    assert r.verdict == "not_run"
    assert "need an NVIDIA GPU" in r.message
    assert r["compiled"] == 1 and r["code_lines"] > 5
    bad = ctx.evaluate(vadd, "__global__ void k( {", reward="makora")
    assert bad.verdict == "compile_error" and bad.reward == -10
    assert "error" in bad.feedback
    noplan = ctx.evaluate(vadd, 'extern "C" __global__ void k(float* x) {}', reward="makora")
    assert noplan.verdict == "invalid_plan"
    assert "no launch plan" in noplan.feedback


def test_threads_compile_in_parallel(vadd_fast):
    errors = []

    def work(i):
        try:
            with kreward.Context(no_device=True) as c:
                assert c.compile(vadd_fast, defines=[f"X{i}=1"]).kernels == ["add4"]
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_info(ctx):
    info = ctx.info()
    assert info["nvrtc"]["loaded"] is True
    assert info["device"]["usable"] is False


def test_evaluate_program_is_one_c_call(ctx, vadd, vadd_fast, monkeypatch):
    def not_here(*args):
        raise AssertionError("evaluate_program must run in C (kr_evaluate_program)")
    for verb in ("verify", "benchmark", "plan_check", "reward_score"):
        monkeypatch.setattr(_lib.fn, verb, not_here)
    problem = ctx.load_problem(vadd)
    prog = ctx.compile(vadd_fast, name="fast.cu")
    plan = ctx.plan_from_source(vadd_fast)
    r = ctx.evaluate_program(problem, prog, plan, reward="makora", name="fast.cubin")
    assert r.verdict == "not_run" and "need an NVIDIA GPU" in r.message
    # the program's compile metrics, as kr_evaluate writes them for source
    assert r["compiled"] == 1 and r["kernels"] == 1 and r["compile_seconds"] >= 0
    assert r.text("problem") == "vector_add" and r.text("candidate") == "fast.cubin"
    assert r.reward is None  # not judged here, so not scored
    # a plan that does not fit is judged, and scored
    bad = ctx.plan_from_json({"launches": [{"kernel": "add4", "grid": [1], "block": [2048],
                                            "args": ["a", "b", "c", "N"]}]})
    r = ctx.evaluate_program(problem, prog, bad, reward="kevin")
    assert r.verdict == "invalid_plan" and "block.x = 2048" in r.feedback
    assert r["compiled"] == 1 and r.reward == 0.0
    assert r.to_dict()["reward"]["terms"][0]["name"] == "correct"


def test_evaluate_with_compile_options(ctx, vadd, vadd_fast):
    r = ctx.evaluate(vadd, vadd_fast.replace("add4(", "ADD("), compile_options={"defines": ["ADD=add4"]})
    assert r.verdict == "not_run" and r["compiled"] == 1
    # a bad option is the caller's error, not the candidate's: raised, with the report
    with pytest.raises(kreward.KrewardError) as e:
        ctx.evaluate(vadd, vadd_fast, compile_options={"extra_options": ["--no-such-flag"]})
    assert e.value.code == kreward.Status.EINVAL and "--no-such-flag" in e.value.message
    assert e.value.report.verdict == "error"


def test_kr_profile_metrics_put_the_split_in_the_report(monkeypatch, vadd, vadd_fast):
    """KR_PROFILE=metrics (bench_pool --profile): every evaluation's parts
    as report metrics, so a pool's caller sees where its workers' time went;
    without it, none."""
    with kreward.Context(no_device=True) as c:
        plain = c.evaluate(c.problem(vadd), vadd_fast)
        assert plain.get("profile_compile_ms") is None
        monkeypatch.setenv("KR_PROFILE", "metrics")
        r = c.evaluate(c.problem(vadd), vadd_fast + "\n// another\n")
        for part in ("facts", "compile", "plan", "verify", "weak", "bench", "score"):
            assert r.get(f"profile_{part}_ms") is not None, part
        assert r["profile_compile_ms"] > 0  # it compiled: a cache miss, NVRTC's time
