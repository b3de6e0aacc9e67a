"""The page of a tuning run: a real search (grid, real NVRTC compiles and
the checks that refuse configurations) against the synthetic backend (no
GPU), dumped with TuneResult.to_json, read back by `python3 -m
kreward.pages`, and written by TuneResult.to_html; the progress chart, the
best configuration, every evaluation."""
import json

import pytest

from kreward import tune
from kreward.tune.synthetic import SyntheticBackend

from .browser import Dom, dump_dom, needs_chromium, screenshot
from .checks import assert_offline, run_pages
from test_tune import VADD, VADD_KNOBS as KNOBS, VADD_SRC as SRC, vadd_speed


def speed(k):
    """test_tune's synthetic peak (BLOCK=256, ITEMS=4), and one
    configuration that reads as incorrect."""
    return None if (k["BLOCK"], k["ITEMS"]) == (32, 8) else vadd_speed(k)


@pytest.fixture(scope="module")
def result():
    be = SyntheticBackend(speed)
    try:
        return tune.tune(tune.CudaKernel(SRC, KNOBS, VADD, name="vadd.cu"), strategy="grid",
                         max_evals=28, batch_size=4, backend=be)
    finally:
        be.close()


def test_the_dump_holds_the_run(result, tmp_path):
    d = json.loads(result.to_json(tmp_path / "tune.json"))
    assert d["format"] == "kreward.tune" and d["strategy"] == "grid"
    assert d["knobs"] == KNOBS and d["kernel"] == "vadd.cu" and d["problem"] == VADD
    assert d["best"] == result.best == {"BLOCK": 256, "ITEMS": 4}
    assert len(d["history"]) == len(result.history) and d["evaluations"] == 28
    assert d["refused"] == result.refused >= 4   # BLOCK=2048: over 1024 threads
    assert any(h["verdict"] == "incorrect" for h in d["history"])
    assert d["best_report"]["verdict"] == "passed" and "#define BLOCK 256" in d["source"]
    assert json.loads((tmp_path / "tune.json").read_text()) == d


@needs_chromium
def test_tune_page_in_chromium(result, tmp_path):
    result.to_json(tmp_path / "tune.json")
    run = run_pages(tmp_path / "tune.json", "--html", tmp_path / "tune.html")
    assert run.returncode == 0, run.stderr
    assert "a tuning run (grid): 28 evaluations" in run.stdout
    text = (tmp_path / "tune.html").read_text()
    assert_offline(text)
    assert "The search&#x27;s progress" in text and "BLOCK=256 ITEMS=4" in text
    result.to_html(tmp_path / "direct.html")
    direct = (tmp_path / "direct.html").read_text()
    assert "<title>kreward.tune: vadd.cu</title>" in direct
    dom_text, consoles = dump_dom(tmp_path / "tune.html", tmp_path)
    assert not consoles, consoles
    dom = Dom(dom_text)
    assert sum(1 for c in dom.cells if c == "refused") == result.refused
    assert "block has 2048 threads" in dom.text or "2048" in dom.text
    png, consoles = screenshot(tmp_path / "tune.html", tmp_path, "tune.png")
    assert not consoles and png.stat().st_size > 50_000
