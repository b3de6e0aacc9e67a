#!/usr/bin/env python3
"""Summarises test results: meson's testlog.json files and pytest JUnit XML files.

Prints, for each reason a test was skipped, one line "skipped: REASON: names"
(the reason is the test's own: meson tests print "SKIP: why" before exit 77,
pytest records the skip message), then one line "N passed, N failed, N
skipped" last, and exits 1 when anything failed."""
import ast
import json
import sys
import xml.etree.ElementTree as ET


def meson_skip_reason(record):
    """The last line a skipped meson test printed that starts with SKIP (our
    convention before exit 77), else its last line, else 'no reason given'."""
    lines = [l.strip() for l in (record.get("stdout") or "").splitlines() +
             (record.get("stderr") or "").splitlines() if l.strip()]
    said = [l for l in lines if l.upper().startswith("SKIP")]
    line = said[-1] if said else lines[-1] if lines else ""
    return line.split(":", 1)[1].strip() if said and ":" in line else line or "no reason given"


def pytest_skip_reason(skipped):
    """The skip's message; for a module skipped at collection, the reason in
    the element's text, "('file.py', line, 'Skipped: reason')"."""
    reason = skipped.get("message") or ""
    if reason == "collection skipped" and skipped.text:
        try:
            reason = str(ast.literal_eval(skipped.text)[2])
        except (ValueError, SyntaxError, IndexError, TypeError):
            reason = skipped.text
    for prefix in ("Skipped: ", "SKIP: "):
        reason = reason[len(prefix):] if reason.startswith(prefix) else reason
    return reason.strip() or "no reason given"


def summarise(paths):
    passed = failed = 0
    skips = {}  # reason -> names, in the order met
    for path in paths:
        try:
            if path.endswith(".xml"):
                root = ET.parse(path).getroot()
                for case in root.iter("testcase"):
                    skipped = case.find("skipped")
                    if case.find("failure") is not None or case.find("error") is not None:
                        failed += 1
                    elif skipped is not None:
                        skips.setdefault(pytest_skip_reason(skipped), []).append(
                            "py:" + case.get("name", "?"))
                    else:
                        passed += 1
                continue
            for line in open(path):
                r = json.loads(line)
                result = r.get("result")
                if result in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif result == "SKIP":
                    skips.setdefault(meson_skip_reason(r), []).append(r.get("name", "?"))
                else:
                    failed += 1
        except FileNotFoundError:
            print(f"summary: {path} missing (the suite did not run)")
            failed += 1
    out = [f"skipped: {reason}: {', '.join(names)}" for reason, names in skips.items()]
    skipped = sum(len(n) for n in skips.values())
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    return out + [line], failed


if __name__ == "__main__":
    lines, failed = summarise(sys.argv[1:])
    print("\n".join(lines))
    sys.exit(1 if failed else 0)
