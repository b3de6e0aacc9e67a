"""A live `kreward serve` for the tests: a subprocess on a free port
(python -m kreward.serve --port 0), its URL read from its first line."""
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def live_server(*args, token=None, env=None, gpus="none"):
    """gpus: "none" asks for --compile-only by name (CI has no GPU: a server
    without a GPU worker does not start otherwise); None: every GPU; else
    the server's --gpus."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT / "bindings" / "python") + os.pathsep + e.get("PYTHONPATH", "")
    if token:
        e["KREWARD_TOKEN"] = token
    e.update(env or {})
    gpu_args = ["--compile-only"] if gpus == "none" else ["--gpus", gpus] if gpus else []
    proc = subprocess.Popen([sys.executable, "-m", "kreward.serve", "--port", "0", *gpu_args,
                             "--log-level", "warning", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    url = None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if "listening on " in line:
                url = line.split("listening on ")[1].split()[0]
                break
        if url is None:
            proc.kill()
            raise RuntimeError(f"kreward serve did not start: {proc.stderr.read()}")
        proc.url = url
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGINT)  # the second one stops at once
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def slow(i):
    """A candidate whose compile takes about 1.4 s (NVRTC's constexpr step
    limit), then fails: work that keeps a compile worker busy."""
    return ("__host__ __device__ constexpr long f(long n) { long s = 0; for (long i = 0; i < n; "
            "i++) s = (s * 31 + i) % 1000003; return s; }\n"
            f"__global__ void k(float *x) {{ constexpr long v = f(1000000); x[0] = v + {i}; }}\n")
