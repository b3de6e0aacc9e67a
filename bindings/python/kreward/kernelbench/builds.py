"""The compile stage: a pool of CPU workers that build ModelNew candidates'
load_inline extensions ahead of their GPU turn (build_stage.py builds one).

Why: a CUDA candidate's load_inline build took 45-64 s in its GPU worker's
load on the H200's host (the GPU idle, every other candidate waiting);
the build needs no GPU. The scheduler (scheduler.py) hands every source to
submit() as soon as it is submitted (the rail's submit, before its kind's
GPU turn), builds run side by side on the host's CPUs and beside the GPU
turns, and a lane waits for a candidate's build only if it is not done
when the candidate's turn comes (wait(); a build still queued then moves
to the front).

- Only sources that build (build_env.needs_build: load_inline or
  cpp_extension's load in the text) are staged; the others, and every
  source when no architecture is known, go to their GPU turn as before.
- One build per source: outcomes are kept by the source's hash (the name
  of its build folder), the `keep` most recent of them; the same source
  again is answered from its outcome.
- verdict(): a failed build (the compiler's log as feedback) and a build
  past timeout_s are the candidate's verdicts, compile_error and timeout,
  without a GPU turn; any other outcome leaves it to the GPU turn.
- The precompiled torch/extension.h (pch.py) is made once, in a thread of
  its own, under <cache_dir>/pch: builds that start before it is there
  go without (same flags, same build.ninja: nothing is rebuilt later)."""
import collections
import hashlib
import os
import threading
import time

from . import folders, pch
from .build_env import needs_build

KEEP = 4096   # outcomes kept (a few hundred bytes each, plus a failed build's log)


class _Build:
    __slots__ = ("key", "source", "state", "outcome", "done", "queued_at", "started", "ended")

    def __init__(self, key, source):
        self.key, self.source = key, source
        self.state = "queued"      # queued -> running -> done
        self.outcome = None
        self.done = threading.Event()
        self.queued_at, self.started, self.ended = time.monotonic(), None, None


def source_key(source):
    """The source's hash as its build folder is named (folders.py)."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


class BuildPool:
    def __init__(self, cache_dir, arch, workers=None, timeout_s=600.0, sandbox=True, use_pch=True,
                 keep=KEEP, build=None, pch_root=None):
        """cache_dir: the Runners' (the build folders, and pch/ beside
        them); arch: TORCH_CUDA_ARCH_LIST for every build, the GPU lanes'
        (build_env.arch_list), or None: then nothing is staged; workers:
        builds at once (default: the host's CPUs); timeout_s: one build's
        limit, its worker's start included; sandbox: False only to debug
        (the GPU workers' own sandbox=None); use_pch: make and use the
        precompiled header (under pch_root, default <cache_dir>/pch); build:
        one build's function (build_stage.build; tests give fakes)."""
        self.cache_dir, self.arch = cache_dir, arch
        self.workers = max(1, int(workers or os.cpu_count() or 1))
        self.timeout_s, self.sandbox, self.keep = float(timeout_s), bool(sandbox), int(keep)
        if not self.sandbox:  # candidates' imports unsandboxed in cache_dir (folders.unsandboxed)
            folders.mark_unsandboxed(cache_dir)
        if build is None:
            from .build_stage import build  # (torch and the worker's side: not for a fake's tests)
        self._build = build
        self.pch_root = (pch_root or os.path.join(cache_dir, "pch")) if use_pch else None
        # where the header will be: builds use it once it exists (build_env)
        self.pch_dir = pch.folder(self.pch_root) if use_pch else None
        self.pch_error = None
        self._cond = threading.Condition()
        self._builds = collections.OrderedDict()   # key -> _Build, the most recent last
        self._queue = collections.deque()          # keys not started, next first
        self._running = {}                         # key -> its WorkerProcess, while it runs
        self._threads = []
        self._closed = False
        self.counters = collections.Counter()
        self._pch_thread = None
        if self.pch_dir is not None and arch is not None:
            self._pch_thread = threading.Thread(target=self._make_pch, daemon=True,
                                                name="kreward-build-pch")
            self._pch_thread.start()

    # ---- the precompiled header
    def _make_pch(self):
        try:
            pch.sweep(self.pch_root)
            pch.make(self.pch_root, timeout_s=max(self.timeout_s, 900.0))
        except Exception as e:  # noqa: BLE001 - builds go on without it
            self.pch_error = f"{type(e).__name__}: {e}"[:2000]

    # ---- submitting and waiting
    def submit(self, source):
        """Queues source's build (at once, in order) unless it needs none or
        one is known; its key, or None when it is not staged."""
        if self.arch is None or not needs_build(source):
            return None
        key = source_key(source)
        with self._cond:
            if self._closed:
                return None
            b = self._builds.get(key)
            if b is not None:
                self._builds.move_to_end(key)
                self.counters["reused"] += 1
                return key
            self._builds[key] = _Build(key, source)
            self._queue.append(key)
            self.counters["submitted"] += 1
            self._trim()
            self._start_threads()
            self._cond.notify_all()
        return key

    def wait(self, source, timeout=None):
        """The outcome of source's build (build_stage.build's dict, with
        waited_s: how long this call waited), submitting it if it was not;
        a build still queued goes to the front (a GPU turn waits for it).
        None when the source is not staged; state "closed" when the pool
        closed first; TimeoutError past timeout."""
        if self.arch is None or not needs_build(source):
            return None
        key = source_key(source)
        with self._cond:
            b = self._builds.get(key)
        if b is None and self.submit(source) is None:
            return {"state": "closed", "error": "the compile stage was closed", "waited_s": 0.0}
        t0 = time.monotonic()
        with self._cond:
            # (just queued if it was not known: _trim forgets finished ones only)
            b = self._builds.get(key, b)
            if b.state == "queued" and self._queue and self._queue[0] != key:
                self._queue.remove(key)
                self._queue.appendleft(key)
                self.counters["moved_ahead"] += 1
        if not b.done.wait(timeout):
            raise TimeoutError(f"the build of {key} is not done after {timeout} s")
        return dict(b.outcome, waited_s=round(time.monotonic() - t0, 3))

    def outcome(self, source):
        """The outcome if the build is done, else None (never waits)."""
        with self._cond:
            b = self._builds.get(source_key(source))
        return dict(b.outcome) if b is not None and b.done.is_set() else None

    def timeline(self):
        """[(key, started, ended)] of the builds run, monotonic seconds
        (tests and benches read how they overlapped)."""
        with self._cond:
            return [(b.key, b.started, b.ended) for b in self._builds.values() if b.started]

    def status(self):
        with self._cond:
            states = collections.Counter(b.state for b in self._builds.values())
            return {"workers": self.workers, "arch": self.arch, "queued": states["queued"],
                    "running": states["running"], "kept": len(self._builds),
                    "pch": self.pch_dir if pch.ready(self.pch_root or "") else None,
                    "pch_error": self.pch_error, **dict(self.counters)}

    # ---- the workers
    def _start_threads(self):
        """One thread per build at once, up to `workers` (lock held)."""
        while len(self._threads) < min(self.workers, len(self._queue) + len(self._running)):
            t = threading.Thread(target=self._loop, daemon=True,
                                 name=f"kreward-build-{len(self._threads)}")
            self._threads.append(t)
            t.start()

    def _loop(self):
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                b = self._builds[self._queue.popleft()]
                b.state, b.started = "running", time.monotonic()
                self._running[b.key] = None
            try:
                out = self._build(b.source, self.cache_dir, self.arch, self.pch_dir, self.timeout_s,
                                  self.sandbox, on_start=lambda w, k=b.key: self._started(k, w))
            except Exception as e:  # noqa: BLE001 - the stage's own failure: the GPU turn decides
                out = {"state": "error", "error": f"the compile stage failed: {type(e).__name__}: {e}"}
            with self._cond:
                self._running.pop(b.key, None)
                if self._closed:
                    out = {"state": "closed", "error": "the compile stage was closed"}
                b.outcome, b.state, b.ended = out, "done", time.monotonic()
                self.counters[out["state"]] += 1
                b.done.set()
                self._cond.notify_all()

    def _started(self, key, worker):
        """A build's worker is up: close() can end it."""
        with self._cond:
            closed = self._closed
            if not closed:
                self._running[key] = worker
        if closed:
            worker.end()

    def _trim(self):
        """Forgets the oldest finished outcomes past `keep` (lock held)."""
        extra = len(self._builds) - self.keep
        for key in [k for k, b in self._builds.items() if b.done.is_set()][:max(0, extra)]:
            del self._builds[key]

    def close(self):
        """Ends running builds (their whole process trees) and answers
        every build not done with state "closed" (never a verdict)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            running = [w for w in self._running.values() if w is not None]
            queued = [self._builds[k] for k in self._queue]
            self._queue.clear()
            for b in queued:
                b.outcome, b.state = {"state": "closed", "error": "the compile stage was closed"}, "done"
                b.done.set()
            self._cond.notify_all()
        for w in running:
            w.end()
        for t in self._threads:
            t.join(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def verdict(outcome):
    """The candidate's result when its build settles it (a failed build:
    compile_error with the compiler's log; past its time: timeout), else
    None (the GPU turn decides)."""
    if not outcome or outcome.get("state") not in ("compile_error", "timeout"):
        return None
    from .report import reward_of
    v = "compile_error" if outcome["state"] == "compile_error" else "timeout"
    res = {"verdict": v, "feedback": outcome.get("error") or v, "cases": [],
           "notes": ["settled by the compile stage (a CPU worker, before any GPU turn)"],
           "build": summary(outcome)}
    if isinstance(outcome.get("seconds"), (int, float)):
        res["build_seconds"] = outcome["seconds"]
    res["reward"] = reward_of(res)
    return res


def summary(outcome):
    """What a result keeps of its build's outcome (the log stays in the
    feedback of a failed one)."""
    keep = ("state", "seconds", "compile_seconds", "waited_s", "arch", "pch")
    out = {k: outcome.get(k) for k in keep if outcome.get(k) is not None}
    if outcome.get("error") and outcome.get("state") != "compile_error":
        out["error"] = str(outcome["error"]).splitlines()[0][:400] if outcome["error"] else None
    return out


def note(result, outcome):
    """A GPU turn's result with its build's outcome: `build`, the metrics
    build_seconds and build_wait_s, and a note where the stage could not
    settle the build (the GPU worker then built it, or failed to)."""
    if not isinstance(result, dict) or not outcome:
        return result
    result["build"] = summary(outcome)
    if isinstance(outcome.get("seconds"), (int, float)):
        result["build_seconds"] = outcome["seconds"]
    if isinstance(outcome.get("waited_s"), (int, float)):
        result["build_wait_s"] = outcome["waited_s"]
    if outcome.get("state") != "built":
        first = str(outcome.get("error") or "").splitlines()[:1]
        result.setdefault("notes", []).append(
            f"the compile stage did not settle the build ({outcome.get('state')}"
            f"{': ' + first[0][:300] if first else ''}): its GPU worker's load decided")
    return result
