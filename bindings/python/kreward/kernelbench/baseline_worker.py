"""The reference's worker of a Runner (Processes' mixin): started beside
the first candidate (load, build, seal, two calibration batches), waited
for before any timed batch, its facts (launch time, per-call time) kept
for the next evaluation and forgotten, with the baseline memo, whenever it
ends or is replaced."""
import random

from .worker_process import WorkerDied, WorkerProtocolError, WorkerTimeout, optional_number


class BaselineWorker:
    """Processes' baseline: self.baseline (its worker), baseline_facts,
    baseline_memo (baseline_memo.BaselineMemo or None)."""

    # ---- the baseline's worker
    def start_baseline(self):
        """The reference's worker, started (its requests sent, the replies
        read by baseline_ready): it loads Model, builds and seals, and
        times two small batches for a first estimate of a call."""
        if self.baseline is not None and self.baseline.alive():
            return
        if self.baseline is not None:
            self.baseline.end()
        self._baseline_gone()  # (a worker that died: its replacement starts without its times)
        self.baseline = w = self._spawn(self._ref_source)
        self.baseline_facts = {"ready": False}
        try:
            self._send_load(w, self._ref_source, "Model")
            w.send({"op": "build", "case": 0, "compile": self.compile_baseline})
            w.send({"op": "seal"})
            rng = random.Random(0)
            for _ in range(2):
                w.send({"op": "prepare", "case": 0, "seeds": [rng.getrandbits(62) for _ in range(2)]})
                w.send({"op": "go", "case": 0})
                w.send({"op": "times"})
                w.send({"op": "drop"})
        except WorkerDied as e:
            self.baseline_facts["failed"] = str(e)  # said by baseline_ready

    def baseline_ready(self):
        """Waits for the baseline worker's start (before any timed batch:
        its start must not compete with the candidate's); None, or why it
        cannot time the baseline."""
        if self.baseline_facts.get("ready"):
            return None
        w = self.baseline
        failed = self.baseline_facts.get("failed")
        if failed:
            self.end_baseline()
            return f"the reference's worker did not start: {failed}"
        try:
            replies = [w.receive(self.timeout_s)[0] for _ in range(w.pending)]
        except (WorkerDied, WorkerTimeout, WorkerProtocolError) as e:
            # the reference's worker: never the candidate's outcome
            self.end_baseline()
            return str(e)
        failed = [r for r in replies if not r["ok"]]
        if failed:
            self.end_baseline()
            return f"the reference does not run in a worker: {failed[0]['error']}"
        build, seal, calibration = replies[2], replies[3], replies[-2]
        self.baseline_facts = {"ready": True, "lifted": build["lifted"], "gpu_paths": seal["gpu_paths"],
                               "launch_us": replies[0].get("launch_us"),
                               "per_call_us": calibration["event_us"] / 2,
                               "compile_seconds": optional_number(build.get("compile_seconds")),
                               "graphs": optional_number(build.get("graphs"))}
        return None

    def note_baseline(self, **facts):
        """What an evaluation measured of the baseline's worker, kept with it
        for the next: its launch time with the candidate gone (launch_us),
        its last per-call time (per_call_us: the next batches' size)."""
        self.baseline_facts.update(facts)

    def end_baseline(self):
        if self.baseline is not None:
            self.baseline.end()
        self.baseline = None
        self._baseline_gone()

    def _baseline_gone(self):
        """What was known of the baseline worker forgotten: its facts and
        its memo."""
        self.baseline_facts = {}
        if self.baseline_memo is not None:
            self.baseline_memo.clear()
