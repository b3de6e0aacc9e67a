"""ModelNew candidates evaluated in a worker process (worker.py): the caller
makes the golden outputs with the problem's Model (reference.py), the worker
runs the candidate, and everything the worker says is checked here.

Defences, as for device-only candidates where they apply:
- fresh inputs per call, made from seeds by both sides (inputs.py): a
  candidate that caches outputs across calls returns stale ones;
- every case verified (the scaled ones catch shape overfitting);
- timed calls run back to back in batches; which calls are checked is drawn
  after the batch ran (the worker keeps every output until asked), so
  skipping work on unchecked calls is caught at the check fraction's rate;
- a digest of the inputs after the call, against the caller's own: a
  candidate that writes its inputs, or tampers with the generator, fails;
- the time that counts is the caller's clock around a batch (divided by its
  calls); the worker's CUDA-event times must fit inside it
  (`timing_mismatch` otherwise: the worker's clock was tampered with);
- kernels attributed with the profiler (CUPTI): the ones named in the
  candidate's source are custom, the rest torch's or a library's; a
  candidate that launched no custom kernel is `torch_fallback` and gets no
  speed credit (reward_of).
The worker is killed on a deadline (`timeout`) and a crash is a verdict
(`crash`), never the caller's problem. It runs in libkreward's sandbox
(confine.py, worker.py): reads limited to Python's trees, the toolkit and
the driver's files, writes to the candidate's own build folder, no network,
no exec once every case ran (`seal`); what the sandbox refused is the
verdict `denied`, and a layer the kernel lacks is said in the notes."""
import hashlib
import json
import os
import random
import re
import select
import subprocess
import sys
import tempfile
import time

import torch

from .. import _lib
from .confine import missing
from .inputs import DTYPES, digest, make_inputs
from .reference import Reference

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "kreward", "kernelbench")


class WorkerDied(Exception):
    pass


class WorkerTimeout(Exception):
    pass


class CandidateDenied(Exception):
    """The candidate did something the sandbox refuses."""


def _failure(reply):
    """The exception for a worker's failed reply."""
    if reply.get("denied"):
        return CandidateDenied(reply["error"])
    return RuntimeError(reply["error"])


class WorkerProcess:
    """The worker with its pipes; every request has a deadline."""

    def __init__(self, env=None, sandbox=None):
        to_w, self._w = os.pipe()
        self._r, from_w = os.pipe()
        self.log = tempfile.TemporaryFile()
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES",
                         "PYTHONPATH", "TMPDIR", "TRITON_CACHE_DIR", "USER", "LOGNAME")}
        # getpass.getuser() reads the password file (refused) without them
        keep.setdefault("USER", "kreward")
        keep.setdefault("LOGNAME", keep["USER"])
        argv = [sys.executable, WORKER, str(to_w), str(from_w), json.dumps(sandbox) if sandbox else ""]
        self.proc = subprocess.Popen(argv,
                                     pass_fds=(to_w, from_w), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, env={**keep, **(env or {})},
                                     start_new_session=True)
        os.close(to_w)
        os.close(from_w)
        # a bytearray: outputs of 64 MB arrive in pipe-sized chunks, and
        # appending to bytes copied the whole buffer each time (quadratic:
        # a 4096x4096 fetch ran past its deadline)
        self._buf = bytearray()

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self._r], [], [], left)[0]:
            raise WorkerTimeout("the worker did not answer in time")
        chunk = os.read(self._r, 1 << 20)
        if not chunk:
            raise WorkerDied(self.exit_reason())
        self._buf += chunk

    def _read(self, n, deadline):
        while len(self._buf) < n:
            self._fill(deadline)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _line(self, deadline):
        while b"\n" not in self._buf:
            self._fill(deadline)
        end = self._buf.index(b"\n")
        line = bytes(self._buf[:end])
        del self._buf[:end + 1]
        return line

    def request(self, obj, timeout_s):
        deadline = time.monotonic() + timeout_s
        try:
            os.write(self._w, (json.dumps(obj) + "\n").encode())
        except BrokenPipeError:
            raise WorkerDied(self.exit_reason()) from None
        reply = json.loads(self._line(deadline))  # the worker's JSON: data, never code
        payload = self._read(reply["bytes"], deadline) if reply.get("bytes") else b""
        return reply, payload

    def exit_reason(self):
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker closed its pipe"
        self.log.seek(0)
        tail = self.log.read()[-1500:].decode(errors="replace").strip()
        how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        return f"the worker died ({how}): {tail}"

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)  # its own session: children (nvcc, ninja) go with it
            self.proc.wait()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()


def custom_kernel_names(source):
    """Kernels the candidate defines: CUDA __global__ functions and
    @triton.jit functions."""
    cuda = re.findall(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?\w[\w\s:<>*]*?\b(\w+)\s*\(", source)
    triton = re.findall(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)", source)
    return sorted(set(cuda) | set(triton))


def attribute(kernels, custom):
    """Splits profiled kernels into the candidate's own and everything else."""
    mine = [k for k in kernels if any(re.search(rf"\b{re.escape(c)}\b", k["name"]) for c in custom)]
    other = [k for k in kernels if k not in mine]
    return mine, other


def reward_of(result):
    """0 unless correct; 0.5 for a correct candidate, up to 1.0 at 4x the
    baseline; no speed credit unless attribution showed kernels of its own
    (a torch_fallback candidate, or none attributed: the CPU)."""
    if result["verdict"] != "pass":
        return 0.0
    s = result.get("speedup")
    if not s or result.get("torch_fallback") is not False or result.get("timing_mismatch"):
        return 0.5
    import math
    return 0.5 + 0.25 * min(2.0, max(0.0, math.log2(s)))


class Runner:
    """Evaluates ModelNew sources for one imported problem."""

    def __init__(self, imported, device="cuda", cache_dir=None, timeout_s=600.0, call_timeout_s=60.0,
                 sandbox="init"):
        """sandbox: "init" (the default: entered after torch and CUDA are
        up, before the candidate loads; their earlier threads keep their
        file access, see docs/sandbox.md), "start" (entered before torch is
        imported, so every thread is in it: stricter, and the default once
        CUDA has been seen to initialise inside the sandbox on a GPU
        machine), None (none: for debugging; the result says so)."""
        if sandbox not in ("start", "init", None):
            raise ValueError(f"sandbox must be 'start', 'init' or None, not {sandbox!r}")
        self.imp, self.device, self.sandbox = imported, device, sandbox
        self.ref = Reference(imported, device)
        self.cache_dir = cache_dir or DEFAULT_CACHE
        self.timeout_s, self.call_timeout_s = timeout_s, call_timeout_s
        n = len(imported.cases)
        self.layouts = [self._layout(c) for c in range(n)]
        self.init_inputs = [list(self.ref.module(c).get_init_inputs()) for c in range(n)]
        json.dumps(self.init_inputs)  # plain values only: they travel as JSON
        self.values = [{str(k): v for k, v in imported.case_values(c).items()} for c in range(n)]
        self.state_names = [t["module_name"] for t in imported.tensors if t["source"] in ("param", "buffer")]
        self._baseline = None

    def _layout(self, case):
        shapes = self.imp.shapes(self.imp.cases[case][2])
        return [dict(t, shape=s) for t, s in zip(self.imp.tensors, shapes) if t["role"] == "in"]

    def _worker(self, source):
        """A worker for source, its build folder made here (the one folder
        its sandbox lets it write; per source, so no candidate can plant
        files in another's build)."""
        ext = os.path.join(self.cache_dir, hashlib.sha256(source.encode()).hexdigest()[:24])
        os.makedirs(os.path.join(ext, "tmp"), exist_ok=True)
        env = {"TMPDIR": os.path.join(ext, "tmp"), "TRITON_HOME": ext,
               "TRITON_CACHE_DIR": os.path.join(ext, "triton"),
               "TORCHINDUCTOR_CACHE_DIR": os.path.join(ext, "inductor")}
        config = None
        if self.sandbox:
            config = {"library": os.path.realpath(_lib.path) if os.path.exists(_lib.path) else _lib.path,
                      "write": ext, "gpu": self.device != "cpu", "when": self.sandbox}
        return WorkerProcess(env, config)

    def _load(self, source, class_name):
        w = self._worker(source)
        reply, _ = w.request({"op": "load", "source": source, "class_name": class_name,
                              "device": self.device, "layouts": self.layouts,
                              "init_inputs": self.init_inputs, "values": self.values,
                              "state_names": self.state_names, "cache_dir": self.cache_dir},
                             self.timeout_s)
        return w, reply

    def _golden(self, case, seed, lifted):
        inputs = make_inputs(self.layouts[case], seed, self.device)
        want = self.ref(case, inputs, lifted=lifted)
        return want, digest(list(inputs.values()))

    def _check(self, w, case, seed, lifted, where):
        reply, payload = w.request({"op": "fetch", "seed": seed}, self.call_timeout_s)
        if not reply["ok"]:
            return f"{where}: {reply['error']}"
        want, want_digest = self._golden(case, seed, lifted)
        if reply["input_digest"] != want_digest:
            return f"{where}: the inputs changed (the candidate wrote them, or made other inputs)"
        got_meta = reply["outputs"]
        if len(got_meta) != len(want):
            return f"{where}: {len(got_meta)} outputs, the reference has {len(want)}"
        off = 0
        for k, (m, ref) in enumerate(zip(got_meta, want)):
            if "shape" not in m:
                return f"{where}: output {k} is a {m['type']}, not a tensor"
            raw = payload[off:off + m["nbytes"]]
            off += m["nbytes"]
            if tuple(m["shape"]) != tuple(ref.shape):
                return f"{where}: output {k} has shape {tuple(m['shape'])}, the reference {tuple(ref.shape)}"
            dt = getattr(torch, m["dtype"], None)
            got = (torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dt).reshape(m["shape"])
                   if raw else torch.empty(m["shape"], dtype=dt))
            ref = ref.detach().to("cpu")
            if ref.is_floating_point():
                ok = torch.allclose(got.to(ref.dtype), ref, atol=self.imp.atol, rtol=self.imp.rtol)
            else:
                ok = torch.equal(got.to(ref.dtype), ref)
            if not ok:
                diff = (got.double() - ref.double()).abs()
                return (f"{where}: output {k} differs from the reference (max abs diff "
                        f"{diff.max().item():.4g}, atol={self.imp.atol}, rtol={self.imp.rtol})")
        return None

    def _batch(self, w, case, seeds):
        r, _ = w.request({"op": "prepare", "case": case, "seeds": seeds}, self.call_timeout_s * len(seeds))
        if not r["ok"]:
            raise _failure(r)
        t0 = time.perf_counter()
        r, _ = w.request({"op": "go", "case": case}, self.call_timeout_s * len(seeds))
        wall = time.perf_counter() - t0
        if not r["ok"]:
            raise _failure(r)
        return wall * 1e6 / len(seeds), r["event_us"]

    def evaluate(self, source, seed=None, verify_seeds=2, batches=5, calls=8, checks=2,
                 baseline=True, class_name="ModelNew"):
        rng = random.Random(seed)
        res = {"verdict": None, "cases": [], "notes": []}
        w = None
        try:
            w, loaded = self._load(source, class_name)
            if not loaded["ok"]:
                if loaded.get("denied"):
                    res.update(verdict="denied", feedback=f"refused by the sandbox: {loaded['error']}")
                else:
                    res.update(verdict="error" if loaded.get("sandbox_failed") else "compile_error",
                               feedback=loaded["error"])
                return res
            res["compile_seconds"], res["compile_cached"] = loaded["compile_seconds"], loaded["cached"]
            self._sandbox_notes(loaded["sandbox"], res)
            lifted = {}
            for case, (name, _, _) in enumerate(self.imp.cases):
                b, _ = w.request({"op": "build", "case": case}, self.timeout_s)
                if not b["ok"]:
                    res.update(verdict="denied" if b.get("denied") else "error",
                               feedback=("refused by the sandbox: " if b.get("denied") else "") +
                               f"case {name}: ModelNew(...): {b['error']}")
                    return res
                lifted[case] = b["lifted"]
                seeds = [rng.getrandbits(62) for _ in range(verify_seeds)]
                self._batch(w, case, seeds)
                for s in seeds:
                    why = self._check(w, case, s, lifted[case], f"case {name}")
                    if why:
                        res.update(verdict="wrong", feedback=why)
                        return res
                res["cases"].append({"name": name, "passed": True, "weights": "lifted" if lifted[case] else "seeded"})
            # every case ran once (Triton compiled per shape): no exec from here
            self._seal(w, res)
            if not all(lifted.values()):
                res["notes"].append("ModelNew's parameter names differ from Model's: weights are "
                                    "seeded as KernelBench does (same seed for both), not fresh per call")
            wall, events = [], []
            for i in range(batches):
                seeds = [rng.getrandbits(62) for _ in range(calls)]
                per_call, ev = self._batch(w, 0, seeds)
                wall.append(per_call)
                events += ev
                for s in rng.sample(seeds, min(checks, calls)):  # drawn after the batch ran
                    why = self._check(w, 0, s, lifted[0], f"timed call (batch {i})")
                    if why:
                        res.update(verdict="wrong", feedback=why)
                        return res
                w.request({"op": "drop"}, self.call_timeout_s)
            res["time_us"] = sorted(wall)[len(wall) // 2]
            res["event_us"] = sorted(events)[len(events) // 2]
            # the worker's events cannot exceed the caller's clock (plus a little
            # slack for the clock's own start/stop around the batch)
            res["timing_mismatch"] = sum(events) > 1.05 * sum(wall) * calls + 1000.0
            if self.device != "cpu":
                self._attribute(w, source, rng, res)
            else:
                res["torch_fallback"] = None
                res["notes"].append("no kernel attribution without CUDA")
            res["verdict"] = "pass"
            if baseline:
                res["baseline_us"] = self.baseline_us(batches, calls)
                res["speedup"] = res["baseline_us"] / res["time_us"] if res["time_us"] > 0 else None
        except WorkerTimeout as e:
            res.update(verdict="timeout", feedback=str(e))
        except WorkerDied as e:
            res.update(verdict="crash", feedback=str(e))
        except CandidateDenied as e:
            res.update(verdict="denied", feedback=f"refused by the sandbox: {e}")
        except RuntimeError as e:
            res.update(verdict="error", feedback=str(e))
        finally:
            if w:
                w.close()
            res["reward"] = reward_of(res)
        return res

    def _seal(self, w, res=None):
        s, _ = w.request({"op": "seal"}, self.call_timeout_s)
        if not s["ok"]:
            raise RuntimeError(s["error"])
        if res is not None:
            res["sandbox"] = s["sandbox"]  # now with exec refused

    def _sandbox_notes(self, status, res):
        res["sandbox"] = status
        if not status.get("applied"):
            res["notes"].append(f"no sandbox: {status.get('why', 'not applied')}")
            return
        res["notes"] += [f"sandbox: {m}" for m in missing(status)]
        if status.get("landlock") and status.get("landlock_why"):
            res["notes"].append(f"sandbox: Landlock {status['landlock_why']}")

    def _attribute(self, w, source, rng, res):
        a, _ = w.request({"op": "attribute", "case": 0, "seed": rng.getrandbits(62)}, self.timeout_s)
        if a.get("denied"):
            raise CandidateDenied(a["error"])
        if not a["ok"]:
            res["notes"].append(f"attribution failed: {a['error']}")
            res["torch_fallback"] = None
            return
        mine, other = attribute(a["kernels"], custom_kernel_names(source))
        res["kernels"] = {"custom": mine, "library": other}
        res["torch_fallback"] = not mine

    def baseline_us(self, batches=5, calls=8):
        """The reference Model timed in a worker of its own, the same way."""
        if self._baseline is None:
            with open(self.imp.path) as f:
                src = f.read()
            w, loaded = self._load(src, "Model")
            try:
                if not loaded["ok"]:
                    raise RuntimeError(f"the reference does not load in a worker: {loaded['error']}")
                b, _ = w.request({"op": "build", "case": 0}, self.timeout_s)
                if not b["ok"]:
                    raise RuntimeError(f"the reference does not build in a worker: {b['error']}")
                self._seal(w)
                rng = random.Random(1)
                wall = [self._batch(w, 0, [rng.getrandbits(62) for _ in range(calls)])[0]
                        for _ in range(batches)]
                self._baseline = sorted(wall)[len(wall) // 2]
            finally:
                w.close()
        return self._baseline


def evaluate_modelnew(imported, source, device="cuda", **kw):
    """One ModelNew source on one imported problem: a result dict (verdict,
    feedback, cases, time_us, baseline_us, speedup, compile_seconds,
    torch_fallback, kernels, reward)."""
    return Runner(imported, device).evaluate(source, **kw)
