"""The page of a batch of reports, or of a suite run: what each verdict and
flag counts, the speedups with their intervals, where each candidate's time
goes, and every candidate's feedback. Takes load.Entry rows; returns the
document's text."""
import statistics

from . import charts
from .document import (Markup, cards, details, el, filter_box, fmt, fmt_speedup, page, pre,
                       section, table, verdict_badge)

VERDICT_ORDER = ["passed", "incorrect", "compile_error", "invalid_plan", "launch_error", "fault",
                 "timeout", "not_run", "error"]
# where an evaluation's wall time goes: ModelNew phases in the order they
# run (kernelbench/evaluation.py), then a kreward report's measured parts
PHASES = ["start_and_load", "verify", "baseline_ready", "timed", "attribute", "end_candidate",
          "baseline_timed"]
KREWARD_PARTS = [("compile_seconds", "compile"), ("bench_wall_s", "benchmark"),
                 ("counters_wall_s", "counters"), ("robust_wall_s", "robust conditions")]
# texts shown in a candidate's details besides its feedback and message
LONG_TEXTS = ["compile_log", "counters_feedback", "unavailable", "source", "kernelbench"]


def _ordered_verdicts(entries):
    seen = {e.shown_verdict for e in entries}
    return [v for v in VERDICT_ORDER if v in seen] + sorted(seen - set(VERDICT_ORDER))


def _label(e, problems):
    return e.candidate if problems == 1 else f"{e.problem} / {e.candidate}"


def _pick(entries, value, what="best"):
    """At most charts.MAX_ROWS entries for a chart, grouped by problem (each
    problem's highest `value` first), and a note on what was left out;
    `what` names the one kept per problem past MAX_ROWS ("best": the
    highest speedup, "longest")."""
    if len(entries) <= charts.MAX_ROWS:
        order = sorted(entries, key=lambda e: (e.problem, -value(e)))
        return order, None
    best = {}
    for e in entries:
        if e.problem not in best or value(e) > value(best[e.problem]):
            best[e.problem] = e
    kept = sorted(best.values(), key=value, reverse=True)[:charts.MAX_ROWS]
    note = (f"{len(entries)} candidates: the chart shows each problem's {what}"
            + (f", for the {len(kept)} problems with the highest" if len(best) > len(kept) else "")
            + "; the table below has every candidate.")
    return sorted(kept, key=lambda e: e.problem), note


def _summary_cards(entries, problems):
    judged = [e for e in entries if not e.not_run and e.verdict != "error"]
    passed = [e for e in judged if e.verdict == "passed"]
    items = [("candidates", str(len(entries)), None), ("problems", str(problems), None),
             ("passed", str(len(passed)), f"of {len(judged)} judged" if judged else None),
             ("failed", str(len(judged) - len(passed)), None),
             ("not judged", str(len(entries) - len(judged)),
              "not run here, or the environment failed" if len(entries) > len(judged) else None)]
    if any(e.in_suite for e in entries):
        ok = sum(1 for e in entries if e.as_expected is True)
        bad = sum(1 for e in entries if e.as_expected is False)
        items.append(("as expected", str(ok), f"{bad} not, {len(entries) - ok - bad} not run"
                      if bad or len(entries) - ok - bad else None))
    speeds = [e.speedup[0] for e in passed if e.speedup]
    if speeds:
        items.append(("median speedup", f"{statistics.median(speeds):.2f}x",
                      f"best {max(speeds):.2f}x, over {len(speeds)} passed"))
    rewards = [e.reward for e in entries if e.reward is not None]
    if rewards:
        items.append(("mean reward", fmt(statistics.fmean(rewards), 4),
                      f"over {len(rewards)} scored"))
    return cards(items)


def _verdicts(entries):
    verdicts = _ordered_verdicts(entries)
    vcounts = [(v, sum(1 for e in entries if e.shown_verdict == v)) for v in verdicts]
    flags = {}
    for e in entries:
        for f in e.flags:
            flags[f] = flags.get(f, 0) + 1
    fcounts = sorted(flags.items(), key=lambda kv: (-kv[1], kv[0]))
    figs = [charts.counts(vcounts, "candidates per verdict", charts.VERDICT_COLORS)]
    if fcounts:
        figs.append(charts.counts(fcounts[:charts.MAX_ROWS], "candidates per flag"))
    by_problem = {}
    for e in entries:
        by_problem.setdefault(e.problem, []).append(e)
    rows = []
    for name, group in sorted(by_problem.items()):
        speeds = [e.speedup[0] for e in group if e.speedup and e.verdict == "passed"]
        gflags = sorted({f for e in group for f in e.flags})
        rows.append([name, (str(len(group)), len(group))]
                    + [(str(n) if n else "", n) for n in
                       (sum(1 for e in group if e.shown_verdict == v) for v in verdicts)]
                    + [(f"{max(speeds):.2f}x" if speeds else "-", max(speeds) if speeds else None),
                       el("span", [el("span", f, class_="flag") for f in gflags])])
    headers = ["problem", "candidates"] + [v.replace("_", " ") for v in verdicts] + \
        ["best speedup", "flags"]
    numeric = set(range(1, len(verdicts) + 3))
    flag_table = table(["flag", "candidates"], [[f, (str(n), n)] for f, n in fcounts],
                       numeric={1}) if fcounts else el("p", "No candidate has a flag.",
                                                        class_="note")
    return section("Verdicts and flags", el("div", figs, class_="charts"),
                   el("h3", "Per problem"), table(headers, rows, numeric=numeric),
                   el("h3", "Flags"), flag_table, id_="verdicts")


def _speedups(entries, problems):
    rows = [e for e in entries if e.speedup]
    if not rows:
        return section("Speedups", el("p", "No candidate has a measured speedup here (they need "
                                      "an NVIDIA GPU, and a passing verdict).", class_="note"),
                       id_="speedups")
    chosen, note = _pick(rows, lambda e: e.speedup[0])
    fig = charts.speedups([(_label(e, problems), *e.speedup, e.problem) for e in chosen],
                          "speedup per candidate, with its 95 % interval")
    passed = sum(1 for e in rows if e.verdict == "passed")
    text = (f"{len(rows)} candidates with a speedup ({passed} passed; a failed candidate's "
            "speedup is what it measured, never paid).")
    return section("Speedups", fig, el("p", note, class_="note") if note else None,
                   id_="speedups", note=text)


def _time_parts(e):
    parts = {}
    for name in PHASES:
        v = e.metric(f"phase_{name}_s")
        if v is not None:
            parts[name.replace("_", " ")] = v
    for key, v in sorted(e.metrics.items()):
        if key.startswith("phase_") and key.endswith("_s") and key[6:-2] not in PHASES:
            parts[key[6:-2].replace("_", " ")] = v
    if not parts:
        for key, name in KREWARD_PARTS:
            if e.metric(key) is not None:
                parts[name] = e.metric(key)
    return parts


def _times(entries, problems):
    body = []
    gpu = [e for e in entries if not e.not_run and (e.metric("time_us") or e.metric("baseline_us"))]
    if gpu:
        chosen, note = _pick(gpu, lambda e: e.speedup[0] if e.speedup else 0.0,
                             "best (by speedup)")
        body += [el("h3", "GPU time per call"),
                 charts.paired_times([(_label(e, problems), e.metric("time_us"),
                                       e.metric("baseline_us")) for e in chosen],
                                     "median time per call: candidate and baseline"),
                 el("p", note, class_="note") if note else None]
    walls = [(e, _time_parts(e)) for e in entries]
    walls = [(e, p) for e, p in walls if p]
    if walls:
        components = []
        for _, p in walls:
            components += [c for c in p if c not in components]
        total = {id(e): sum(p.values()) for e, p in walls}
        chosen, note = _pick([e for e, _ in walls], lambda e: total[id(e)], "longest")
        parts = {id(e): p for e, p in walls}
        evaluation = [e.metric("evaluation_s") for e, _ in walls if e.metric("evaluation_s")]
        said = (f"the ModelNew evaluations took {sum(evaluation):.1f} s in all"
                if evaluation else f"{sum(total.values()):.1f} s in all")
        body += [el("h3", "Wall time of each evaluation"),
                 charts.stacked([(_label(e, problems), parts[id(e)]) for e in chosen], components,
                                "where each evaluation's wall time went"),
                 el("p", f"Parts: {', '.join(components)}; {said}.", class_="note"),
                 el("p", note, class_="note") if note else None]
    if not body:
        body = [el("p", "No report carries timing metrics.", class_="note")]
    return section("Where the time goes", *body, id_="time",
                   note="What each report measured: time_us and baseline_us per call on the GPU; "
                        "phase_<name>_s of a ModelNew evaluation, or a kreward report's compile "
                        "and benchmark wall time.")


def _terms(e):
    if not e.terms:
        return None
    rows = [[str(t.get("name", "?")), (fmt(t.get("value"), 4), t.get("value")),
             (fmt(t.get("weight"), 4), t.get("weight")),
             "yes" if t.get("counted") else "no"] for t in e.terms]
    return el("div", el("h3", f"reward {fmt(e.reward, 4)}: its terms"),
              table(["term", "value", "weight", "counted"], rows, sortable=False))


def _candidate_details(e):
    parts = []
    fb = e.texts.get("feedback")
    msg = e.texts.get("message")
    if fb:
        parts.append(pre(fb, class_="feedback"))
    if msg and msg != fb:
        parts.append(el("div", el("b", "message: "), msg))
    if e.flags:
        parts.append(el("div", el("b", "flags: "), [el("span", f, class_="flag") for f in e.flags]))
    if e.expected is not None:
        parts.append(el("div", el("b", "expected: "), str(e.expected)))
    parts.append(_terms(e))
    if e.metrics:
        parts.append(details(f"metrics ({len(e.metrics)})",
                             table(["metric", "value"], [[k, fmt(v, 6)] for k, v in
                                                         sorted(e.metrics.items())],
                                   class_="grid kv", sortable=False)))
    for key in LONG_TEXTS + sorted(set(e.texts) - set(LONG_TEXTS) -
                                   {"feedback", "message", "problem", "candidate"}):
        if e.texts.get(key):
            parts.append(details(key, pre(e.texts[key])))
    parts.append(el("div", f"line {e.line} of the input", class_="dim"))
    return parts


def _feedback_cell(e):
    text = e.feedback
    first = text.splitlines()[0] if text else ""
    summary = first if len(first) <= 140 else first[:139] + "\u2026"
    return details(summary or el("span", "(no feedback)", class_="dim"), _candidate_details(e),
                   class_="fb")


def _expected_cell(e):
    if e.as_expected is None:
        return (el("span", "not run", class_="dim"), "not run") if e.not_run else \
            (el("span", "-", class_="dim"), "-")
    return (el("span", "ok", class_="yes"), "ok") if e.as_expected else \
        (el("span", "UNEXPECTED", class_="no"), "unexpected")


def _candidates(entries):
    suite = any(e.in_suite for e in entries)
    headers = ["problem", "candidate", "verdict"] + (["expected?"] if suite else []) + \
        ["reward", "speedup [95% CI]", "time", "feedback"]
    rows = []
    for e in entries:
        verdict = el("span", verdict_badge(e.shown_verdict),
                     [el("span", f, class_="flag") for f in e.flags])
        s = e.speedup
        row = [e.problem, e.candidate, (verdict, e.shown_verdict)]
        if suite:
            row.append(_expected_cell(e))
        row += [(fmt(e.reward, 4), e.reward), (fmt_speedup(s), s[0] if s else None),
                (fmt(e.metric("time_us"), 4, " us"), e.metric("time_us")), _feedback_cell(e)]
        rows.append(row)
    reward_col = 4 if suite else 3
    return section("Candidates", filter_box("candidates", "candidates"),
                   table(headers, rows, id_="candidates", class_="grid wide",
                         numeric={reward_col, reward_col + 1, reward_col + 2}),
                   id_="candidates-section",
                   note="Click a feedback to unfold the candidate's report: its feedback whole, "
                        "the reward's terms, every metric and text. Click a column's title to "
                        "sort.")


def reports_page(entries, title, source):
    """The document for load.Entry rows read from `source` (a file name)."""
    problems = len({e.problem for e in entries})
    sub = f"{len(entries)} reports from {source}"
    nav = [("verdicts", "verdicts and flags"), ("speedups", "speedups"),
           ("time", "where the time goes"), ("candidates-section", "candidates")]
    body = [_summary_cards(entries, problems), _verdicts(entries), _speedups(entries, problems),
            _times(entries, problems), _candidates(entries)]
    if not charts.HAVE_MATPLOTLIB:
        body.insert(0, charts.unavailable())
    return page(title, sub, Markup("".join(body)), nav)
