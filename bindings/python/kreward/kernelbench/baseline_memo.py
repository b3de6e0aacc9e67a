"""The baseline memo of the ModelNew path: the reference's recent per-batch
times, kept per schedule for the evaluations of one problem, so a later
evaluation times a few fresh baseline batches instead of the whole schedule.

The rule is the C path's (lib/bench/baseline_memo.h): a GRPO batch evaluates
many candidates of one problem in a row, and re-timing the reference in full
after each was a large share of every evaluation. A later evaluation of the
same key still times FRESH batches of the baseline (with every check the
full schedule has); only when their median agrees with the memo's (agrees)
do the memo's samples stand in for the rest of the schedule. Otherwise the
conditions the memo was taken in are gone: it is forgotten and the baseline
timed in full. Samples enter the memo only from evaluations that found
nothing wrong (MemoUse.share): a candidate flagged for disturbing the
baseline (strays left running, a timing mismatch) leaves nothing in it. One
that slows the baseline after it unflagged, by under 5 % (a hot GPU), can
leave samples that later candidates inherit while they agree; past 5 % the
memo is dropped and the baseline timed in full, so no candidate gains for
itself. A memo not added to for MAX_AGE_S is not used (clocks, other
load; each add renews it), and the whole memo goes with the baseline
worker it was measured in (processes.py).

Pure bookkeeping: no worker, no torch here (evaluation.py uses it)."""
import collections
import statistics
import time

MAX_KEYS = 16        # schedules remembered per problem (the least recently added to goes)
MAX_SAMPLES = 48     # samples per key: the most recent
MAX_AGE_S = 30.0     # older memos are not used
# fresh baseline batches every evaluation times: the fewest whose median
# one stray batch (a hiccup of the host) cannot move, as in the C path
FRESH = 3
# the fresh median's allowed distance from the memo's: 3 x the memo's
# relative spread, but never under 3 % (noise) nor over 5 % (a different
# state of the device: what one candidate left would otherwise shift the
# next candidates' speedups by up to the ceiling)
AGREE_FLOOR = 0.03
AGREE_CEILING = 0.05


def spread(samples):
    """The samples' relative standard deviation (stdev / mean; the C
    path's noise); 0 for fewer than two."""
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else 0.0


def tolerance(memo):
    """How far a fresh median may be from the memo's, relatively."""
    return min(max(3 * spread(memo), AGREE_FLOOR), AGREE_CEILING)


def agrees(memo, fresh):
    """Whether fresh samples agree with the memo's: their median within
    tolerance(memo) of the memo's median."""
    if not memo or not fresh:
        return False
    m = statistics.median(memo)
    return m > 0 and abs(statistics.median(fresh) / m - 1) <= tolerance(memo)


class BaselineMemo:
    """Recent baseline samples per key (what changes the baseline's time:
    evaluation.py makes it), at most MAX_KEYS keys of MAX_SAMPLES each.
    clock: seconds, monotonic (a test's own)."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._entries = collections.OrderedDict()  # key -> [added at, deque of samples]; least recent first

    def get(self, key):
        """(the key's samples, None), or (None, why there are none usable)."""
        e = self._entries.get(key)
        if e is None:
            return None, "no samples for this schedule yet"
        age = self._clock() - e[0]
        if age > MAX_AGE_S:
            return None, f"its samples are {age:.0f} s old (used up to {MAX_AGE_S:g} s)"
        return list(e[1]), None

    def add(self, key, samples):
        """The samples join the key's (its least recent go first); a memo
        too old to be used starts again from these."""
        samples = [float(s) for s in samples]
        if not samples:
            return
        now = self._clock()
        e = self._entries.pop(key, None)
        if e is None or now - e[0] > MAX_AGE_S:
            e = [now, collections.deque(maxlen=MAX_SAMPLES)]
        e[0] = now
        e[1].extend(samples)
        self._entries[key] = e
        while len(self._entries) > MAX_KEYS:
            self._entries.popitem(last=False)

    def forget(self, key):
        self._entries.pop(key, None)

    def clear(self):
        """Everything forgotten (the baseline worker it was measured in is gone)."""
        self._entries.clear()

    def __len__(self):
        return len(self._entries)


class MemoUse:
    """One baseline timing's dealings with the memo. memo: a BaselineMemo,
    or None (off: neither used nor added to; off says who turned it off);
    key: the schedule's; batches: the full schedule's.

    Timing.timed takes `enough` as its until: once FRESH batches are timed
    it says whether they agree with the memo (the rest of the schedule is
    then not timed), forgetting the memo when they do not (the schedule
    then runs in full). samples() are what the baseline's median is over;
    record() and note() say what happened; share() adds a clean
    evaluation's fresh batches."""

    def __init__(self, memo, key, batches, off="Runner(baseline_memo=False)"):
        self.memo, self.key, self.batches = memo, key, batches
        self.state = "full"   # or "pending" (a memo to agree with), "agreed", "disagreed"
        self.memo_samples, self.why, self._note = [], None, None
        if memo is None:
            self.why = f"off ({off})"
            return
        if batches <= FRESH:
            self.why = f"the schedule's {batches} batches are no more than the {FRESH} fresh ones"
            return
        samples, self.why = memo.get(key)
        if samples is None:
            return
        # fewer than the full schedule's would make the median less certain
        # than timing the baseline in full
        if len(samples) < batches:
            self.why = f"{len(samples)} samples for this schedule, fewer than its {batches} batches"
            return
        self.state, self.memo_samples = "pending", samples

    def enough(self, wall):
        """True once the fresh batches in wall agree with the memo."""
        if self.state != "pending" or len(wall) < FRESH:
            return False
        fresh, memo = statistics.median(wall), statistics.median(self.memo_samples)
        off = abs(fresh / memo - 1) if memo > 0 else float("inf")
        said = (f"its {len(wall)} fresh batches' median ({fresh:.1f} us) is {off:.1%} "
                f"from the memo's ({memo:.1f} us), tolerance {tolerance(self.memo_samples):.1%}")
        if agrees(self.memo_samples, wall):
            self.state, self.why = "agreed", said
            return True
        self.state, self.why = "disagreed", said
        self._note = (f"baseline memo not used: {self.why}; the memo was forgotten and the baseline "
                      "timed in full")
        self.memo.forget(self.key)
        return False

    def samples(self, wall):
        """The baseline's samples: the fresh batches, and the memo's once they agreed."""
        return list(wall) + (self.memo_samples if self.state == "agreed" else [])

    def stand_ins(self, wall):
        """The memo's most recent samples in place of the batches not timed
        (none unless they agreed): with the fresh ones, as many baseline
        batches as the full schedule has, for what reads their spread
        (report.py speedup_interval: its extremes grow with the count)."""
        missing = self.batches - len(wall) if self.state == "agreed" else 0
        return self.memo_samples[len(self.memo_samples) - missing:] if missing > 0 else []

    def record(self, wall):
        """The result's baseline_memo: used (the memo's samples counted),
        compared (fresh batches were held against a memo: used, or they
        disagreed), fresh (this evaluation's baseline batches), memo (the
        memo's samples counted), why (the comparison, or why there was
        none)."""
        used = self.state == "agreed"
        return {"used": used, "compared": self.state in ("agreed", "disagreed"), "fresh": len(wall),
                "memo": len(self.memo_samples) if used else 0, "why": self.why}

    def note(self):
        """A note for the result when the fresh batches disagreed, else None."""
        return self._note

    def share(self, wall, clean):
        """The fresh batches join the memo when the evaluation found nothing
        wrong (clean), and not after a disagreement (they may be what
        disturbed)."""
        if self.memo is not None and clean and self.state != "disagreed":
            self.memo.add(self.key, wall)
