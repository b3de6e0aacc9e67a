"""`kreward evaluate PROBLEM.py CANDIDATE.py` and `kreward suite DIR` for
KernelBench problems (the C command line hands them here: `python3 -m
kreward.kernelbench`; docs/cli.md). Both go through kreward.Evaluator, so a
ModelNew candidate is judged and scored exactly as a trainer's would be.

Without a GPU: the problem is imported (its probes run on the CPU) and the
output says that ModelNew candidates need an NVIDIA GPU (or `--device cpu`,
which runs torch-only candidates on the CPU: correctness, no attribution,
so no speed pay); the exit code is then 0, or 3 with --require-gpu, as for
kreward problems (`not run`).

Suite layout (examples/kernelbench): problems anywhere below DIR, and
DIR/candidates/manifest.json mapping a problem's path (relative to DIR) to
{candidate path (relative to DIR/candidates): expected outcome}; outcomes:
pass, wrong, torch_fallback, mostly_torch, caught (anything but a pass).
`--reference`: each problem's Model as its own candidate, expected to pass
(a check of the problems and of the timing: its speedup should be ~1).
`--html OUT`: the run's JSONL (--jsonl's, or a temporary one) as a page
once it is done (kreward.pages)."""
import argparse
import json
import math
import os
import sys
import tempfile

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU, EXIT_INTERNAL = 0, 1, 2, 3, 4
UNAVAILABLE = "unavailable"


def _evaluator(args):
    import kreward
    kb = {"runner": {"timeout_s": args.timeout, "call_timeout_s": min(60.0, args.timeout)}}
    if args.device:
        kb["devices"] = [d.strip() for d in args.device.split(",") if d.strip()]
    return kreward.Evaluator(reward=args.reward, preset=args.preset, gpus="none",
                             cache_dir=args.cache_dir, kernelbench=kb)


def _options(p):
    p.add_argument("--reward", default="kernelbench",
                   help="a reward preset or a JSON file (kernelbench: 0.5 correct, up to 1.0 "
                        "at 4x)")
    p.add_argument("--preset", default="fast", choices=("fast", "precise"))
    p.add_argument("--device", metavar="LIST",
                   help="where candidates run: 'cuda:0,cuda:1' (default every GPU this process "
                        "sees), or 'cpu' (torch-only candidates; no attribution, no speed pay)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="a worker's start, load or build (600 s); an evaluation gets twice that")
    p.add_argument("--cache-dir", help="where builds and imports are kept")
    p.add_argument("--require-gpu", action="store_true",
                   help="exit 3 when no GPU can run the candidates")


def parser():
    p = argparse.ArgumentParser(prog="kreward", description="KernelBench problems and ModelNew "
                                "candidates (docs/kernelbench.md)")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("evaluate", help="one ModelNew candidate against one KernelBench problem")
    e.add_argument("problem", help="the KernelBench problem file (.py)")
    e.add_argument("candidate", help="the ModelNew module (.py), or a completion holding it in "
                                     "a ```python block")
    e.add_argument("--json", action="store_true", help="print the JSON report")
    _options(e)
    s = sub.add_parser("suite", help="every candidate of a KernelBench suite folder")
    s.add_argument("dir")
    s.add_argument("--jsonl", metavar="OUT", help="also write one JSON line per candidate")
    s.add_argument("--html", metavar="OUT", help="also write the run as an HTML page (works "
                                                 "offline; docs/pages.md)")
    s.add_argument("--filter", metavar="TEXT", help="only problems whose path contains TEXT")
    s.add_argument("--reference", action="store_true",
                   help="each problem's Model as its own candidate (expected: pass, ~1x)")
    _options(s)
    return p


def _read(path, what):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise SystemExit(f"kreward: cannot read the {what} {path}: {e.strerror}") from None


def _source(text):
    """A candidate file's ModelNew: the file itself, or the ModelNew block of
    a completion saved to a file."""
    from ..completion import KERNELBENCH, extract_code
    if "```" in text:
        code = extract_code(text, kind=KERNELBENCH)
        return code if code is not None else text
    return text


def _summary(name, report):
    d = report.to_dict()
    m, t = d.get("metrics", {}), d.get("texts", {})
    lines = [f"{name}: {d['verdict']}" + (f" (reward {report.reward:.3g})"
                                          if report.reward is not None else "")]
    if t.get("feedback") or t.get("message"):
        lines.append("  " + (t.get("feedback") or t.get("message")))
    if "speedup" in m:
        interval = ""
        if "speedup_low" in m:
            interval = f" [{m['speedup_low']:.2f}, {m['speedup_high']:.2f}]"
        lines.append(f"  time {m.get('time_us', float('nan')):.1f} us, baseline "
                     f"{m.get('baseline_us', float('nan')):.1f} us, {m['speedup']:.2f}x{interval}")
    if d.get("flags"):
        lines.append("  flags: " + ", ".join(d["flags"]))
    return "\n".join(lines)


def _no_gpu_note(why):
    return (f"Not run: {why}.\nThe problems were imported (their probes ran on the CPU); "
            "verifying and timing ModelNew candidates needs an NVIDIA GPU (--device cpu runs "
            "torch-only candidates on the CPU: correctness only, no speed pay).")


def evaluate(args):
    from ..problems import ProblemError
    _read(args.problem, "problem")  # unreadable: said now, as a usage error
    candidate = _source(_read(args.candidate, "candidate"))
    with _evaluator(args) as ev:
        try:
            p = ev.problem(args.problem)
        except ProblemError as e:
            print(f"kreward evaluate: {e}", file=sys.stderr)
            return EXIT_USAGE
        r = ev.evaluate(p, candidate, name=os.path.basename(args.candidate))
        try:
            why = r.text(UNAVAILABLE)
            if args.json:
                print(r.to_json())
            elif why:
                imp = p.imported()
                print(f"{p.name}: imported ({len(imp.cases)} cases: "
                      f"{', '.join(c[0] for c in imp.cases)}; {len(imp.tensors)} tensors)")
                for note in imp.notes:
                    print(f"  note: {note}")
                print(_no_gpu_note(why))
            else:
                print(_summary(f"{p.name} / {os.path.basename(args.candidate)}", r))
            if why:
                return EXIT_NO_GPU if args.require_gpu else EXIT_OK
            if r.verdict == "error":
                return EXIT_INTERNAL
            return EXIT_OK if r.verdict == "passed" else EXIT_FAILED
        finally:
            r.close()


# ---- suite ----

def _manifest(root, reference, flt):
    """[(problem path, candidate path or None for its Model, expectation)]."""
    from ..problems import scan_kernelbench
    items = []
    if reference:
        names = scan_kernelbench(root)
        paths = sorted({p for n, p in names.items() if "/" in n or n == os.path.splitext(
            os.path.basename(p))[0]})
        items = [(p, None, "pass") for p in paths]
    else:
        path = os.path.join(root, "candidates", "manifest.json")
        try:
            with open(path) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"kreward suite: {path}: {e} (a KernelBench suite folder has "
                             "candidates/manifest.json; --reference times each problem's "
                             "Model instead)") from None
        for prob, cands in sorted(manifest.items()):
            if not isinstance(cands, dict):
                raise SystemExit(f"kreward suite: {path}: {prob!r} maps to "
                                 "{candidate: expected}")
            for cand, expect in sorted(cands.items()):
                items.append((os.path.join(root, prob), os.path.join(root, "candidates", cand),
                              expect))
    if flt:
        items = [i for i in items if flt in os.path.relpath(i[0], root)]
    return items


def _as_expected(report, expect):
    """True, False, or None when it cannot be told here (not run)."""
    v, flags = report.verdict, report.flags
    if report.text(UNAVAILABLE):
        return None
    if expect == "pass":
        return v == "passed" and "torch_fallback" not in flags
    if expect == "wrong":
        return v == "incorrect"
    if expect == "caught":
        return v != "passed"
    if expect in ("torch_fallback", "mostly_torch"):
        if v == "passed" and "unattributed" in flags:
            return None  # no attribution here: cannot tell
        return v == "passed" and expect in flags
    return False


def _row(problem, cand, report, ok):
    m = report.to_dict().get("metrics", {})
    t = f"{m['time_us']:.1f} us" if "time_us" in m else "-"
    s = "-"
    if "speedup" in m:
        s = f"{m['speedup']:.2f}x"
        if "speedup_low" in m:
            s += f" [{m['speedup_low']:.2f}, {m['speedup_high']:.2f}]"
    reward = "-" if report.reward is None else f"{report.reward:.3g}"
    verdict = "not run" if report.text(UNAVAILABLE) else report.verdict
    mark = "not run" if ok is None else "ok" if ok else "UNEXPECTED"
    return f"{problem:<34} {cand:<34} {verdict:<14} {t:<12} {s:<22} {reward:<8} {mark}"


def suite(args):
    """The suite, and with --html its page: a page that cannot be written
    says so and exits non-zero (the suite's own code when it has one)."""
    if not args.html:
        return _suite(args, args.jsonl)
    from ..pages import cli as pages_cli
    rc = pages_cli.preflight(args.html)
    if rc != EXIT_OK:
        print(f"kreward suite: not run: the page {args.html} could not be written",
              file=sys.stderr)
        return rc
    path, temp = args.jsonl, None
    if path is None:
        fd, temp = tempfile.mkstemp(prefix="kreward-suite-", suffix=".jsonl")
        os.close(fd)
        path = temp
    try:
        rc = _suite(args, path)
        return _page(path, args, rc)
    finally:
        if temp is not None:
            os.unlink(temp)


def _page(path, args, rc):
    from .. import pages
    if os.path.getsize(path) == 0:
        print("kreward suite: no page written: nothing was evaluated", file=sys.stderr)
        return rc or EXIT_USAGE
    try:
        pages.render(path, args.html, title=f"kreward suite {args.dir}", kind="reports",
                     source=f"kreward suite {args.dir}")
    except Exception as e:  # the suite's code stands; the page's failure is said
        print(f"kreward suite: the page {args.html} was not written: {type(e).__name__}: {e}"
              + ("; the suite's own exit code stands" if rc else ""), file=sys.stderr)
        return rc or (EXIT_USAGE if isinstance(e, (OSError, pages.InputError)) else EXIT_INTERNAL)
    print(f"page: {args.html}")
    return rc


def _suite(args, jsonl):
    from ..problems import ProblemError
    root = os.path.abspath(args.dir)
    items = _manifest(root, args.reference, args.filter)
    if not items:
        print(f"kreward suite: no candidate under {root}" +
              (f" matches the filter {args.filter!r}" if args.filter else ""), file=sys.stderr)
        return EXIT_USAGE
    out = open(jsonl, "w") if jsonl else None
    counts = {"ok": 0, "bad": 0, "not_run": 0}
    why_no_gpu = None
    try:
        with _evaluator(args) as ev:
            problems, sources, rows = [], [], []
            for prob, cand, expect in items:
                try:
                    p = ev.problem(prob)
                except ProblemError as e:
                    print(f"kreward suite: {os.path.relpath(prob, root)}: {e}", file=sys.stderr)
                    return EXIT_USAGE
                src = p.source.replace("class Model(", "class ModelNew(", 1) if cand is None \
                    else _read(cand, "candidate")
                problems.append(p)
                sources.append(_source(src))
                rows.append((os.path.relpath(prob, root)[:-3],
                             "(its Model)" if cand is None else
                             os.path.relpath(cand, os.path.join(root, "candidates")), expect))
            print(f"{'problem':<34} {'candidate':<34} {'verdict':<14} {'time':<12} "
                  f"{'speedup [95% CI]':<22} {'reward':<8} expected?")
            for (prob, cand, expect), report in zip(rows, ev.evaluate_batch(problems, sources)):
                ok = _as_expected(report, expect)
                why_no_gpu = why_no_gpu or report.text(UNAVAILABLE)
                counts["not_run" if ok is None else "ok" if ok else "bad"] += 1
                print(_row(prob, cand, report, ok), flush=True)
                if out is not None:
                    d = report.to_dict()
                    d["suite"] = {"problem": prob, "candidate": cand, "expected": expect,
                                  "as_expected": ok}
                    out.write(json.dumps(d) + "\n")
                report.close()
    finally:
        if out is not None:
            out.close()
    total = sum(counts.values())
    line = f"\n{total} candidates in {len({r[0] for r in rows})} problems: {counts['ok']} as expected"
    if counts["bad"]:
        line += f", {counts['bad']} NOT"
    if counts["not_run"]:
        line += f", {counts['not_run']} not run"
    print(line)
    if why_no_gpu:
        print(_no_gpu_note(why_no_gpu))
    if counts["bad"]:
        return EXIT_FAILED
    if why_no_gpu and args.require_gpu:
        return EXIT_NO_GPU
    return EXIT_OK


def main(argv=None):
    args = parser().parse_args(argv)
    if args.timeout <= 0 or not math.isfinite(args.timeout):
        print("kreward: --timeout is seconds > 0", file=sys.stderr)
        return EXIT_USAGE
    try:
        return evaluate(args) if args.command == "evaluate" else suite(args)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return EXIT_USAGE
        raise
