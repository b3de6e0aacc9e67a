"""Run by scripts/wheel-test.sh with a fresh venv's Python, where only the
kreward wheel (and pytest) is installed: the package, its library, its
worker and its console script come from the wheel, not from the tree.
Usage: python check_installed.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import sysconfig

ROOT = sys.argv[1]
SITE = sysconfig.get_paths()["purelib"]
NATIVE = os.path.join(SITE, ".kreward.mesonpy.libs")

import kreward  # noqa: E402
from kreward import _lib  # noqa: E402


def check(cond, what):
    if not cond:
        sys.exit(f"wheel check failed: {what}")
    print(f"ok: {what}")


check(os.path.realpath(kreward.__file__).startswith(os.path.realpath(SITE)),
      f"kreward imported from the venv ({kreward.__file__})")
check(os.path.realpath(_lib.path) == os.path.realpath(os.path.join(NATIVE, "libkreward.so.1")),
      f"libkreward.so.1 loaded from the wheel ({_lib.path})")

# the console script runs the bundled CLI
venv_bin = os.path.dirname(sys.executable)
out = subprocess.run([os.path.join(venv_bin, "kreward"), "info"], capture_output=True, text=True,
                     check=True).stdout
info = json.loads(out)
check(info["library"]["version"] == kreward.__version__ if hasattr(kreward, "__version__")
      else bool(info["library"]["version"]), f"kreward info runs ({info['library']})")
check(info["nvrtc"]["loaded"], f"NVRTC found: {info['nvrtc'].get('path')} "
      f"({info['nvrtc'].get('source')})")

# the pool finds the wheel's kreward-worker beside the library (compile only here)
vadd = os.path.join(ROOT, "examples", "problems", "l1_vector_add")
with kreward.Context(no_device=True) as ctx, kreward.Pool(gpus="none", compile_workers=1) as pool:
    problem = ctx.load_problem(os.path.join(vadd, "problem.json"))
    good = open(os.path.join(vadd, "candidates", "fast.cu")).read()
    t1 = pool.submit(problem, good)
    t2 = pool.submit(problem, "__global__ void k( {")
    pids = [w["pid"] for w in pool.status()["workers"] if w.get("pid")]
    exes = {os.path.realpath(os.readlink(f"/proc/{p}/exe")) for p in pids
            if os.path.exists(f"/proc/{p}/exe")}
    r1, r2 = pool.wait(t1), pool.wait(t2)
check(exes == {os.path.realpath(os.path.join(NATIVE, "kreward-worker"))},
      f"the pool's workers run the wheel's kreward-worker ({sorted(exes)})")
check(r1.verdict == "not_run", f"a good candidate compiles in the worker (verdict {r1.verdict})")
check(r2.verdict == "compile_error", f"a broken one is a compile error (verdict {r2.verdict})")

# KREWARD_LIBRARY still overrides the bundled library
env = dict(os.environ, KREWARD_LIBRARY="/nonexistent/libkreward.so.1")
err = subprocess.run([sys.executable, "-c", "import kreward"], capture_output=True, text=True,
                     env=env, cwd="/")
check(err.returncode != 0 and "/nonexistent/libkreward.so.1" in err.stderr,
      "KREWARD_LIBRARY overrides the bundled library")
