"""The page of a vetting run (`kreward problems vet`: one line per problem,
load.read_vetting): which problems were kept and why others were refused or
flagged, what the import found, the reference's times, and whether trivial
outputs (zeros, a constant, an input's copy, another case's outputs) pass.
Returns the document's text."""
from . import charts
from .document import (Markup, cards, details, el, filter_box, fmt, page, pre, section, table)

TRIVIAL = ["zeros", "constant", "input", "other_case"]


def _yes_no(v, good=True):
    """A bool cell: yes/no coloured by whether that value is the good one;
    '-' for None (not checked)."""
    if v is None:
        return (el("span", "-", class_="dim"), "")
    cls = "yes" if bool(v) == good else "no"
    return (el("span", "yes" if v else "no", class_=cls), "yes" if v else "no")


def _trivial_cell(v):
    """'fails' is what a sound problem wants (a trivial output is caught)."""
    if v is None:
        return (el("span", "-", class_="dim"), "")
    if v == "fails":
        return (el("span", "caught", class_="yes"), "caught")
    if v == "passes":
        return (el("span", "PASSES", class_="no"), "passes")
    return (str(v), str(v))


def _headroom(v):
    """kreward.vet writes 1e9 where the reference matched float64 exactly."""
    return "exact" if isinstance(v, (int, float)) and v >= 1e9 else fmt(v, 3)


def _status(row):
    if not row["kept"]:
        return "refused"
    return "flagged" if row["reasons"] else "kept"


def _status_cell(row):
    s = _status(row)
    cls = {"kept": "ok", "flagged": "warn", "refused": "bad"}[s]
    return (el("span", s, class_=f"badge {cls}"), s)


def _summary(rows):
    n = len(rows)
    count = lambda pred: sum(1 for r in rows if pred(r))  # noqa: E731
    seconds = sum(r["seconds"] for r in rows if isinstance(r["seconds"], (int, float)))
    return cards([
        ("problems", str(n), None),
        ("kept", str(count(lambda r: r["kept"])),
         f"{count(lambda r: r['kept'] and r['reasons'])} of them flagged"),
        ("refused", str(count(lambda r: not r["kept"])), None),
        ("import failed", str(count(lambda r: r["import"].get("ok") is False)), None),
        ("nondeterministic", str(count(lambda r: r["deterministic"] is False)), None),
        ("launch-bound", str(count(lambda r: r["launch_bound"] is True)), None),
        ("trivially passed", str(count(lambda r: "passes" in r["trivial"].values())),
         "zeros, a constant, an input or another case's outputs pass"),
        ("duplicates", str(count(lambda r: r["duplicate_of"])), None),
        ("not fully checked", str(count(lambda r: r["unchecked"])),
         "limits this run could not check (no GPU: the reference's time)"),
        ("vetting time", f"{seconds:.1f} s", None)])


def _reason_class(reason):
    """What a reason is about, without its numbers and names ("slow
    reference: 164 ms ..." and "duplicate of X" count as one each), so a
    run of thousands charts a handful of bars."""
    if reason.startswith("duplicate of"):
        return "duplicate"
    return reason.split(":", 1)[0]


def _reasons(rows):
    counts = {}
    for r in rows:
        for reason in r["reasons"]:
            counts[_reason_class(reason)] = counts.get(_reason_class(reason), 0) + 1
    status = {}
    for r in rows:
        status[_status(r)] = status.get(_status(r), 0) + 1
    figs = [charts.counts([(s, status[s]) for s in ("kept", "flagged", "refused") if s in status],
                          "problems by outcome",
                          {"kept": "#1a7f37", "flagged": "#bf8700", "refused": "#cf222e"})]
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if ranked:
        figs.append(charts.counts(ranked[:20], "problems per reason (top 20)"))
    table_ = table(["reason", "problems"], [[k, (str(v), v)] for k, v in ranked], numeric={1}) \
        if ranked else el("p", "No problem was refused or flagged.", class_="note")
    return section("Outcomes and reasons", el("div", figs, class_="charts"), table_,
                   id_="outcomes")


def _times(rows):
    timed = [r for r in rows if any(isinstance(r["reference_ms"].get(k), (int, float))
                                    for k in ("eager", "compile"))]
    if not timed:
        return section("Reference times", el("p", "No line carries a reference time (they need "
                                             "a GPU).", class_="note"), id_="times")
    timed.sort(key=lambda r: -(r["reference_ms"].get("eager") or 0.0))
    note = None
    if len(timed) > charts.MAX_ROWS:
        note = f"The {charts.MAX_ROWS} slowest of {len(timed)} problems; the tables have all."
        timed = timed[:charts.MAX_ROWS]
    fig = charts.paired_times([(r["problem"], r["reference_ms"].get("eager"),
                                r["reference_ms"].get("compile")) for r in timed],
                              "the reference's time per call: eager and torch.compile",
                              unit="ms", names=("eager", "compile"))
    return section("Reference times", fig, el("p", note, class_="note") if note else None,
                   id_="times")


def _details(r):
    imp = r["import"]
    parts = [el("div", el("b", "path: "), str(r["path"] or "-"))]
    if imp.get("error"):
        parts.append(el("div", el("b", "import error:"), pre(str(imp["error"]))))
    if imp.get("cases"):
        parts.append(el("div", el("b", "cases: "), ", ".join(map(str, imp["cases"]))))
    for note in imp.get("notes") or []:
        parts.append(el("div", el("b", "note: "), str(note)))
    if r["weak"]:
        parts.append(el("div", el("b", "weak: "), str(r["weak"])))
    if r["duplicate_of"]:
        parts.append(el("div", el("b", "duplicate of: "), str(r["duplicate_of"])))
    parts.append(el("div", f"line {r['line']} of the input", class_="dim"))
    return parts


def _problems(rows):
    out = []
    for r in rows:
        imp = r["import"]
        ok = imp.get("ok")
        import_cell = (el("span", "ok", class_="yes"), "ok") if ok else \
            (el("span", "failed", class_="no"), "failed") if ok is False else \
            (el("span", "-", class_="dim"), "")
        items = [el("li", x) for x in r["reasons"]] + \
            [el("li", f"not checked: {u}", class_="dim") for u in r["unchecked"]]
        reasons = el("ul", items) if items else ""
        ncases = len(imp.get("cases") or [])
        out.append([r["problem"], str(r["kind"] or "-"), _status_cell(r), reasons, import_cell,
                    (str(ncases), ncases), (fmt(imp.get("tensors")), imp.get("tensors")),
                    _yes_no(r["deterministic"]), str(r["device"] or "-"),
                    (fmt(r["seconds"], 3), r["seconds"]),
                    details("more", _details(r), class_="fb")])
    return section("Problems", filter_box("problems", "problems"),
                   table(["problem", "kind", "outcome", "reasons", "import", "cases", "tensors",
                          "deterministic", "device", "seconds", "details"], out,
                         id_="problems", numeric={5, 6, 9}),
                   id_="problems-section",
                   note="Why each problem was refused or flagged, and what its import found.")


def _checks(rows):
    out = []
    for r in rows:
        ref = r["reference_ms"]
        out.append([r["problem"], *(_trivial_cell(r["trivial"].get(k)) for k in TRIVIAL),
                     _yes_no(r["strengthened"], good=True) if r["strengthened"] else
                     (el("span", "no", class_="dim"), "no"),
                     (_headroom(r["tolerance_headroom"]), r["tolerance_headroom"]),
                     (fmt(ref.get("eager"), 4), ref.get("eager")),
                     (fmt(ref.get("compile"), 4), ref.get("compile")),
                     _yes_no(r["launch_bound"], good=False)])
    return section("Checks", table(["problem", "zeros", "constant", "input", "other case",
                                    "strengthened", "tolerance headroom", "eager ms",
                                    "compile ms", "launch-bound"], out, numeric={6, 7, 8}),
                   id_="checks",
                   note="Trivial outputs: 'caught' when the problem fails them (as it must), "
                        "PASSES when it cannot tell them from the reference; strengthened: "
                        "the vetting made the problem's inputs or checks stronger; tolerance "
                        "headroom: how far inside its tolerance the reference stays.")


def vet_page(rows, title, source):
    nav = [("outcomes", "outcomes"), ("times", "reference times"),
           ("problems-section", "problems"), ("checks", "checks")]
    body = [_summary(rows), _reasons(rows), _times(rows), _problems(rows), _checks(rows)]
    if not charts.HAVE_MATPLOTLIB:
        body.insert(0, charts.unavailable())
    return page(title, f"{len(rows)} problems from {source}", Markup("".join(body)), nav)
