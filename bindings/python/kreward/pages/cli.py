"""`kreward report FILE [--html OUT]` (the C command line hands it here:
python3 -m kreward.pages; docs/cli.md): reads a JSONL of reports, a vetting
run's JSONL or a tuning run's JSON, prints what it holds, and with --html
writes its page. `kreward suite DIR --html OUT` runs it on the suite's
JSONL.

Exit codes, as the rest of the command line: 0 written (or summarised), 2
a bad command line, an input that cannot be read or parsed (the message
names the line) or an OUT that cannot be written, 4 the page could not be
made (a bug: the message says what failed)."""
import argparse
import collections
import os
import sys
import traceback

from . import charts, detect, load, render

EXIT_OK, EXIT_USAGE, EXIT_INTERNAL = 0, 2, 4


def parser():
    p = argparse.ArgumentParser(
        prog="kreward report",
        description="Reads a JSONL of reports (a batch, or a suite's --jsonl), a vetting run's "
                    "JSONL (kreward problems vet) or a tuning run's JSON (TuneResult.to_json), "
                    "prints a summary, and with --html writes one HTML page that works "
                    "offline: verdicts and flags, speedups with their intervals, where the "
                    "time goes, every candidate's feedback (docs/pages.md).",
        epilog="exit: 0 done, 2 usage, an input that cannot be read (its line named) or an OUT "
               "that cannot be written, 4 the page could not be made")
    p.add_argument("file", help="the JSONL (or a tuning run's JSON)")
    p.add_argument("--html", metavar="OUT", help="write the page to OUT")
    p.add_argument("--title", help="the page's title (default: what it is and the file's name)")
    p.add_argument("--source", metavar="TEXT",
                   help="what the page says it was made from (default: the file's name)")
    p.add_argument("--kind", choices=load.KINDS,
                   help="what the file holds (default: told from its first line)")
    p.add_argument("--quiet", action="store_true",
                   help="print only where the page went (kreward suite --html uses it)")
    p.add_argument("--preflight", action="store_true", help=argparse.SUPPRESS)
    return p


def _summary(path, kind):
    """A few lines on what the file holds."""
    if kind == "tune":
        d = load.read_tune(path)
        best = d.get("best")
        return (f"{path}: a tuning run ({d.get('strategy')}): {d.get('evaluations')} "
                f"evaluations, {d.get('gpu_runs')} on a GPU, {d.get('refused')} refused; best "
                + (" ".join(f"{k}={v}" for k, v in best.items()) +
                   f" at {d.get('speedup') or 0:.2f}x" if best else "none passed"))
    if kind == "vet":
        rows = load.read_vetting(path)
        kept = [r for r in rows if r["kept"]]
        flagged = sum(1 for r in kept if r["reasons"])
        return (f"{path}: {len(rows)} problems vetted: {len(kept)} kept ({flagged} flagged), "
                f"{len(rows) - len(kept)} refused")
    entries = load.read_reports(path)
    verdicts = collections.Counter(e.shown_verdict for e in entries)
    flags = collections.Counter(f for e in entries for f in e.flags)
    line = (f"{path}: {len(entries)} reports, {len({e.problem for e in entries})} problems: "
            + ", ".join(f"{n} {v}" for v, n in verdicts.most_common()))
    if flags:
        line += "\nflags: " + ", ".join(f"{n} {f}" for f, n in flags.most_common())
    return line


def preflight(out):
    """Before a long suite: can this Python write OUT's page at the end?"""
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        print(f"kreward: cannot write {out}: its folder {folder} is not a writable folder",
              file=sys.stderr)
        return EXIT_USAGE
    if not charts.HAVE_MATPLOTLIB:
        print(f"kreward: note: {charts.WHY_NO_CHARTS}", file=sys.stderr)
    return EXIT_OK


def main(argv=None):
    args = parser().parse_args(argv)
    if args.preflight:
        return preflight(args.html or args.file)
    try:
        kind = args.kind or detect(args.file)
        if not args.quiet:
            print(_summary(args.file, kind))
        if args.html:
            render(args.file, args.html, title=args.title, kind=kind, source=args.source)
            note = "" if charts.HAVE_MATPLOTLIB else f" (no charts: {charts.WHY_NO_CHARTS})"
            print(f"page: {args.html}{note}")
    except load.InputError as e:
        print(f"kreward report: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"kreward report: cannot write {args.html}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # a bug: say what, never leave a silent missing page
        traceback.print_exc()
        print(f"kreward report: could not make the page of {args.file}: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK
