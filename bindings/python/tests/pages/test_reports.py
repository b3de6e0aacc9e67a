"""The report page of a suite run and of a batch, as a person gets it: the
file written by `python3 -m kreward.pages`, read by headless Chromium
(every problem and candidate in the DOM, the attacker's feedback as text,
no console message: no script error, nothing refused by the CSP), and a
screenshot kept under the test's tmp dir."""
import pytest

from . import inputs
from .browser import Dom, dump_dom, needs_chromium, screenshot
from .checks import assert_escaped, assert_offline, run_pages

from kreward import pages  # noqa: E402
from kreward.pages import charts  # noqa: E402


def _render(tmp_path, lines, name):
    src = inputs.write_jsonl(tmp_path / f"{name}.jsonl", lines)
    out = tmp_path / f"{name}.html"
    run = run_pages(src, "--html", out, "--title", f"{name} <page>")
    assert run.returncode == 0, run.stderr
    assert f"page: {out}" in run.stdout
    return out, out.read_text()


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("suite")
    lines = inputs.suite_lines()
    out, text = _render(tmp, lines, "suite")
    return tmp, lines, out, text


def test_suite_page_is_offline_and_escaped(suite):
    _, lines, _, text = suite
    assert_offline(text)
    assert_escaped(text, inputs.ATTACK)
    assert_escaped(text, inputs.ATTACK_NAME)
    assert "<title>suite &lt;page&gt;</title>" in text  # the title is text too
    # the sections a person looks for
    for heading in ("Verdicts and flags", "Speedups", "Where the time goes", "Candidates"):
        assert f"<h2>{heading}</h2>" in text


def test_suite_page_says_what_each_report_says(suite):
    _, lines, _, text = suite
    assert "2.31x [2.25, 2.37]" in text and "26.98x [26.10, 27.90]" in text
    assert "UNEXPECTED" not in text  # every line of this suite is as expected or not run
    assert ">not run<" in text       # the KernelBench line without a GPU
    assert "syntax.cu(3): error: expected an expression" in text  # the compile log, folded
    assert "unwritten" in text and "torch_fallback" in text        # flags
    assert "start and load" in text and "benchmark" in text        # both kinds of wall time
    if charts.HAVE_MATPLOTLIB:
        assert text.count("<svg") >= 4  # verdicts, flags, speedups, GPU time, wall time


def test_the_page_is_the_same_twice(tmp_path, suite):
    """The same input makes the same file (charts included)."""
    _, lines, out, text = suite
    again, text2 = _render(tmp_path, lines, "suite")
    assert text2 == text


@needs_chromium
def test_suite_page_in_chromium(suite):
    tmp, lines, out, _ = suite
    dom_text, consoles = dump_dom(out, tmp)
    assert not consoles, f"console messages (script errors, refused fetches): {consoles}"
    dom = Dom(dom_text)
    # the page's script ran under its CSP (it marks <html>), and it is the only one
    assert ("html", {"lang": "en", "class": "js"}) in dom.tags
    assert dom.count("script") == 1 and dom.count("img") == 0
    for line in lines:
        problem = line.get("problem") or line["suite"]["problem"]
        candidate = line.get("candidate") or line["suite"]["candidate"]
        assert problem in dom.cells, f"{problem} is not in the rendered table"
        assert candidate in dom.cells, f"{candidate} is not in the rendered table"
    assert inputs.ATTACK + " and <b>bold</b> &amp; more" in dom.text  # shown as text
    png, consoles = screenshot(out, tmp, "suite.png")
    assert not consoles
    assert png.stat().st_size > 50_000  # a page, not a blank


@needs_chromium
def test_batch_page_in_chromium(tmp_path):
    """A trainer's batch: no suite, 90 reports of 7 problems; the charts
    keep each problem's best and say so; the table keeps every one."""
    lines = inputs.batch_lines()
    out, text = _render(tmp_path, lines, "batch")
    assert_offline(text)
    assert "expected?" not in text  # no suite, no expectation column
    if charts.HAVE_MATPLOTLIB:
        assert "72 candidates: the chart shows each problem&#x27;s best" in text
    dom_text, consoles = dump_dom(out, tmp_path)
    assert not consoles, consoles
    dom = Dom(dom_text)
    for i in range(90):
        assert f"rollout-{i}" in dom.cells
    png, _ = screenshot(out, tmp_path, "batch.png")
    assert png.stat().st_size > 50_000


def test_reports_page_from_entries(tmp_path):
    """The same page from Python: pages.render on a file of plain reports."""
    src = inputs.write_jsonl(tmp_path / "r.jsonl", [inputs.report("passed", inputs.timed(
        1.5, 1.4, 1.6, 10.0), {"problem": "p", "candidate": "c.cu"})])
    assert pages.render(str(src), str(tmp_path / "r.html")) == "reports"
    text = (tmp_path / "r.html").read_text()
    assert "1.50x [1.40, 1.60]" in text and "kreward reports: r.jsonl" in text
