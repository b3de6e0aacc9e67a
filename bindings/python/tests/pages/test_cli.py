"""`python3 -m kreward.pages` (what `kreward report` execs) and `kreward
suite --html` on a KernelBench folder (python3 -m kreward.kernelbench):
exit codes, summaries, a page without matplotlib."""
import pathlib

import pytest

from kreward import pages
from kreward.pages import charts, reports

from . import inputs
from .checks import assert_offline, run_pages

ROOT = pathlib.Path(__file__).resolve().parents[4]


def test_summary_without_html(tmp_path):
    src = inputs.write_jsonl(tmp_path / "s.jsonl", inputs.suite_lines())
    run = run_pages(src)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{src}: 14 reports, 8 problems: 6 passed, 4 incorrect")
    assert "flags: 1 " in run.stdout and "page:" not in run.stdout


def test_exit_codes(tmp_path):
    src = inputs.write_jsonl(tmp_path / "s.jsonl", inputs.suite_lines()[:3])
    run = run_pages(src, "--html", tmp_path / "no" / "dir" / "p.html")
    assert run.returncode == 2 and "cannot write" in run.stderr
    run = run_pages(src, "--kind", "vet")  # told it is a vetting run: it is not
    assert run.returncode == 2 and f"{src}:1: not a vetting line" in run.stderr
    run = run_pages(src, "--bogus")
    assert run.returncode == 2 and "--bogus" in run.stderr
    run = run_pages(src, "--html", tmp_path / "p.html", "--quiet")
    # (with a note where matplotlib is missing: the wheel's venv has none)
    assert run.returncode == 0 and run.stdout.startswith(f"page: {tmp_path / 'p.html'}")
    assert len(run.stdout.splitlines()) == 1
    run = run_pages("--preflight", tmp_path / "p.html")
    assert run.returncode == 0
    run = run_pages("--preflight", tmp_path / "missing" / "p.html")
    assert run.returncode == 2 and "not a writable folder" in run.stderr


def test_a_page_without_matplotlib(tmp_path, monkeypatch):
    """Without matplotlib the page still holds every table, and says where
    its charts went."""
    monkeypatch.setattr(charts, "HAVE_MATPLOTLIB", False)
    entries = [pages.load.entry_of(x, "", i) for i, x in enumerate(inputs.suite_lines(), 1)]
    text = reports.reports_page(entries, "t", "s.jsonl")
    assert_offline(text)
    assert "<svg" not in text and "pip install &#x27;kreward[pages]&#x27;" in text
    assert ">l4_matmul_f32</td>" in text


def test_kernelbench_suite_html(tmp_path):
    """`kreward suite examples/kernelbench --html`: the Python suite writes
    its page from a temporary JSONL (the CPU: rows not run)."""
    pytest.importorskip("torch", reason="the KernelBench suite imports problems with torch")
    import os
    import subprocess
    import sys

    import kreward
    out = tmp_path / "kb.html"
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(kreward.__file__).parent.parent),
               KREWARD_LIBRARY=kreward.library_path, TMPDIR=str(tmp_path / "t"),
               CUDA_VISIBLE_DEVICES="")
    (tmp_path / "t").mkdir()
    run = subprocess.run([sys.executable, "-m", "kreward.kernelbench", "suite",
                          str(ROOT / "examples" / "kernelbench"), "--filter", "01_relu",
                          "--html", str(out)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    assert f"page: {out}" in run.stdout
    text = out.read_text()
    assert_offline(text)
    assert "reports from kreward suite" in text and ">level1/01_relu</td>" in text
    assert "level1_01_relu/honest_cuda.py" in text
    assert not list((tmp_path / "t").iterdir())  # the temporary JSONL is gone
