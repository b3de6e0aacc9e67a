"""What a new user met first: a mistyped path is not a JSON error, an
unknown preset lists the presets, an empty candidate is a compile error, a
missing metric says why (the README's commands and snippets: test_readme.py)."""
import sys

import pytest

import kreward
from conftest import ROOT


def test_default_preset_scores_a_report_built_by_hand(ctx):
    # a verdict and a speedup, none of what a benchmark adds (memory_bytes,
    # code_lines, speedup_low): "the report has no 'memory_bytes'" before
    for verdict, expected in (("passed", 10.0), ("incorrect", -5.0), ("compile_error", -10.0)):
        r = kreward.Report()
        r.verdict = verdict
        r["speedup"] = 1.0
        with ctx.reward("makora") as w:
            assert w.score(r) == pytest.approx(expected)
    # what each term reads is in the configuration
    with ctx.reward("makora") as w:
        needs = {t["term"]: t["needs"] for t in w.config()["terms"]}
    assert needs["memory"] == {"memory_bytes": "0 bytes: no penalty"}


def test_a_missing_metric_names_the_term_and_the_metric(ctx):
    w = ctx.reward({"terms": [{"term": "metric", "config": {"metric": "max_abs_error"}}]})
    r = kreward.Report()
    r.verdict = "passed"
    with pytest.raises(kreward.KrewardError, match="term 'metric' needs the metric 'max_abs_error'"):
        w.score(r)
    w.close()


def test_a_missing_report_metric_says_why(ctx, vadd, vadd_fast):
    r = ctx.evaluate(vadd, vadd_fast)
    assert r.verdict == "not_run" and r.get("speedup") is None
    with pytest.raises(KeyError) as e:
        r["speedup"]
    if sys.version_info >= (3, 11):  # exception notes
        assert "no metric 'speedup' (verdict not_run: compiled and checked" in e.value.__notes__[0]


def test_a_mistyped_path_is_no_such_file(ctx, tmp_path):
    missing = str(tmp_path / "no_such" / "problem.json")
    with pytest.raises(FileNotFoundError, match="no such problem file"):
        ctx.problem(missing)
    with pytest.raises(FileNotFoundError, match="no such problem file"):
        ctx.evaluate(missing, "x")
    with pytest.raises(FileNotFoundError, match="no such reward configuration file"):
        ctx.reward(str(tmp_path / "reward.json"))
    # a pathlib.Path is a path
    assert ctx.problem(ROOT / "examples/problems/l1_vector_add/problem.json").name
    (tmp_path / "kevin.json").write_text('{"preset": "kevin"}')
    ctx.reward(tmp_path / "kevin.json").close()
    # JSON text is still JSON, with the parser's error
    with pytest.raises(kreward.KrewardError):
        ctx.problem('{"name": ')


def test_an_unknown_preset_lists_the_presets(ctx):
    with pytest.raises(kreward.KrewardError) as e:
        ctx.reward("nosuch")
    assert "unknown preset 'nosuch'" in e.value.message
    for name in kreward.presets():
        assert name in e.value.message
    with pytest.raises(kreward.KrewardError, match="makora, kernelgym"):
        ctx.evaluate(str(ROOT / "examples/problems/l1_vector_add/problem.json"), "x",
                     reward="makoro")


def test_a_file_named_like_a_preset_is_read(ctx, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myreward").write_text('{"preset": "kevin"}')
    with ctx.reward("myreward") as w:
        assert [t["term"] for t in w.config()["terms"]] == ["correct", "speedup"]


def test_an_empty_candidate_is_a_compile_error(ctx, vadd):
    r = ctx.evaluate(vadd, "", reward="makora")
    assert r.verdict == "compile_error" and r.reward == -10
    assert "empty source: there is no code to compile" in r.feedback
    with pytest.raises(kreward.KrewardError) as e:
        ctx.compile("")
    assert e.value.name == "KR_ECOMPILE"


def test_import_kreward_exposes_the_backend_and_the_problem_kinds():
    """`kreward.backend.resolve()` after `import kreward`, as the README
    shows it (it raised AttributeError: the module was never imported)."""
    import kreward as k
    assert callable(k.backend.resolve) and callable(k.problems.kind_of)


def test_the_extras_bring_what_serve_and_ray_need():
    """pip install '.[serve]' brings starlette and uvicorn, '.[ray]' ray:
    `kreward serve` and the Ray pool say they need them when missing."""
    import tomllib
    for pyproject in (ROOT / "pyproject.toml", ROOT / "bindings" / "python" / "pyproject.toml"):
        extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
        assert {"starlette", "uvicorn"} <= set(extras["serve"]), pyproject
        assert extras["ray"] == ["ray"], pyproject
        assert {"torch", "triton"} <= set(extras["kernelbench"]), pyproject
