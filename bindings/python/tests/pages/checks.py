"""What every page must be, read from its text: it fetches nothing (no
http(s) or protocol-relative src, href, url() or @import), holds one
script (its own), declares a Content-Security-Policy that refuses any
fetch, and shows an attacker's text only escaped."""
import html
import re

REMOTE = re.compile(r"""(?:\b(?:src|href|xlink:href|action|srcset|poster|data)\s*=\s*["']?\s*"""
                    r"""(?:https?:)?//)|url\(\s*["']?\s*(?:https?:)?//|@import""", re.I)


def assert_offline(text):
    remote = REMOTE.findall(text)
    assert not remote, f"the page would fetch: {remote[:5]}"
    assert len(re.findall(r"<script\b", text, re.I)) == 1, "one script: the page's own"
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', text)
    assert csp and html.unescape(csp.group(1)).startswith("default-src 'none';"), \
        "a CSP that refuses every fetch"
    assert not re.search(r"<link\b", text, re.I), "no stylesheet or font links"


def assert_escaped(text, attack):
    """The attack's markup only as text: never as a tag."""
    assert attack not in text, f"{attack!r} is in the page unescaped"
    escaped = attack.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in text, f"{attack!r} should show, escaped"


def run_pages(*args):
    """python3 -m kreward.pages ARGS with this kreward (the tree's or the
    installed one) and its library: the command `kreward report` execs."""
    import os
    import pathlib
    import subprocess
    import sys

    import kreward
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(kreward.__file__).parent.parent),
               KREWARD_LIBRARY=kreward.library_path)
    return subprocess.run([sys.executable, "-m", "kreward.pages", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
