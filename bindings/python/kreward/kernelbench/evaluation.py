"""One ModelNew evaluation, phase by phase, and the result dict it returns
(docs/kernelbench.md lists its fields):
start_and_load (processes.py: the candidate's worker, the baseline's
beside it), verify (verification.py: every case), seal, baseline_ready,
timed (timing.py: a warmup batch, then the timed batches with their checks),
attribute (the profiler's kernels: scoring.py says what they mean),
end_candidate (its whole process tree ended before the baseline runs),
baseline_timed (the reference on the candidate's schedule, or its first
batches and the baseline memo's: baseline_memo.py); the verdict
from whatever ended it, and the reward. An Evaluation composes the
components it is given; it owns no worker."""
import random
import time

from . import folders, triton_launchers
from .baseline_memo import MemoUse
from .confine import missing
from .gate import NO_GATE
from .report import reward_of
from .scoring import (LAUNCH_BOUND, MOSTLY_TORCH_SHARE, attribute, custom_kernel_names, custom_share,
                      kernel_share, launch_luck, luck_note)
from .timing import median
from .verification import check_baseline_paths
from .worker_process import CandidateDenied, CandidateFailed, WorkerDied, WorkerTimeout, _failure


# the traced call's GPU busy time past which it is not the timed call: 2x
# a timed call's wall (which covers its kernels and its launches) and some
# slack for a lone call's clocks and caches
INFLATED_BUSY, INFLATED_SLACK_US = 2.0, 50.0


def attribute_kernels(w, source, rng, res, timeout_s):
    """The profiled call's kernels (w's attribute reply) split into the
    candidate's own (named in its source) and the rest, and what that
    says: torch_fallback, custom_share and mostly_torch, kernel_share, with
    their notes, in res."""
    a, _ = w.request({"op": "attribute", "case": 0, "seed": rng.getrandbits(62)}, timeout_s)
    if not a["ok"] and a.get("denied"):  # only a failed reply carries an error
        raise CandidateDenied(a["error"])
    if not a["ok"]:
        res["notes"].append(f"attribution failed: {a['error']}")
        res["torch_fallback"] = None
        return
    res["attribution_via"] = a.get("tracer")
    if a.get("tracer_why"):
        res["notes"].append(f"attribution by torch.profiler: CUPTI not used ({a['tracer_why']})")
    busy, timed = a.get("busy_us"), res.get("time_us")
    if isinstance(busy, (int, float)) and timed and busy > INFLATED_BUSY * timed + INFLATED_SLACK_US:
        # the traced call kept the GPU busier than a whole timed call took:
        # it did work the timed calls did not (a candidate that knows it is
        # traced can launch its own kernel over and over to look like the
        # work); its shares say nothing then
        res["notes"].append(
            f"attribution refused: the traced call kept the GPU busy {busy:.1f} us, a timed call "
            f"took {timed:.1f} us (more than {INFLATED_BUSY:g}x): not the call that was timed")
        res["torch_fallback"] = None
        res["attribution_busy_us"] = round(busy, 3)
        return
    mine, other = attribute(a["kernels"], custom_kernel_names(source), source)
    res["kernels"] = {"custom": mine, "library": other}
    res["torch_fallback"] = not mine
    own = res["custom_share"] = custom_share(mine, other)
    res["mostly_torch"] = bool(mine) and own is not None and own < MOSTLY_TORCH_SHARE
    if res["mostly_torch"]:
        res["notes"].append(
            f"mostly torch: its own kernels take {own:.0%} of its GPU time, torch's or a "
            f"library's the rest: speed credit in proportion, full from {MOSTLY_TORCH_SHARE:.0%}")
    share = kernel_share(a["kernels"], res.get("time_us"))
    res["kernel_share"] = share
    if share is not None and share < LAUNCH_BOUND:
        res["notes"].append(
            f"launch-bound: its kernels take {share:.0%} of a call, the rest is the host's "
            "(Python, launches), so its time follows the host CPU and its speedup is noisy "
            "(docs/kernelbench.md)")


def _idle_or_error(gated, what):
    """In flight: an exclusive phase whose GPU did not look idle (the
    probe's note: work a frozen process had queued, or another's kernel
    still running) times nothing that can be credited; a slowed baseline
    would inflate the speedup. The environment's failure (error: not
    judged, tried again on another lane), never a number."""
    if gated.get("probe"):
        raise RuntimeError(f"the GPU was not idle for {what} ({gated['probe']}): "
                           "not timed, so not judged")


def sandbox_notes(status, res):
    """The worker's sandbox status in res, and a note for each layer missing."""
    res["sandbox"] = status
    if not status.get("applied"):
        res["notes"].append(f"no sandbox: {status.get('why', 'not applied')}")
        return
    res["notes"] += [f"sandbox: {m}" for m in missing(status)]
    if status.get("landlock") and status.get("landlock_why"):
        res["notes"].append(f"sandbox: Landlock {status['landlock_why']}")


class Evaluation:
    """Runs candidates through the phases with the components given.

    processes: a processes.Processes (the workers); timing: a
    timing.Timing; verification: a verification.Verification; device: the
    workers' device (no kernel attribution on the CPU); staged: whether
    results say each side's staging; baseline_kind: "eager" or
    "torch.compile", as results say; expected_paths: this process's GPU
    paths (inputs.gpu_paths; None on the CPU), which the baseline's worker
    must not be slower than; timeout_s: an attribution's limit;
    call_timeout_s: any other request's; eval_timeout_s: the most the
    candidate's worker may take over one evaluation; gate: the lane's GPU
    gate with several candidates in flight (gate.py: the seal a shared
    step, timed through baseline_timed its exclusive phase), NO_GATE
    without."""

    def __init__(self, *, processes, timing, verification, device, staged, baseline_kind, expected_paths,
                 timeout_s, call_timeout_s, eval_timeout_s, gate=NO_GATE):
        self.processes, self.timing, self.verification = processes, timing, verification
        self.device, self.staged, self.baseline_kind = device, staged, baseline_kind
        self.expected_paths = expected_paths
        self.timeout_s, self.call_timeout_s, self.eval_timeout_s = timeout_s, call_timeout_s, eval_timeout_s
        self.gate = gate

    def run(self, source, seed, verify_seeds, batches, calls, checks, baseline, class_name,
            next_source=None, baseline_memo=True):
        """One candidate (Runner.evaluate says what the arguments mean): the
        result dict. Never raises for anything the candidate did."""
        # the inputs' seeds: from the OS unless the caller asked for
        # reproducible ones (seed=: tests and debugging; a candidate that
        # recovered the generator from the seeds it saw could compute the
        # next batches' outputs ahead, outside the clock)
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        res = {"verdict": None, "cases": [], "notes": [], "phases_s": {}}
        limit = (time.monotonic() + self.eval_timeout_s,
                 f"the evaluation ran past its limit of {self.eval_timeout_s:g} s "
                 "(eval_timeout_s): the candidate's requests together took too long")
        # where an evaluation's wall time goes (seconds per phase, in order):
        # what to look at when a candidate takes long
        last = [time.perf_counter()]

        def phase(name):
            now = time.perf_counter()
            res["phases_s"][name] = round(now - last[0], 4)
            last[0] = now

        w = None
        try:
            if baseline:
                self.processes.start_baseline()  # side by side with the candidate's worker
            # in flight the next candidate's spare starts as soon as this
            # one has taken its worker: its start (~1.3 s of a fresh
            # worker's ready, slowed by the lane's freezes) then has this
            # candidate's wait, load and evaluation to run in; started after
            # the load it still had ~1 s to go at its turn (issue 31's batch
            # on an H200). With one candidate at a time (no freezes) it
            # starts after the load: its ready would otherwise run beside
            # the candidate's launch-time probe, which nothing else runs
            # beside there (spare_ahead="after_load" so in flight too)
            # (a source named next that is this one: after the load, once
            # this one's folder exists, which its spare must start in)
            early = (self.processes.starts_ahead and self.gate.freezes and
                     self.processes.spare_ahead != "after_load" and next_source != source)
            spare_s = [0.0]

            def start_next_spare():
                t0 = time.perf_counter()
                self._start_spare(next_source, res)
                spare_s[0] = time.perf_counter() - t0

            w, loaded = self.processes.start_candidate(source, class_name, limit,
                                                       on_taken=start_next_spare if early else None)
            phase("start_and_load")
            if early:
                # (its start's own time shown apart, as where it came after the load)
                res["phases_s"]["start_and_load"] = round(res["phases_s"]["start_and_load"] - spare_s[0], 4)
                res["phases_s"]["start_spare"] = round(spare_s[0], 4)
            if not self._loaded(loaded, res):
                return res
            if self.processes.starts_ahead and not early:
                self._start_spare(next_source, res)
                phase("start_spare")
            # (a shared step: the copy's CPU work never beside another
            # slot's timed phase)
            with self.gate.shared(w, candidate=False):
                self.processes.plant_late(w, source)
            self.timing.clocks_reset(w)
            lifted = self.verification.verify(w, rng, verify_seeds, res)
            res["ops_s"] = {"verify": self.timing.clocks_read(w)}  # where verify's time went
            phase("verify")
            if lifted is None:
                return res
            # every case ran once (Triton compiled per shape): no exec from here
            with self.gate.shared(w):
                self._seal(w, res)
            if not all(lifted.values()):
                res["notes"].append("ModelNew's parameter names differ from Model's: weights are "
                                    "seeded as KernelBench does (same seed for both), not fresh per call")
            why_no_baseline = self.processes.baseline_ready() if baseline else "not asked for"
            phase("baseline_ready")
            base_us = self.processes.baseline_facts.get("per_call_us") if not why_no_baseline else None
            if self.processes.starts_ahead and not self.gate.freezes:
                # (in flight the gate freezes a spare still starting with the
                # lane's other workers, and waits until it is seen stopped:
                # its ready goes on beside the shared steps, the next
                # candidate waits for it at its start)
                self._spare_ready(w, res)
                phase("spare_ready")
            # in flight (gate.py): alone on the GPU for the candidate's timed
            # batches, and again for the baseline's
            gated = self.gate.enter_exclusive(keep=(w, self.processes.baseline))
            if gated is not None:
                res["gate"] = gated
                phase("gate")
                _idle_or_error(gated, "its timed batches")
                if gated.get("not_stopped"):
                    res["notes"].append(f"{gated['not_stopped']} process(es) of the lane's other workers "
                                        "were not seen stopped when its timed batches began")
            schedule = self._time_candidate(w, rng, lifted, base_us, batches, calls, checks, res)
            if schedule is None:
                return res
            phase("timed")
            if gated is not None:
                # in flight: the lane's exclusive phase is for timing; the
                # attribution (a profiler's start: seconds on a GPU) and
                # the candidate's end are a shared step beside the others'
                # (its kernels' times may then include their contention:
                # the shares it reports are ratios of one call's kernels)
                self.gate.leave_exclusive()
            with self.gate.shared(w):
                if self.device != "cpu":
                    attribute_kernels(w, source, rng, res, self.timeout_s)
                else:
                    res["torch_fallback"] = None
                    res["notes"].append("no kernel attribution without CUDA")
                phase("attribute")
                res["verdict"] = "pass"
                # nothing of the candidate may run while the baseline is
                # timed (its context's teardown is GPU work: inside the step)
                ended, w = w.end(), None
                phase("end_candidate")
            if not ended["clean"]:
                res.update(verdict="error", feedback="the candidate's processes could not all be "
                           f"ended: {ended.get('why')}")
                return res
            if ended["strays"]:
                res["notes"].append(f"the candidate left {ended['strays']} process(es) running; "
                                    "they were ended before the baseline was timed")
            if why_no_baseline is None:
                if gated is not None:  # alone on the GPU again, for the baseline
                    # (its own spare may still be starting: frozen with the
                    # others, the freeze waiting until it is seen stopped,
                    # out of any driver call: freezer.SETTLE_S; waiting for
                    # its whole ready here cost 0.97 s a candidate, H100,
                    # f3146c5)
                    res["gate_baseline"] = self.gate.enter_exclusive(keep=(self.processes.baseline,))
                    phase("gate_baseline")
                    _idle_or_error(res["gate_baseline"], "its baseline's timing")
                warm, n = schedule
                # (the candidate's processes were all ended, but one that
                # left some running gives the memo nothing: see share)
                # (a process the freeze could not see stopped ran beside
                # it: its samples stay out of the memo, as a stray's do)
                disturbed = bool(ended["strays"]) or bool((res.get("gate_baseline") or {}).get("not_stopped"))
                self._time_baseline(res, warm, batches, n, checks, rng, lifted[0],
                                    disturbed=disturbed, use_memo=baseline_memo)
                phase("baseline_timed")
                self._launch_luck(res)
            elif baseline:
                res["notes"].append(f"no baseline: {why_no_baseline}")
        except WorkerTimeout as e:
            res.update(verdict="timeout", feedback=str(e))
        except WorkerDied as e:
            res.update(verdict="crash", feedback=str(e))
        except CandidateDenied as e:
            res.update(verdict="denied", feedback=f"refused by the sandbox: {e}")
        except CandidateFailed as e:  # its own code's outcome: judged
            res.update(verdict="crash", feedback=str(e))
        except RuntimeError as e:
            res.update(verdict="error", feedback=str(e))
        except Exception as e:  # noqa: BLE001 - a reply the checks let through, read wrongly here
            # never out of evaluate: a trainer would lose the sample, or its loop
            res.update(verdict="error", feedback=f"the evaluation failed: {type(e).__name__}: {e}")
        finally:
            if w:
                w.end()
            self.gate.leave_exclusive()  # (the spare below starts beside the next one's timing)
            res["reward"] = reward_of(res)
            try:
                self.processes.start_spare(next_source)
            except (OSError, WorkerDied) as e:  # no process now: the next evaluation starts its own
                res["notes"].append(f"no spare worker: {e}")
        return res

    def _start_spare(self, next_source, res):
        """The next candidate's worker, started while this one runs (its
        verify: nothing timed): its torch, CUDA and libraries come up
        beside this candidate instead of in the next one's start_and_load.
        A spare that cannot start is noted; the candidate goes on."""
        try:
            self.processes.start_spare(next_source, ahead=True)
        except Exception as e:  # noqa: BLE001 - the spare is the harness's: never this candidate's outcome
            res["notes"].append(f"no spare worker: {type(e).__name__}: {e}"[:500])

    def _spare_ready(self, w, res):
        """The spare's start over before the first timed batch (no timed
        phase runs beside a starting worker). The wait is the harness's:
        the candidate's own limit (eval_timeout_s) moves by as much."""
        t0 = time.monotonic()
        why = self.processes.spare_ready()
        if w.deadline is not None:
            w.deadline += time.monotonic() - t0
        if why:
            res["notes"].append(f"no spare worker: it did not start ({why}); the next candidate's "
                                "worker starts at its turn")

    def _loaded(self, loaded, res):
        """The start_and_load phase's results and notes in res; False (with
        the verdict) when the candidate did not load."""
        # the candidate's worker was the spare (torch and CUDA up before
        # it was asked for): start_and_load is then mostly the load
        res["started_ahead"] = loaded["started_ahead"]
        if not loaded["started_ahead"]:
            res["started_cold_why"] = loaded.get("started_cold_why")
        res["ready_wait_s"] = loaded.get("ready_wait_s")
        # forked from the Runner's zygote (torch imported there) or exec'd
        res["worker_start"] = loaded.get("worker_start")
        # what its ready paid for the libraries' first use (cuBLAS, cuDNN,
        # Triton), before any candidate code: before, the candidate's verify did
        res["worker_warm_s"] = loaded.get("warm_s")
        if self.processes.sandbox == "start" and self.processes.device != "cpu" and \
                folders.unsandboxed(self.processes.cache_dir):
            res["notes"].append("workers outside the \"start\" sandbox have run on this cache_dir "
                                f"({self.processes.cache_dir}): no worker loads the library's Triton kernels "
                                "from it before its isolation filter (each candidate's verify compiles or "
                                "loads them); a cache_dir of its own for \"start\" Runners brings that back")
        if loaded.get("warm_steps_s"):
            res["worker_warm_steps_s"] = loaded["warm_steps_s"]
        if loaded.get("worker_start_s"):
            res["worker_start_s"] = loaded["worker_start_s"]
        if self.processes.fresh_failed:
            res["notes"].append(f"a worker in a fresh folder did not start ({self.processes.fresh_failed}): "
                                "candidates without a spare start in their own folders (their verify "
                                "compiles the library's Triton kernels)")
        if loaded.get("spare_failed"):
            res["notes"].append(f"the spare worker did not start ({loaded['spare_failed']}): this "
                                "candidate's worker was started at its turn")
        res["launch_us"] = {"candidate": loaded.get("launch_us")}
        if loaded["launch_overlapped"]:
            res["launch_us"]["overlapped"] = True
        if self.processes.sandbox_fallback:
            res["notes"].append(
                f'the "start" sandbox could not start a worker here ({self.processes.sandbox_fallback}): '
                '"init" instead, where the threads torch and CUDA started before it keep '
                "their file access (docs/kernelbench.md)")
        if not loaded["ok"]:
            if loaded.get("denied"):
                res.update(verdict="denied", feedback=f"refused by the sandbox: {loaded['error']}")
            else:
                # the sandbox not applicable is the environment's failure
                # only where load enters it ("init"); a "start" worker
                # answered ready inside it, so a load reply saying otherwise
                # was written by the candidate's code (it runs during load)
                env_failed = loaded.get("sandbox_failed") and self.processes.sandbox == "init"
                res.update(verdict="error" if env_failed else "compile_error",
                           feedback=loaded["error"])
            return False
        res["compile_seconds"], res["compile_cached"] = loaded["compile_seconds"], loaded["cached"]
        sandbox_notes(loaded["sandbox"], res)
        if not loaded["isolation"]["applied"]:
            # .get: the reply is the candidate's to write (worker_process
            # checks its types, not that a refusal says why)
            why = loaded["isolation"].get("why", "no reason given")
            res["notes"].append(f"no isolation filter ({why}): the "
                                "candidate's processes can signal other processes of this user")
        if loaded["no_subreaper"]:
            res["notes"].append(f"no subreaper ({loaded['no_subreaper']}): a process the "
                                "candidate starts in a session of its own may outlive it")
        return True

    def _time_candidate(self, w, rng, lifted, base_us, batches, calls, checks, res):
        """The candidate's warmup and timed batches, each checked: the
        schedule both sides run, (warmup calls, calls per batch), with the
        times in res; None (the verdict in res) when a check failed."""
        # the schedule both sides run: a warmup batch, then batches of n calls
        warm = calls or self.timing.calls_for(base_us)
        self.timing.clocks_reset(w)
        cand_us = self.timing.warmup(w, warm, rng)
        n = calls or self.timing.calls_for(min(cand_us, base_us or cand_us))
        self._warm_to(w, warm, n, rng)
        preps = []
        wall, events, why = self.timing.timed(
            w, batches, n, checks, rng,
            check=lambda s, i, c: self.verification.check(w, 0, s, lifted[0], f"timed call (batch {i})", c),
            preps=preps)
        if why:
            res.update(verdict="wrong", feedback=why)
            return None
        res.update(time_us=median(wall), event_us=median(events), calls=n, batches=batches,
                   prepare_us=median(preps))
        # every batch's per-call time, for the noise behind the medians
        res["batches_us"] = {"candidate": [round(x, 3) for x in wall]}
        # the worker's own CUDA-event time of each batch beside the caller's
        # clock: which of the two a batch's spread is in (the GPU's work, or
        # the host's and the requests')
        res["batches_event_us"] = {"candidate": [round(x, 3) for x in events]}
        res.setdefault("ops_s", {})["candidate"] = self.timing.clocks_read(w)
        if self.staged:
            res["staging"] = {"candidate": w.staging or "host"}
        # the worker's own times cannot exceed the caller's clock (plus a
        # little slack for the clock's own start and stop)
        res["timing_mismatch"] = sum(events) * n > 1.05 * sum(wall) * n + 1000.0
        return warm, n

    def _warm_to(self, w, warm, calls, rng, lifted=None):
        """A second warmup batch, of the timed batches' size, where they are
        larger than the first (sized before the candidate's own time was
        known): their outputs' memory is then allocated outside the clock,
        where the first timed batch had allocated it inside (the slowest
        of its side in 11 of 36 on an H100). Both sides, so the schedule
        stays one."""
        if calls > warm:
            self.timing.warmup(w, calls, rng, lifted)

    def _baseline_key(self, warm, calls, checks, lifted, staging):
        """What the baseline memo's samples are kept by: everything that
        changes the baseline's time per call (the schedule, the weights'
        way, what is timed, how its inputs reach it)."""
        return (warm, calls, checks, bool(lifted), self.baseline_kind, self.staged,
                self.timing.inputs_from, staging)

    def _time_baseline(self, res, warm, batches, calls, checks, rng, lifted, disturbed=False,
                       use_memo=True):
        """The reference on the candidate's schedule, in its own worker, the
        candidate gone: baseline_us and the speedup. With a memo of this
        schedule the first FRESH batches may be enough (baseline_memo.py):
        each is timed and checked as in the full schedule, after the same
        launch probe and warmup. disturbed: the candidate left processes
        running (ended before this), so its samples stay out of the memo.
        use_memo: False, this evaluation neither uses the memo nor adds to it."""
        if not check_baseline_paths(self.processes, self.expected_paths, res):
            return
        b = self.processes.baseline
        staging = b.staging
        key = self._baseline_key(warm, calls, checks, lifted, staging)
        memo = MemoUse(self.processes.baseline_memo if use_memo else None, key, batches,
                       off="Runner(baseline_memo=False)" if use_memo else "evaluate(baseline_memo=False)")
        preps = []
        try:
            # its launch time now, the candidate gone: its ready's was taken
            # while the first candidate's worker started beside it
            r, _ = b.request({"op": "launch"}, self.call_timeout_s)
            self.processes.note_baseline(launch_us=r["launch_us"] if r["ok"] else None)
            self.timing.clocks_reset(b)
            self.timing.warmup(b, warm, rng, lifted)
            self._warm_to(b, warm, calls, rng, lifted)
            wall, events, _ = self.timing.timed(b, batches, calls, checks, rng, lifted, preps=preps,
                                                until=memo.enough)
        except (WorkerDied, WorkerTimeout, CandidateDenied, RuntimeError) as e:
            self.processes.end_baseline()  # (its memo with it)
            res["notes"].append(f"the baseline could not be timed: {e}")
            return
        facts = self.processes.baseline_facts
        res["baseline_us"] = median(memo.samples(wall))
        res["baseline_memo"] = memo.record(wall)
        if memo.note():
            res["notes"].append(memo.note())
        # only an evaluation that found nothing wrong adds to the memo: a
        # candidate flagged for its clock, or one that left processes, may
        # have disturbed these batches (a staging that changed mid-way
        # measured another key)
        clean = (res["verdict"] == "pass" and not res.get("timing_mismatch") and not disturbed
                 and b.staging == staging)
        memo.share(wall, clean)
        res["baseline_kind"] = self.baseline_kind
        if facts.get("compile_seconds") is not None:
            res["baseline_compile_seconds"] = round(facts["compile_seconds"], 3)
        res.setdefault("batches_us", {})["baseline"] = [round(x, 3) for x in wall]  # (this evaluation's)
        res.setdefault("batches_event_us", {})["baseline"] = [round(x, 3) for x in events]
        if memo.stand_ins(wall):
            res["batches_us"]["baseline_memo"] = [round(x, 3) for x in memo.stand_ins(wall)]
        res.setdefault("ops_s", {})["baseline"] = self.timing.clocks_read(b)
        if self.staged:
            res.setdefault("staging", {})["baseline"] = b.staging or "host"
        # prepare (fresh inputs, untimed) is recorded for both sides, not
        # charged: a fresh candidate process's prepare is slower than the
        # kept baseline worker's (cold memory), so the excess does not tell
        # work done there from a cold start (docs/kernelbench.md, open)
        res["baseline_prepare_us"] = median(preps)
        res["speedup"] = res["baseline_us"] / res["time_us"] if res["time_us"] > 0 else None
        self.processes.note_baseline(per_call_us=res["baseline_us"])

    def _launch_luck(self, res):
        """The two workers' launch times (each measured before any
        candidate code ran in it) and their ratio; a note when a
        launch-bound candidate's process was far from the baseline's."""
        res["launch_us"]["baseline"] = self.processes.baseline_facts.get("launch_us")
        luck = launch_luck(res["launch_us"]["candidate"], res["launch_us"]["baseline"])
        if res["launch_us"].get("overlapped"):  # its ready ran beside the baseline's worker starting
            luck = None
        res["launch_luck"] = None if luck is None else round(luck, 4)
        note = luck_note(luck, res.get("kernel_share"))
        if note:
            res["notes"].append(note)

    def _seal(self, w, res):
        s, _ = w.request({"op": "seal"}, self.call_timeout_s)
        if not s["ok"]:
            raise _failure(s)
        res["sandbox"] = s["sandbox"]  # now with exec refused
        res["gpu_paths"] = {"candidate_reported": s["gpu_paths"]}
        # the signatures its kernels' launchers were made for: the
        # candidate's word, a hint for the spares' readies (well-formed ones
        # only are kept; they build what Triton itself would)
        triton_launchers.want(s.get("launchers"))

    def baseline_alone(self, batches, calls):
        """The reference Model alone in the baseline's worker, on evaluate's
        schedule: per-call us (median of the batches)."""
        self.processes.start_baseline()
        why = self.processes.baseline_ready()
        if why:
            raise RuntimeError(why)
        rng = random.Random(1)
        facts = self.processes.baseline_facts
        n = calls or self.timing.calls_for(facts["per_call_us"])
        lifted = facts["lifted"]
        self.timing.warmup(self.processes.baseline, n, rng, lifted)
        wall, _, _ = self.timing.timed(self.processes.baseline, batches, n, 2, rng, lifted)
        return median(wall)
