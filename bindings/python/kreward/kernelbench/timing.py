"""The timed batches of a ModelNew evaluation, the same for both sides (the
candidate's worker and the reference's):
- one batch (batch): fresh inputs made and handed over untimed
  (transfer.py), then the calls back to back on the caller's clock (`go`),
  the worker's commitment to its outputs made inside it;
- the schedule: a warmup batch, discarded (warmup; evaluation.py adds a
  second of the timed size where that is larger), then `batches` batches
  of the same number of calls (timed), each followed by the fetches of
  calls drawn after it ran (checked by the caller's check, or fetched and
  not compared), their number sized to the clock (calls_for);
- where the time went (clocks_reset, clocks_read: each request's seconds,
  and this process's own steps).
A Timing takes everything it reads when it is made; the worker is an
argument of each call."""
import math
import random
import time

from .inputs import REGION_ALIGN
from .worker_process import CandidateFailed, _failure, go_profile

MIN_CALLS = 2             # per timed batch, unless the memory budget allows fewer
MAX_CALLS = 1024

# which calls of a timed batch are checked: the OS's randomness, never
# derivable from anything the worker sees
_PICKS = random.SystemRandom()


def on_grid(n):
    """n rounded up to the next of 1, 2, ..., 8, 10, 12, 14, 16, 20, 24, ...
    (four steps an octave, none over 25 %)."""
    if n <= 8:
        return n
    step = 1 << (n.bit_length() - 3)
    return -(-n // step) * step


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def region_bytes(layouts, batch_bytes, max_call_bytes):
    """The input region's size: a timed batch's inputs, at most
    batch_bytes with their outputs, plus each tensor's alignment and each
    call's rounding to whole key lengths, for the largest batch any case
    can get (inputs.region_offsets). Sparse: pages exist once written."""
    tensors = max(len(lay) for lay in layouts)
    return max(batch_bytes, 2 * max_call_bytes) + MAX_CALLS * tensors * REGION_ALIGN


class Timing:
    """Batches on the caller's clock.

    transfer: a transfer.Transfer (the inputs in, the unchecked fetches);
    inputs_from: "caller" (the inputs written masked into the worker's
    region after prepare) or "worker" (made by the worker in prepare);
    staged: whether the worker copies them to its device first;
    call_timeout_s: a request's limit (a batch's: per call); caller_s: the
    Counter this process's own steps go to (shared with the transfer and
    the verification); batch_us, batch_bytes, call_bytes: a batch's
    length, its memory budget and one call's inputs and outputs
    (calls_for)."""

    def __init__(self, *, transfer, inputs_from, staged, call_timeout_s, caller_s, batch_us, batch_bytes,
                 call_bytes):
        self.transfer, self.inputs_from, self.staged = transfer, inputs_from, staged
        self.call_timeout_s, self.caller_s = call_timeout_s, caller_s
        self.batch_us, self.batch_bytes, self.call_bytes = batch_us, batch_bytes, call_bytes

    def calls_for(self, per_call_us):
        """Calls per timed batch: enough for batch_us at per_call_us, within
        the memory budget. Rounded up to a step (on_grid): per_call_us is a
        measurement, and the exact count would follow its noise from one
        evaluation to the next, and with it the schedule the baseline
        memo's samples are kept by (baseline_memo.py)."""
        want = MIN_CALLS if not per_call_us else math.ceil(self.batch_us / max(per_call_us, 0.1))
        return max(1, min(on_grid(max(want, MIN_CALLS)), MAX_CALLS, self.batch_bytes // self.call_bytes))

    def batch(self, w, case, seeds, lifted=None, committed=None, preps=None, profile=None):
        """One batch: fresh inputs made (untimed), then the calls on the
        caller's clock; (wall us, worker's own us) per call. committed: a
        dict that gets each seed's commitment (the sums of its outputs,
        made inside the clock). preps: a list that gets the prepare
        request's time per call (recorded: the candidate's process could
        compute the batch's outputs there, its inputs made). profile: a
        dict that gets where the worker's `go` spent its time (verify's
        batches under KR_PROFILE, go_profile.py; never a timed batch:
        the profile synchronises between its parts)."""
        region = self.inputs_from == "caller"
        # with the region the worker gets call numbers, never the seeds (it
        # could make the values from them, outside the clock)
        w.call_ids = {s: i for i, s in enumerate(seeds)} if region else {}
        req = {"op": "prepare", "case": case, "commit": True, "region": region,
               "staged": region and self.staged,
               "seeds": list(range(len(seeds))) if region else seeds}
        if lifted is not None:
            req["lifted"] = lifted
        tp = time.perf_counter()
        r, _ = w.request(req, self.call_timeout_s * len(seeds))
        if not r["ok"]:
            raise _failure(r)
        go = {"op": "go", "case": case}
        if profile is not None:
            go["profile"] = True
        if region:
            go["key"] = self.transfer.write_region(w, case, seeds)
        if preps is not None:
            preps.append((time.perf_counter() - tp) * 1e6 / len(seeds))
        # (timed by libkreward with this process's interpreter lock let go:
        # WorkerProcess.request_timed says why)
        r, _, wall = w.request_timed(go, self.call_timeout_s * len(seeds))
        if not r["ok"]:
            raise _failure(r)
        if len(r.get("committed") or ()) != len(seeds):
            raise CandidateFailed("the batch committed to no outputs")
        if committed is not None:
            committed.update(zip(seeds, r["committed"]))
        if profile is not None:
            profile.update(go_profile(r) or {"parts_s": {}, "total_s": None,
                                             "top": "the worker sent no profile"})
            profile["wall_s"] = round(wall, 6)
        t, _ = w.request({"op": "times"}, self.call_timeout_s)
        if not t["ok"]:
            raise _failure(t)
        return wall * 1e6 / len(seeds), t["event_us"] / len(seeds)

    def warmup(self, w, calls, rng, lifted=None):
        """A batch whose time is only an estimate (lazy initialisation,
        clocks, caches): per-call wall us."""
        try:
            wall, _ = self.batch(w, 0, [rng.getrandbits(62) for _ in range(calls)], lifted)
            w.request({"op": "drop"}, self.call_timeout_s)
        except BaseException:
            w.release_region()  # no timed batches follow to free them (a kept baseline worker)
            raise
        return wall  # the region's pages stay for the timed batches (timed frees them)

    def timed(self, w, batches, calls, checks, rng, lifted=None, check=None, preps=None, until=None):
        """Timed batches, each followed by `checks` fetches of calls drawn
        after it ran (check(seed, batch, committed) says what is wrong with
        one, or None; without check the outputs are fetched and not
        compared, so both sides run the same requests). (wall, events,
        why). until(wall so far), asked after each batch with its checks,
        True: no more batches (the baseline memo's fresh ones agreed:
        baseline_memo.py). The input region's pages are freed at the end, not after
        each batch: a page the kernel must find again costs 7x a resident
        one's write (0.33 s/GiB against 0.047 on this project's machine),
        and was most of a large batch's staging on the H200 (16b7c39:
        write_region 10.7 s of the 4096^2 relu's 16.2 s timed phase)."""
        try:
            return self._timed_batches(w, batches, calls, checks, rng, lifted, check, preps, until)
        finally:
            w.release_region()

    def _timed_batches(self, w, batches, calls, checks, rng, lifted, check, preps, until):
        wall, events = [], []
        for i in range(batches):
            seeds = [rng.getrandbits(62) for _ in range(calls)]
            committed = {}
            per_call, ev = self.batch(w, 0, seeds, lifted, committed, preps)
            wall.append(per_call)
            events.append(ev)
            # drawn after the batch ran, by a generator the seeds say nothing
            # about (the seeds' own Mersenne Twister can be recovered from
            # a few hundred of them, which would tell the calls checked)
            for s in _PICKS.sample(seeds, min(checks, calls)):
                if check:
                    why = check(s, i, committed[s])
                    if why:
                        return wall, events, why
                else:
                    self.transfer.fetch_unchecked(w, s)
            w.request({"op": "drop"}, self.call_timeout_s)
            if until is not None and until(wall):
                break
        return wall, events, None

    def clocks_reset(self, w):
        w.op_s.clear()
        self.caller_s.clear()

    def clocks_read(self, w):
        """Seconds per step since clocks_reset: each request to worker w
        by op (its wall time here, the worker's work inside), and the
        caller's own write_region and golden: where a side's warmup and
        timed batches spent their time."""
        steps = {**w.op_s, **self.caller_s}
        return {k: round(v, 4) for k, v in sorted(steps.items(), key=lambda kv: -kv[1])}
