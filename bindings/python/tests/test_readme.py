"""The README's every command and snippet, run as written (or, where a
command cannot run inside the tests, the place that runs it named and
checked): a README that drifted from the code fails here.

- ```python blocks: run in a fresh interpreter from the repository root;
- ```c: an excerpt of examples/c/evaluate_one.c, line for line, in order
  (the unit suite builds and runs that file);
- ```sh: each command line matched by one rule below, which runs it (the
  CLI with the build's binary; `kreward serve` started and asked /health;
  scripts/main.sh) or checks where it runs (scripts/test.sh is .ci/run's
  test command; `pip install` lines name extras pyproject.toml has). A
  command no rule covers fails the test."""
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import INSTALLED, ROOT, has_gpu

README = (ROOT / "README.md").read_text()
if INSTALLED:
    pytest.skip("the README's commands are the repository's (a wheel has no scripts/ or build/)",
                allow_module_level=True)


def blocks(language):
    return re.findall(r"^```%s\n(.*?)^```" % language, README, re.S | re.M)


def build_dir():
    """The build whose library the tests load (build/ or another)."""
    return pathlib.Path(os.environ["KREWARD_LIBRARY"]).resolve().parents[1]


def run_python(code):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_every_block_is_of_a_kind_this_test_runs():
    kinds = re.findall(r"^```(\S*)$", README, re.M)
    opening = kinds[0::2]
    assert set(opening) <= {"sh", "python", "c"}, opening


def test_the_c_example_is_the_file_the_unit_suite_runs():
    (block,) = blocks("c")
    source = [line.strip() for line in (ROOT / "examples" / "c" / "evaluate_one.c").read_text()
              .splitlines()]
    at = 0
    for line in block.splitlines():
        line = line.strip()
        if not line or line == "...":
            continue
        assert line in source[at:], f"README's C line not in evaluate_one.c (in order): {line}"
        at = source.index(line, at) + 1


def test_the_python_examples_run_as_written():
    evaluate, by_hand, kernelbench = blocks("python")
    lines = run_python(evaluate)
    if has_gpu():
        verdict, reward = lines[0].split()
        assert verdict == "passed" and float(reward) > 0
    else:  # nothing ran, so no number, and the message says why
        assert lines[0] == "not_run None"
        assert "verification and timing need an NVIDIA GPU" in lines[1]
    assert float(run_python(by_hand)[0]) == pytest.approx(10 + 5 * 0.6931471805599453)
    lines = run_python(kernelbench)
    if has_gpu():
        assert lines[0].startswith("passed 0.5")
    else:
        assert lines[0] == "error None []"


# ---- the shell commands ----

def _kreward(args, **kw):
    env = dict(os.environ, KREWARD_DEVICE="none")
    return subprocess.run([str(build_dir() / "tools" / "kreward"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, **kw)


def _serve(args):
    args = list(args)
    if "--port" in args:
        args[args.index("--port") + 1] = "0"  # a free port, not 8000
    proc = subprocess.Popen([str(build_dir() / "tools" / "kreward"), *args, "--log-level",
                             "warning"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, proc.stderr.read()
        url = line.split("listening on ")[1].split()[0]
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            health = json.load(r)
        assert health["mode"] == "compile-only" and health["status"] == "ok"
    finally:
        proc.terminate()  # the first signal drains, the second stops at once
        time.sleep(0.2)
        proc.terminate()
        proc.wait(30)


def _main_sh():
    env = dict(os.environ, BUILD_DIR=str(build_dir()))
    out = subprocess.run(["bash", "scripts/main.sh"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "candidates in 13 problems" in out.stdout
    assert "main: building libkreward" in out.stderr  # it says what it does while it builds


def _pip(line):
    extras = re.findall(r"\[(\w+)\]", line)
    import tomllib
    have = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) <= set(have), (line, sorted(have))
    assert "pip\" install" in (ROOT / "scripts" / "wheel-test.sh").read_text()  # pip install . runs there


RULES = [
    (r"^bash scripts/main\.sh$", lambda line: _main_sh()),
    (r"^bash scripts/test\.sh$",
     lambda line: _check("bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(),
                         "scripts/test.sh is CI's test command")),
    (r"^pip install ", _pip),
    (r"^build/tools/kreward serve ", lambda line: _serve(line.split()[1:])),
    (r"^build/tools/kreward ", lambda line: _check_cli(line.split()[1:])),
]


def _check(ok, what):
    assert ok, what


def _check_cli(args):
    out = _kreward(args)
    assert out.returncode == 0, f"kreward {' '.join(args)}: exit {out.returncode}: {out.stderr}"


def shell_commands():
    for block in blocks("sh"):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command:
                yield command


@pytest.mark.parametrize("command", list(shell_commands()))
def test_the_readme_command_runs(command):
    for pattern, rule in RULES:
        if re.search(pattern, command):
            rule(command)
            return
    pytest.fail(f"no test runs the README's command {command!r}: add a rule to test_readme.py")
