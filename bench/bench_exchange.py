#!/usr/bin/env python3
"""A request's round trip read two ways, alone and beside busy threads of
the same process: this thread's clock around a write and a read (how a
ModelNew batch was timed before), and libkreward's kr_exchange_timed
(how it is timed now: both clock readings taken in C, the interpreter lock
let go). The other end is a child that answers each request line after
--work-ms of its own busy work, as a worker answers a batch's go.

Beside a busy Python thread, a thread woken by the reply waits for the
interpreter lock (up to the switch interval, 5 ms by default) before its
clock can be read; the library's readings are taken before that wait.

Printed: a row per case (busy threads 0, 1, 3): median, p90 and max ms of
each way over --requests round trips, and the Python clock's median over the
library's.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 PYTHONPATH=bindings/python \\
        python3 bench/bench_exchange.py [--requests 200] [--work-ms 2]
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import threading
import time

from kreward import _lib

CHILD = """
import os, sys, time
work = float(sys.argv[1]) / 1e3
while True:
    line = b""
    while not line.endswith(b"\\n"):
        b = os.read(0, 4096)
        if not b:
            raise SystemExit
        line += b
    t = time.perf_counter()
    while time.perf_counter() - t < work:
        pass
    os.write(1, b'{"ok": true}\\n')
"""


def python_clock(wfd, rfd):
    t0 = time.perf_counter()
    os.write(wfd, b'{"op": "go"}\n')
    line = b""
    while not line.endswith(b"\n"):
        line += os.read(rfd, 4096)
    return (time.perf_counter() - t0) * 1e3


def library_clock(wfd, rfd, room=(ctypes.c_char * 4096)()):
    times, counts = (ctypes.c_uint64 * 2)(), (ctypes.c_size_t * 2)()
    req = b'{"op": "go"}\n'
    rc = _lib.fn.exchange_timed(times, counts, room, len(room), wfd, req, len(req), rfd, -1, 5000)
    if rc != 0:
        raise RuntimeError(f"kr_exchange_timed: {rc}")
    return (times[1] - times[0]) / 1e6


def summary(ms):
    ms = sorted(ms)
    return statistics.median(ms), ms[int(0.9 * (len(ms) - 1))], ms[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--work-ms", type=float, default=2.0)
    a = p.parse_args()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(a.work_ms)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    wfd, rfd = child.stdin.fileno(), child.stdout.fileno()
    print(f"switch interval {sys.getswitchinterval() * 1e3:.1f} ms, the child's work {a.work_ms} ms a request, "
          f"{a.requests} requests a cell, {os.cpu_count()} CPUs")
    print(f"{'busy threads':>12} | {'Python clock: median / p90 / max ms':>36} | "
          f"{'library: median / p90 / max ms':>31} | Python / library")
    try:
        for busy in (0, 1, 3):
            stop = threading.Event()

            def spin():
                x = 0
                while not stop.is_set():
                    x += 1
            spinners = [threading.Thread(target=spin, daemon=True) for _ in range(busy)]
            for t in spinners:
                t.start()
            try:
                py = summary([python_clock(wfd, rfd) for _ in range(a.requests)])
                lib = summary([library_clock(wfd, rfd) for _ in range(a.requests)])
            finally:
                stop.set()
                for t in spinners:
                    t.join()
            print(f"{busy:>12} | {py[0]:10.3f} / {py[1]:8.3f} / {py[2]:8.3f}       | "
                  f"{lib[0]:9.3f} / {lib[1]:7.3f} / {lib[2]:7.3f}     | {py[0] / lib[0]:6.2f}x")
    finally:
        child.stdin.close()
        child.wait(10)


if __name__ == "__main__":
    main()
