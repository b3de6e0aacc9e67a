#!/usr/bin/env python3
"""Summarises test results: meson's testlog.json files and pytest JUnit XML files.

Prints one line "N passed, N failed, N skipped" (skips with their suites) and
exits 1 when anything failed."""
import json
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
skipped_names = []
for path in sys.argv[1:]:
    try:
        if path.endswith(".xml"):
            root = ET.parse(path).getroot()
            for case in root.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                elif case.find("skipped") is not None:
                    skipped += 1
                    skipped_names.append("py:" + case.get("name", "?"))
                else:
                    passed += 1
            continue
        for line in open(path):
            r = json.loads(line)
            result = r.get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
                skipped_names.append(r.get("name", "?"))
            else:
                failed += 1
    except FileNotFoundError:
        print(f"summary: {path} missing (the suite did not run)")
        failed += 1
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped ({', '.join(skipped_names)})"
print(line)
sys.exit(1 if failed else 0)
