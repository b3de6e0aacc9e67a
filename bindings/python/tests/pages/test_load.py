"""Reading the pages' inputs: the three shapes of a report line (the C
suite's, the KernelBench suite's, a plain report), what each file is told
to be, and errors that name the file and the line."""
import json

import pytest

from kreward.pages import load

from . import inputs


def test_the_three_line_shapes(tmp_path):
    c_line, kb_line = inputs.suite_lines()[0], inputs.suite_lines()[10]
    plain = inputs.report("incorrect", {"correct": 0}, {"problem": "softmax",
                                                        "feedback": "wrong"})
    src = inputs.write_jsonl(tmp_path / "r.jsonl", [c_line, kb_line, plain])
    a, b, c = load.read_reports(src)
    assert (a.problem, a.candidate, a.expected, a.as_expected) == \
        ("l1_vector_add", "candidates/fast.cu", "passed", True)
    assert a.speedup == (2.31, 2.25, 2.37) and a.reward is not None and a.terms
    assert (b.problem, b.candidate, b.expected) == ("level1/01_relu",
                                                    "level1_01_relu/honest_cuda.py", "pass")
    assert b.metric("phase_verify_s") == 0.4 and b.in_suite
    assert (c.problem, c.candidate, c.in_suite, c.feedback) == ("softmax", "line 3", False,
                                                                "wrong")
    assert c.speedup is None and c.line == 3


def test_not_run_is_neither_expected_nor_not(tmp_path):
    line = inputs.c_suite_line("p", "c.cu", "passed", inputs.report("not_run", {"compiled": 1}))
    assert line["not_run"] and line["as_expected"] is False  # as the C suite writes it
    e = load.entry_of(line)
    assert e.not_run and e.as_expected is None and e.reward is None
    kb = load.entry_of(inputs.suite_lines()[-1])
    assert kb.not_run and kb.shown_verdict == "not_run"


@pytest.mark.parametrize("text, where, says", [
    ('{"verdict": "passed"}\n\n{"verdict": \n', 3, "not JSON"),
    ('{"verdict": "passed"}\n[1, 2]\n', 2, "a JSON object, not list"),
    ('{"problem": "p"}\n', 1, 'no "verdict"'),
    ('{"verdict": "passed", "flags": "nan"}\n', 1, '"flags" is a JSON array'),
    ('{"verdict": "passed", "metrics": [1]}\n', 1, '"metrics" is a JSON object'),
])
def test_bad_lines_are_named(tmp_path, text, where, says):
    src = tmp_path / "bad.jsonl"
    src.write_text(text)
    with pytest.raises(load.InputError) as e:
        load.read_reports(src)
    assert e.value.where == f"{src}:{where}" and says in e.value.message


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(load.InputError, match="holds no report"):
        load.read_reports(tmp_path / "empty.jsonl")
    with pytest.raises(load.InputError, match="cannot read it"):
        load.read_reports(tmp_path / "missing.jsonl")


def test_what_a_file_is(tmp_path):
    reports = inputs.write_jsonl(tmp_path / "r.jsonl", inputs.suite_lines()[:2])
    vet = inputs.write_jsonl(tmp_path / "v.jsonl", inputs.vet_lines())
    tune = tmp_path / "t.json"
    tune.write_text(json.dumps({"format": "kreward.tune", "history": []}, indent=1))
    assert [load.detect(p) for p in (reports, vet, tune)] == ["reports", "vet", "tune"]
    assert load.read_tune(tune)["history"] == []
    with pytest.raises(load.InputError, match="not JSON"):
        load.read_tune(reports)  # two lines are no one JSON object
    one = inputs.write_jsonl(tmp_path / "one.jsonl", inputs.suite_lines()[:1])
    with pytest.raises(load.InputError, match="not a tuning result"):
        load.read_tune(one)
    rows = load.read_vetting(vet)
    assert rows[3]["import"]["ok"] is False and rows[3]["line"] == 4
