#!/usr/bin/env python3
"""Imports every problem file of a KernelBench checkout (KernelBench/level1..3
by default) with kreward.kernelbench on this machine's CPU, two at a time,
and prints a table: imported (with scaled cases or only the file's own
sizes, device-only form or not), refused with the reason, crashed (an
exception other than ImportRefused: an importer bug). Needs torch.

Usage: scripts/kernelbench_import_all.py KERNELBENCH_DIR [--levels 123] [--json OUT]
(KERNELBENCH_DIR is the folder with level1/ level2/ level3/, e.g. a clone of
ScalingIntelligence/KernelBench's KernelBench/)."""
import argparse
import collections
import glob
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench.importer import ImportRefused  # noqa: E402


def one(path):
    t0 = time.time()
    try:
        imp = import_problem(path, timeout_s=240)
        kind = "imported, scaled" if len(imp.cases) > 1 else "imported, own sizes only"
        return {"file": path, "kind": kind, "why": imp.device_only_reason, "notes": imp.notes,
                "s": round(time.time() - t0, 1)}
    except ImportRefused as e:
        return {"file": path, "kind": "refused", "why": e.reason, "s": round(time.time() - t0, 1)}
    except Exception as e:  # noqa: BLE001 - what the table is for
        return {"file": path, "kind": "crashed", "why": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-1500:], "s": round(time.time() - t0, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--levels", default="123")
    ap.add_argument("--json")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.root, f"level[{a.levels}]", "*.py")))
    if not files:
        sys.exit(f"no level*/ problem files under {a.root}")
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(one, files))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    table = collections.Counter((os.path.basename(os.path.dirname(r["file"])), r["kind"])
                                for r in results)
    print("| level | imported, scaled | imported, own sizes only | with a device-only form | refused | crashed |")
    print("|---|---|---|---|---|---|")
    for level in sorted({lv for lv, _ in table}):
        # with a device-only form: imported with no device_only_reason
        dev = sum(1 for r in results if os.path.basename(os.path.dirname(r["file"])) == level
                  and r["kind"].startswith("imported") and not r["why"])
        print(f"| {level} | {table[(level, 'imported, scaled')]} | "
              f"{table[(level, 'imported, own sizes only')]} | {dev} | {table[(level, 'refused')]} | "
              f"{table[(level, 'crashed')]} |")
    for r in results:
        if r["kind"] in ("refused", "crashed"):
            print(f"{r['kind']}: {os.path.relpath(r['file'], a.root)}: {r['why'][:300]}")
    sys.exit(1 if any(r["kind"] == "crashed" for r in results) else 0)


if __name__ == "__main__":
    main()
