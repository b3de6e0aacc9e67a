"""The page of a vetting run, from lines written by hand in `kreward
problems vet`'s schema: every problem in the rendered DOM with its outcome
and reasons, the trivial-output checks, an import error and notes that try
to inject markup shown as text."""
import pytest

from . import inputs
from .browser import Dom, dump_dom, needs_chromium, screenshot
from .checks import assert_escaped, assert_offline, run_pages


@pytest.fixture(scope="module")
def vet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vet")
    lines = inputs.vet_lines()
    src = inputs.write_jsonl(tmp / "vet.jsonl", lines)
    out = tmp / "vet.html"
    run = run_pages(src, "--html", out)  # told from its lines: a vetting run
    assert run.returncode == 0, run.stderr
    assert "7 problems vetted: 4 kept (2 flagged), 3 refused" in run.stdout
    return tmp, lines, out, out.read_text()


def test_vet_page_text(vet):
    _, lines, _, text = vet
    assert_offline(text)
    assert_escaped(text, inputs.ATTACK)
    assert_escaped(text, "<b>nondeterministic</b>")
    assert "<title>kreward problems vet: vet.jsonl</title>" in text
    assert ">PASSES<" in text and ">caught<" in text  # 19_relu_zeros lets zeros through
    assert "a duplicate of 13_matmul_square" in text
    assert "ModuleNotFoundError: No module named &#x27;flash&#x27;" in text


@needs_chromium
def test_vet_page_in_chromium(vet):
    tmp, lines, out, _ = vet
    dom_text, consoles = dump_dom(out, tmp)
    assert not consoles, consoles
    dom = Dom(dom_text)
    assert dom.count("script") == 1
    for line in lines:
        assert line["problem"] in dom.cells, line["problem"]
        for reason in line["reasons"]:
            assert reason in dom.text
    assert inputs.ATTACK in dom.text  # the note, as text
    for outcome in ("kept", "flagged", "refused"):
        assert outcome in dom.cells
    png, consoles = screenshot(out, tmp, "vet.png")
    assert not consoles and png.stat().st_size > 50_000


def test_a_bad_vetting_line_names_its_line(tmp_path):
    lines = inputs.vet_lines()[:2] + [{"problem": "x", "kept": "yes", "import": {}}]
    src = inputs.write_jsonl(tmp_path / "bad.jsonl", lines)
    run = run_pages(src, "--html", tmp_path / "bad.html")
    assert run.returncode == 2
    assert f"{src}:3: not a vetting line" in run.stderr
    assert not (tmp_path / "bad.html").exists()
