#!/usr/bin/env python3
"""gpu: the bundled suite's verdicts match its manifests (honest candidates
pass, wrong ones fail) and every fast candidate beats its reference."""
import json
import subprocess
import sys
import tempfile

kreward, root = sys.argv[1], sys.argv[2]
info = json.loads(subprocess.run([kreward, "info"], capture_output=True, text=True).stdout)
if not info["device"]["usable"]:
    print("SKIP: no usable GPU:", info["device"].get("why"))
    sys.exit(77)
with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
    run = subprocess.run([kreward, "suite", f"{root}/examples/problems", "--jsonl", out.name],
                         capture_output=True, text=True)
    print(run.stdout)
    print(run.stderr, file=sys.stderr)
    lines = [json.loads(l) for l in open(out.name)]
bad = [l for l in lines if not l["as_expected"]]
for l in bad:
    r = l["report"]
    print(f"UNEXPECTED {l['problem']}/{l['candidate']}: expected {l['expect']}, got {r['verdict']}:",
          r.get("texts", {}).get("feedback") or r.get("texts", {}).get("message"))
slow_fast = [l for l in lines if l["candidate"].endswith("fast.cu")
             and not (l["report"]["metrics"].get("speedup") or 0) > 1]
for l in slow_fast:
    print(f"NOT FASTER {l['problem']}/{l['candidate']}: speedup {l['report']['metrics'].get('speedup')}")
if lines:
    print("one report's timing:", json.dumps(lines[0]["report"].get("timing"), indent=1)[:3000])
print(f"{len(lines)} candidates, {len(bad)} unexpected, {len(slow_fast)} fast ones not faster")
sys.exit(1 if bad or slow_fast or run.returncode not in (0, 1) else 0)
