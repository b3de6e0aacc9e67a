"""A page as a person sees it: Debian's headless Chromium loads the file
(no network: the page must not need one), dumps the DOM its parser and
script made, takes a screenshot, and logs every console message (a script
error, a refused fetch or script under the page's CSP) on stderr, which
these helpers collect."""
import html.parser
import os
import shutil
import subprocess

import pytest

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser",
                                                        "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium: scripts/deps.sh installs Debian's for the tests "
                             "(apt-get install chromium)")


def _run(page, tmp, *args):
    profile = tmp / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=1", *args,
           f"file://{os.path.abspath(page)}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, HOME=str(tmp)))
    consoles = [line for line in out.stderr.splitlines() if ":CONSOLE" in line]
    return out, consoles


def dump_dom(page, tmp):
    """(the DOM after the page's script ran, console lines)."""
    out, consoles = _run(page, tmp, "--dump-dom")
    assert out.returncode == 0 and out.stdout.strip(), f"chromium failed: {out.stderr[-2000:]}"
    return out.stdout, consoles


def screenshot(page, tmp, name, width=1400, height=2600):
    """A PNG of the page's top (width x height), kept under tmp; (path,
    console lines)."""
    png = tmp / name
    out, consoles = _run(page, tmp, f"--screenshot={png}", f"--window-size={width},{height}")
    assert out.returncode == 0 and png.exists(), f"no screenshot: {out.stderr[-2000:]}"
    return png, consoles


class Dom(html.parser.HTMLParser):
    """The dumped DOM's text per element kind: cells (td text), every tag
    with its attributes, and the whole visible text."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.cells, self.texts = [], [], []
        self._open = []  # the text of each td still open (cells nest: tables in details)
        self._skip = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "td":
            self._open.append([])
        if tag in ("script", "style", "svg"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag == "td" and self._open:
            self.cells.append("".join(self._open.pop()).strip())
        if tag in ("script", "style", "svg"):
            self._skip -= 1

    def handle_data(self, data):
        if self._skip:
            return
        self.texts.append(data)
        for cell in self._open:
            cell.append(data)

    @property
    def text(self):
        return "".join(self.texts)

    def count(self, tag):
        return sum(1 for t, _ in self.tags if t == tag)
