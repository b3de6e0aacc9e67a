"""kreward.pages: report pages, one static HTML file a person opens in a
browser, offline: a suite run or a batch of reports (a JSONL of reports),
a vetting run (`kreward problems vet`'s JSONL), a tuning run (a
kreward.tune TuneResult). docs/pages.md.

    kreward report FILE.jsonl --html OUT.html      # python3 -m kreward.pages
    kreward suite DIR --html OUT.html
    result.to_html("tune.html")                    # a kreward.tune TuneResult

Files: load.py reads the inputs (and names the line of a bad one);
charts.py draws the charts; document.py is the HTML (escaping, the page's
frame); reports.py, vetting.py and tuning.py make each page; cli.py is the
command.

Charts: matplotlib, rendered to SVG and inlined. Why: the page must work
offline and fetch nothing, so whatever draws the charts has to live in the
file. matplotlib's SVG needs no JavaScript at all, is small (tens of kB a
chart, text drawn as paths so it looks the same whatever fonts the viewer
has), deterministic (the same input gives the same file), and matplotlib is
a well-kept package in PyPI and Debian, drawing log axes, interval bars and
stacked bars well. plotly would carry its 3.5 MB plotly.min.js into every
page and needs JavaScript to show anything; hand-drawn SVG would be ours to
keep. matplotlib is optional (`pip install 'kreward[pages]'`): without it a
page still holds every table and says where its charts went.

Everything a report says is text in the page, escaped (a candidate's
feedback is the candidate's doing); the page's Content-Security-Policy
allows no fetch and no script but its own small one (sorting and filtering
the tables; the page reads whole without it)."""
import os
import tempfile

from .load import InputError, detect, read_reports, read_tune, read_vetting
from .reports import reports_page
from .tuning import tune_page
from .vetting import vet_page

__all__ = ["InputError", "detect", "read_reports", "read_tune", "read_vetting", "render",
           "reports_page", "tune_page", "vet_page", "write_page", "write_tune_page"]

DEFAULT_TITLES = {"reports": "kreward reports", "vet": "kreward problems vet",
                  "tune": "kreward.tune"}


def write_page(text, path):
    """Writes a page whole or not at all (a temporary file beside it, then
    renamed): a reader never sees half a page."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".kreward-page-", suffix=".html", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_tune_page(result, path, title=None, source="a TuneResult"):
    """result: TuneResult.to_dict() (or a TuneResult)."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    text = tune_page(d, title or f"kreward.tune: {d.get('kernel') or 'a kernel'}", source)
    write_page(text, path)


def render(path, out, title=None, kind=None, source=None):
    """Reads `path` (kind: "reports", "vet", "tune", or None to tell from the
    file) and writes its page to `out`. source: what the page says it was
    made from (default: the file's name). Returns the kind. Raises
    InputError for an input it cannot read, OSError for an `out` it cannot
    write."""
    kind = kind or detect(path)
    source = source or os.path.basename(path)
    title = title or f"{DEFAULT_TITLES[kind]}: {source}"
    if kind == "tune":
        text = tune_page(read_tune(path), title, source)
    elif kind == "vet":
        text = vet_page(read_vetting(path), title, source)
    elif kind == "reports":
        text = reports_page(read_reports(path), title, source)
    else:
        raise ValueError(f"kind {kind!r}: reports, vet or tune")
    write_page(text, out)
    return kind
