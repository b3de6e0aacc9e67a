"""The HTML document of every page: escaping, the page's frame (style,
script, Content-Security-Policy), and the pieces the pages share (cards,
tables, folded details, number formats).

Escaping is structural: `el(tag, *children, **attrs)` escapes every str
child and every attribute value, and only Markup (what el and the chart
renderer return) passes through unescaped. Text from a report (feedback
is the candidate's doing, so an attacker's) is only ever a str child.

The page fetches nothing: one file, its style and script inline, charts as
inline SVG, no font or image from anywhere. Its Content-Security-Policy
(default-src 'none') makes a browser refuse any fetch and any script but
the page's own (allowed by its hash), so a feedback that got past the
escaping still could not run."""
import base64
import hashlib
import html
import math

__all__ = ["Markup", "cards", "details", "el", "escape", "filter_box", "fmt", "fmt_speedup", "page",
           "pre", "section", "table", "verdict_badge"]


class Markup(str):
    """HTML that is already safe: passed through el() unescaped."""


def escape(value):
    return value if isinstance(value, Markup) else Markup(html.escape(str(value), quote=True))


_VOID = {"meta", "input", "br", "hr", "col"}


def el(tag, *children, **attrs):
    """<tag attrs>children</tag>; attrs: class_ for class, data_x for
    data-x; None or False leave an attribute out, True writes it bare."""
    out = ["<", tag]
    for k, v in attrs.items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")
        out.append(f" {name}" if v is True else f' {name}="{escape(v)}"')
    out.append(">")
    if tag in _VOID:
        return Markup("".join(out))
    out.extend(escape(c) for c in _flatten(children))
    out.append(f"</{tag}>")
    return Markup("".join(out))


def _flatten(children):
    for c in children:
        if c is None:
            continue
        if isinstance(c, (list, tuple)):
            yield from _flatten(c)
        else:
            yield c


def fmt(v, digits=3, unit=""):
    """A number for a cell: '-' for None, NaN, infinities."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "-"
    if v == int(v) and abs(v) < 1e15:
        text = str(int(v))
    else:
        text = f"{v:.{digits}g}"
    return f"{text}{unit}"


def fmt_speedup(s):
    """'2.31x [2.20, 2.40]' from Entry.speedup's tuple, '-' for None."""
    if s is None:
        return "-"
    value, lo, hi = s
    text = f"{value:.2f}x"
    if lo is not None and hi is not None:
        text += f" [{lo:.2f}, {hi:.2f}]"
    return text


VERDICT_CLASS = {"passed": "ok", "not_run": "na", "error": "na", "incorrect": "bad",
                 "compile_error": "bad", "invalid_plan": "bad", "launch_error": "bad",
                 "fault": "bad", "timeout": "bad"}


def verdict_badge(verdict):
    return el("span", verdict.replace("_", " "), class_=f"badge {VERDICT_CLASS.get(verdict, 'bad')}")


def pre(text, class_=None):
    return el("pre", text, class_=class_)


def details(summary, *body, open_=False, class_=None):
    return el("details", el("summary", summary), *body, open=open_ or None, class_=class_)


def cards(items):
    """A row of figures: [(label, value, note or None)]."""
    return el("div", [el("div", el("div", value, class_="v"), el("div", label, class_="l"),
                         el("div", note, class_="n") if note else None, class_="card")
                      for label, value, note in items], class_="cards")


def table(headers, rows, class_="grid", sortable=True, id_=None, numeric=()):
    """headers: [str] (None: a table of names and values, no head); rows:
    [[cell]] (a cell: str, Markup or (cell, sort key)). numeric: the
    columns that sort as numbers (their sort keys are numbers)."""
    head = el("tr", [el("th", h, data_num="1" if i in numeric else None)
                     for i, h in enumerate(headers)]) if headers else None
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            key = None
            if isinstance(cell, tuple):
                cell, key = cell
            cells.append(el("td", cell, class_="num" if i in numeric else None,
                            data_key=None if key is None else (
                                fmt(key, 12) if isinstance(key, (int, float)) else key)))
        body.append(el("tr", cells))
    return el("table", el("thead", head) if head else None, el("tbody", body), class_=class_,
              data_sortable="1" if sortable and head else None, id=id_)


def section(title, *body, id_=None, note=None):
    return el("section", el("h2", title), el("p", note, class_="note") if note else None, *body,
              id=id_)


STYLE = """
:root { color-scheme: light; --ok: #1a7f37; --bad: #cf222e; --na: #6e7781; --warn: #9a6700;
  --line: #d0d7de; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans",
  sans-serif; font-size: 14px; margin: 0; color: #1f2328; background: #fff; }
header { padding: 16px 28px; border-bottom: 1px solid var(--line); background: var(--soft); }
header h1 { font-size: 20px; margin: 0 0 4px; }
header .sub { color: var(--na); }
main { padding: 8px 28px 40px; max-width: 1500px; }
nav a { margin-right: 14px; color: #0969da; text-decoration: none; }
section { margin-top: 22px; }
h2 { font-size: 17px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
.note { color: #57606a; margin: 4px 0 10px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card .v { font-size: 20px; font-weight: 600; }
.card .l { color: #57606a; }
.card .n { color: #57606a; font-size: 12px; }
.chart svg { max-width: 100%; height: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
table.grid { border-collapse: collapse; margin: 6px 0 12px; }
table.grid th, table.grid td { border: 1px solid var(--line); padding: 4px 8px; text-align: left;
  vertical-align: top; }
table.grid th { background: var(--soft); position: sticky; top: 0; }
table.grid td.num, table.grid th[data-num] { text-align: right; white-space: nowrap; }
table[data-sortable] th { cursor: pointer; }
table.wide { width: 100%; }
table.wide td:last-child { width: 45%; }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; color: #fff;
  font-size: 12px; line-height: 19px; white-space: nowrap; }
.badge.ok { background: var(--ok); } .badge.bad { background: var(--bad); }
.badge.na { background: var(--na); } .badge.warn { background: var(--warn); }
.flag { display: inline-block; padding: 0 6px; margin: 1px 2px; border-radius: 4px;
  border: 1px solid var(--line); font-size: 12px; background: var(--soft); }
.yes { color: var(--ok); font-weight: 600; } .no { color: var(--bad); font-weight: 600; }
.dim { color: var(--na); }
pre { white-space: pre-wrap; word-break: break-word; background: var(--soft); padding: 6px 8px;
  border-radius: 4px; margin: 4px 0; max-height: 480px; overflow: auto; }
details > summary { cursor: pointer; }
td ul { margin: 0; padding-left: 18px; }
td details { max-width: 720px; }
.filter { margin: 6px 0; padding: 4px 8px; width: 360px; border: 1px solid var(--line);
  border-radius: 4px; }
.kv td:first-child { color: #57606a; }
"""

# Sorting by a click on a column's header and a filter box over each big
# table. The page reads whole without it (no-JS browsers, the CSP hash
# changed): it only adds.
SCRIPT = """
document.documentElement.classList.add("js");
function keyOf(td, num) {
  var k = td.hasAttribute("data-key") ? td.getAttribute("data-key") : td.textContent.trim();
  if (!num) return k.toLowerCase();
  var v = parseFloat(k);
  return isNaN(v) ? -Infinity : v;
}
document.querySelectorAll("table[data-sortable]").forEach(function (table) {
  var ths = table.querySelectorAll("thead th");
  ths.forEach(function (th, i) {
    th.addEventListener("click", function () {
      var num = th.hasAttribute("data-num"), dir = th.getAttribute("data-dir") === "up" ? -1 : 1;
      ths.forEach(function (o) { o.removeAttribute("data-dir"); });
      th.setAttribute("data-dir", dir === 1 ? "up" : "down");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = keyOf(a.cells[i], num), y = keyOf(b.cells[i], num);
        return x < y ? -dir : x > y ? dir : 0;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.querySelectorAll("input.filter").forEach(function (input) {
  input.hidden = false;
  var table = document.getElementById(input.getAttribute("data-table"));
  input.addEventListener("input", function () {
    var q = input.value.toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
    });
  });
});
"""


def filter_box(table_id, what):
    """A text box that hides the rows of a table that do not contain what
    is typed (shown by the script; hidden without it)."""
    return el("input", type="search", class_="filter", data_table=table_id,
              placeholder=f"filter {what}", hidden=True, aria_label=f"filter {what}")


def _csp(script):
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
            "base-uri 'none'; form-action 'none'")


def page(title, subtitle, body, nav=()):
    """The whole document. nav: [(anchor id, label)]."""
    head = el("head", el("meta", charset="utf-8"),
              el("meta", http_equiv="Content-Security-Policy", content=_csp(SCRIPT)),
              el("meta", name="viewport", content="width=device-width, initial-scale=1"),
              el("meta", name="generator", content="kreward.pages"),
              el("title", title), el("style", Markup(STYLE)))
    top = el("header", el("h1", title), el("div", subtitle, class_="sub"),
             el("nav", [el("a", label, href=f"#{anchor}") for anchor, label in nav]) if nav else None)
    doc = el("html", head, el("body", top, el("main", body), el("script", Markup(SCRIPT))),
             lang="en")
    return "<!DOCTYPE html>\n" + doc + "\n"
