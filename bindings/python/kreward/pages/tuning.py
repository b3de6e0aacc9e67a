"""The page of a tuning run (kreward.tune; its TuneResult.to_dict(), or the
JSON of TuneResult.to_json read back): the search's progress (speedup and
reward per evaluation, the best so far), the best configuration, each
knob's effect, and every evaluation. Returns the document's text."""
from . import charts
from .document import (Markup, cards, details, el, filter_box, fmt, fmt_speedup, page, pre,
                       section, table, verdict_badge)


def _knob_text(knobs):
    return " ".join(f"{k}={v}" for k, v in (knobs or {}).items())


def _summary(d):
    best = d.get("best")
    return cards([
        ("strategy", str(d.get("strategy") or "-"), None),
        ("evaluations", str(d.get("evaluations", "-")),
         f"{d.get('gpu_runs', '-')} ran on a GPU, {d.get('refused', '-')} refused by the checks"),
        ("best speedup", f"{d['speedup']:.2f}x" if isinstance(d.get("speedup"), (int, float))
         else "-", _knob_text(best) if best else "no configuration passed"),
        ("best reward", fmt(d.get("reward"), 4), None),
        ("wall time", fmt(d.get("wall_s"), 3, " s"),
         f"{fmt(d.get('wall_per_eval_s'), 3, ' s')} per evaluation"),
        ("space", str(d.get("space_size") or "-"), "configurations the knobs make")])


def _progress(d):
    hist = d["history"]
    points = [(i + 1, str(h.get("verdict") or "?"),
               h.get("speedup") if isinstance(h.get("speedup"), (int, float)) else None,
               h.get("reward") if isinstance(h.get("reward"), (int, float)) else None,
               bool(h.get("invalid"))) for i, h in enumerate(hist)]
    fig = charts.progress(points, "the search: each evaluation and the best so far")
    return section("The search's progress", fig, id_="progress",
                   note="Each point is one configuration in the order the search asked for it "
                        "(memoised repeats included: they cost nothing); crosses were refused "
                        "before any GPU run; the line is the best so far (speedup: passed "
                        "ones only).")


def _best(d):
    best = d.get("best")
    if not best:
        return section("Best configuration", el("p", "No configuration passed.", class_="note"),
                       id_="best")
    report = d.get("best_report") or {}
    m = report.get("metrics") or {}
    s = None
    if isinstance(m.get("speedup"), (int, float)):
        s = (m["speedup"], m.get("speedup_low"), m.get("speedup_high"))
    rows = [[k, str(v)] for k, v in best.items()]
    facts = [["verdict", verdict_badge(str(report.get("verdict", "passed")))],
             ["speedup [95% CI]", fmt_speedup(s)],
             ["time", fmt(m.get("time_us"), 4, " us")],
             ["baseline", fmt(m.get("baseline_us"), 4, " us")],
             ["reward", fmt(d.get("reward"), 4)]]
    texts = report.get("texts") or {}
    body = [el("div", table(["knob", "value"], rows, sortable=False),
               table(None, facts, class_="grid kv"), class_="charts")]
    if texts.get("feedback") or texts.get("message"):
        body.append(el("div", el("b", "feedback: "), texts.get("feedback") or texts["message"]))
    if d.get("source"):
        body.append(details("the best CUDA variant's source", pre(d["source"])))
    return section("Best configuration", *body, id_="best")


def _knobs(d):
    knobs = d.get("knobs") or {}
    points = [(h.get("knobs") or {}, h["speedup"]) for h in d["history"]
              if h.get("verdict") == "passed" and isinstance(h.get("speedup"), (int, float))
              and not h.get("cached")]
    if not knobs or not points:
        return None
    fig = charts.knob_effects(knobs, points, "speedup of each passed configuration, by knob")
    constraints = d.get("constraints") or []
    return section("Knobs", fig, el("p", "constraints: " + "; ".join(constraints), class_="note")
                   if constraints else None, id_="knobs",
                   note="Each knob's values as the space lists them; every dot a configuration "
                        "that passed.")


def _history(d):
    names = list(d.get("knobs") or {})
    if not names:
        names = sorted({k for h in d["history"] for k in (h.get("knobs") or {})})
    rows = []
    for i, h in enumerate(d["history"], 1):
        knobs = h.get("knobs") or {}
        s = None
        if isinstance(h.get("speedup"), (int, float)):
            s = (h["speedup"], h.get("speedup_low"), h.get("speedup_high"))
        note = h.get("invalid") or h.get("message") or ""
        rows.append([(str(i), i)] + [(str(knobs.get(k, "-")), knobs.get(k)
                                      if isinstance(knobs.get(k), (int, float)) else None)
                                     for k in names]
                    + [(verdict_badge(str(h.get("verdict") or "?")), str(h.get("verdict"))),
                       (fmt_speedup(s), s[0] if s else None),
                       (fmt(h.get("reward"), 4), h.get("reward")),
                       (fmt(h.get("time_us"), 4, " us"), h.get("time_us")),
                       "memo" if h.get("cached") else "refused" if h.get("invalid") else
                       "GPU" if h.get("ran") else "-",
                       (fmt(h.get("wall_s"), 3), h.get("wall_s")), note])
    numeric = {0, len(names) + 2, len(names) + 3, len(names) + 4, len(names) + 6}
    numeric |= {1 + j for j, k in enumerate(names)
                if all(isinstance(v, (int, float)) for v in (d.get("knobs") or {}).get(k, []))}
    return section("Every evaluation", filter_box("history", "evaluations"),
                   table(["#"] + names + ["verdict", "speedup [95% CI]", "reward", "time",
                                          "from", "wall s", "why / message"], rows,
                         id_="history", numeric=numeric),
                   id_="history-section",
                   note="from: GPU (a backend ran it), refused (the checks, no GPU run), memo "
                        "(judged before: free).")


def tune_page(d, title, source):
    """d: TuneResult.to_dict() (or its JSON read back by load.read_tune)."""
    nav = [("progress", "progress"), ("best", "best configuration"), ("knobs", "knobs"),
           ("history-section", "every evaluation")]
    body = [_summary(d), _progress(d), _best(d), _knobs(d), _history(d)]
    if not charts.HAVE_MATPLOTLIB:
        body.insert(0, charts.unavailable())
    what = f"{d.get('kernel') or 'a kernel'} on {d.get('problem') or 'its problem'}"
    return page(title, f"{what}: {len(d['history'])} steps, from {source}",
                Markup("".join(x for x in body if x)), nav)
