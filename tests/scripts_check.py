#!/usr/bin/env python3
"""unit: the scripts a newcomer runs first. scripts/summary.py prints why each
skipped test was skipped (meson's "SKIP: why" before exit 77, pytest's skip
message), not only in testlog.json; scripts/main.sh installs nothing into the
system Python (deps.sh --build skips pytest, which only the tests use).
Usage: scripts_check.py SOURCE_ROOT"""
import json
import os
import pathlib
import stat
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    # ---- summary.py: skip reasons in the summary ----
    log = tmp / "testlog.json"
    records = [
        {"name": "libkreward:unit / score", "result": "OK", "stdout": "", "stderr": ""},
        {"name": "libkreward:gpu / gpu_fault", "result": "SKIP",
         "stdout": "[ RUN      ] fault\n", "stderr": "SKIP: no usable GPU: no NVIDIA driver\n"},
        {"name": "libkreward:gpu / gpu_suite", "result": "SKIP",
         "stdout": "SKIP: no usable GPU: no NVIDIA driver\n", "stderr": ""},
        {"name": "libkreward:gpu / odd", "result": "SKIP", "stdout": "", "stderr": ""},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    xml = tmp / "pytest.xml"
    xml.write_text('<testsuites><testsuite><testcase name="test_a"/>'
                   '<testcase name="test_gpu"><skipped type="pytest.skip" '
                   'message="GPU test: run with -m gpu on a GPU machine"/></testcase>'
                   '<testcase name="tests.test_torch"><skipped message="collection skipped">'
                   "('/x/test_torch.py', 7, 'Skipped: needs torch')</skipped></testcase>"
                   '</testsuite></testsuites>')
    out = subprocess.run([sys.executable, str(root / "scripts/summary.py"), str(log), str(xml)],
                         capture_output=True, text=True)
    lines = out.stdout.splitlines()
    check(out.returncode == 0, f"summary.py exits 0 without failures (got {out.returncode})")
    check(lines and lines[-1] == "2 passed, 0 failed, 5 skipped",
          f"summary.py: the count line last: {lines[-1:]}")
    check("skipped: no usable GPU: no NVIDIA driver: libkreward:gpu / gpu_fault, "
          "libkreward:gpu / gpu_suite" in lines, f"summary.py: the GPU skip reason: {lines}")
    check("skipped: no reason given: libkreward:gpu / odd" in lines,
          f"summary.py: a skip that said nothing: {lines}")
    check("skipped: GPU test: run with -m gpu on a GPU machine: py:test_gpu" in lines,
          f"summary.py: pytest's skip message: {lines}")
    check("skipped: needs torch: py:tests.test_torch" in lines,
          f"summary.py: a module skipped at collection: {lines}")

    # ---- main.sh installs no pytest ----
    main = (root / "scripts/main.sh").read_text()
    check("scripts/deps.sh --build" in main, "main.sh calls deps.sh --build")
    # deps.sh --build with a python3 that has no pytest: pip is never run
    bindir = tmp / "bin"
    bindir.mkdir()
    calls = tmp / "calls"
    fake = bindir / "python3"
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n'
                    '[ "$1" = -c ] && exit 1\nexit 0\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    # (KR_NO_BROWSER: this check is about pip; it installs no browser)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", KR_NO_BROWSER="1")
    dep = subprocess.run(["bash", str(root / "scripts/deps.sh"), "--build"], cwd=root, env=env,
                         capture_output=True, text=True)
    made = calls.read_text() if calls.exists() else ""
    check("pip" not in made and "installing pytest" not in dep.stdout,
          f"deps.sh --build installs no pytest (python3 was called with: {made!r})")
    # and without --build it still does, for the tests (the fake pip succeeds)
    dep = subprocess.run(["bash", str(root / "scripts/deps.sh")], cwd=root, env=env,
                         capture_output=True, text=True)
    made = calls.read_text() if calls.exists() else ""
    check("-m pip install -q pytest" in made, f"deps.sh installs pytest for the tests: {made!r}")

if failures:
    print(f"scripts: {len(failures)} checks failed")
    sys.exit(1)
print("scripts: all checks passed")
