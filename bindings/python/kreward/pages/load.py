"""Reading what a page shows: a JSONL of reports (a batch, or a suite's
--jsonl), a vetting run's JSONL, or a tuning run's JSON dump
(TuneResult.to_json). Every input error names the file and the line and
raises InputError; nothing here knows HTML.

Report lines come in three shapes, all accepted in one file:
  - a report as docs/report-format.md describes it (verdict, flags,
    metrics, texts, reward);
  - the same with a "suite" object {problem, candidate, expected,
    as_expected} (`kreward suite` on a KernelBench folder);
  - {problem, candidate, expect, as_expected, not_run, report}
    (`kreward suite` on kreward problems)."""
import json
import math

KINDS = ("reports", "vet", "tune")
TUNE_FORMAT = "kreward.tune"


class InputError(ValueError):
    """An input the pages cannot read: `where` is "FILE" or "FILE:LINE"."""

    def __init__(self, where, message):
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class Entry:
    """One candidate's report, with where it came from. problem, candidate:
    names (from the suite, else the report's texts, else the line number);
    expected, as_expected: the suite's expectation (None outside a suite;
    as_expected None: could not be told here, e.g. not run)."""
    __slots__ = ("line", "problem", "candidate", "verdict", "flags", "metrics", "texts", "reward",
                 "terms", "expected", "as_expected", "in_suite")

    def __init__(self, line, report, suite=None):
        texts = report.get("texts") if isinstance(report.get("texts"), dict) else {}
        metrics = report.get("metrics") if isinstance(report.get("metrics"), dict) else {}
        reward = report.get("reward") if isinstance(report.get("reward"), dict) else {}
        suite = suite or {}
        self.line = line
        self.in_suite = bool(suite)
        self.problem = str(suite.get("problem") or texts.get("problem") or "(unnamed problem)")
        self.candidate = str(suite.get("candidate") or texts.get("candidate") or f"line {line}")
        self.verdict = str(report["verdict"])
        self.flags = [str(f) for f in report.get("flags") or [] if f is not None]
        self.metrics = {str(k): v for k, v in metrics.items() if _number(v)}
        self.texts = {str(k): str(v) for k, v in texts.items() if v is not None}
        total = reward.get("total", metrics.get("reward"))
        self.reward = total if _number(total) else None
        self.terms = [t for t in reward.get("terms") or [] if isinstance(t, dict)]
        self.expected = suite.get("expected")
        self.as_expected = suite.get("as_expected")

    @property
    def not_run(self):
        """Could not be judged here (no GPU): not the candidate's doing."""
        return self.verdict == "not_run" or "unavailable" in self.texts

    @property
    def shown_verdict(self):
        return "not_run" if self.not_run else self.verdict

    def metric(self, key):
        return self.metrics.get(key)

    @property
    def speedup(self):
        """(speedup, low, high) for a judged candidate that has one, else None
        (low and high may be None)."""
        s = self.metrics.get("speedup")
        if s is None or s <= 0 or self.not_run:
            return None
        lo, hi = self.metrics.get("speedup_low"), self.metrics.get("speedup_high")
        return (s, lo if lo is not None and lo > 0 else None, hi if hi is not None and hi > 0 else None)

    @property
    def feedback(self):
        return self.texts.get("feedback") or self.texts.get("message") or \
            self.texts.get("unavailable") or ""


def _lines(path):
    """(line number, parsed object) for each non-blank line of a JSONL file."""
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(path, f"cannot read it: {e.strerror}") from None
    with f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except ValueError as e:
                raise InputError(f"{path}:{n}", f"not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{n}", f"a line is a JSON object, not {type(obj).__name__}")
            yield n, obj


def entry_of(obj, where="", line=0):
    """The Entry of one parsed line, whatever its shape (see the module)."""
    suite = None
    report = obj
    if isinstance(obj.get("report"), dict) and "verdict" not in obj:
        report = obj["report"]  # the C suite's line
        suite = {"problem": obj.get("problem"), "candidate": obj.get("candidate"),
                 "expected": obj.get("expect"),
                 "as_expected": None if obj.get("not_run") else obj.get("as_expected")}
    elif isinstance(obj.get("suite"), dict):
        suite = obj["suite"]
    if not isinstance(report.get("verdict"), str):
        raise InputError(where, "not a report: no \"verdict\" (docs/report-format.md)")
    for key, kind in (("flags", list), ("metrics", dict), ("texts", dict)):
        if report.get(key) is not None and not isinstance(report[key], kind):
            raise InputError(where, f"\"{key}\" is a JSON {'array' if kind is list else 'object'}")
    return Entry(line, report, suite)


def read_reports(path):
    """The Entries of a JSONL of reports, in file order."""
    out = [entry_of(obj, f"{path}:{n}", n) for n, obj in _lines(path)]
    if not out:
        raise InputError(path, "holds no report (one JSON report per line)")
    return out


VET_FIELDS = ("problem", "path", "kind", "kept", "reasons", "import", "deterministic", "device",
              "reference_ms", "launch_bound", "trivial", "strengthened", "weak",
              "tolerance_headroom", "duplicate_of", "seconds", "unchecked")


def read_vetting(path):
    """A vetting run's lines (`kreward problems vet`), one dict per problem,
    every field of VET_FIELDS present (None where the line has none)."""
    out = []
    for n, obj in _lines(path):
        where = f"{path}:{n}"
        if not isinstance(obj.get("problem"), str) or not isinstance(obj.get("kept"), bool):
            raise InputError(where, "not a vetting line: needs \"problem\" (a name) and \"kept\" "
                             "(true or false)")
        for key, kind in (("reasons", list), ("import", dict), ("reference_ms", dict),
                          ("trivial", dict)):
            if obj.get(key) is not None and not isinstance(obj[key], kind):
                raise InputError(where, f"\"{key}\" is a JSON {'array' if kind is list else 'object'}")
        row = {k: obj.get(k) for k in VET_FIELDS}
        row["reasons"] = [str(r) for r in row["reasons"] or []]
        row["import"] = row["import"] or {}
        row["reference_ms"] = row["reference_ms"] or {}
        # kreward.vet writes whether each trivial answer passes (true/false)
        row["trivial"] = {k: ("passes" if v else "fails") if isinstance(v, bool) else v
                          for k, v in (row["trivial"] or {}).items()}
        row["unchecked"] = [str(u) for u in row["unchecked"] or []]
        row["line"] = n
        out.append(row)
    if not out:
        raise InputError(path, "holds no vetting line")
    return out


def read_tune(path):
    """A tuning run's dump (TuneResult.to_json): one JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except OSError as e:
        raise InputError(path, f"cannot read it: {e.strerror}") from None
    except ValueError as e:
        raise InputError(path, f"not JSON ({e})") from None
    return check_tune(obj, path)


def check_tune(obj, where="the tuning result"):
    if not isinstance(obj, dict) or obj.get("format") != TUNE_FORMAT:
        raise InputError(where, f"not a tuning result (a TuneResult.to_json() dump has "
                         f"\"format\": \"{TUNE_FORMAT}\")")
    if not isinstance(obj.get("history"), list):
        raise InputError(where, "a tuning result has a \"history\" array")
    return obj


def detect(path):
    """Which page a file is for: "tune" (one JSON object in TuneResult's
    format), "vet" (lines with "kept" and "import") or "reports"."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(1 << 16)
    except OSError as e:
        raise InputError(path, f"cannot read it: {e.strerror}") from None
    if f'"format": "{TUNE_FORMAT}"' in head or f'"format":"{TUNE_FORMAT}"' in head:
        return "tune"
    for text in head.splitlines():
        if text.strip():
            try:
                first = json.loads(text)
            except ValueError:
                return "reports"  # read_reports names the line
            if isinstance(first, dict) and "kept" in first and "import" in first:
                return "vet"
            return "reports"
    return "reports"
