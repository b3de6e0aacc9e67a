"""ModelNew candidates over the host's GPUs: one lane per GPU, every
candidate exactly one result, collected by ticket in submission order.

The rules are the C pool's (docs/pool.md), for the other kind of worker:
- one lane per GPU the scheduler is given (default: every GPU this process
  sees, so CUDA_VISIBLE_DEVICES decides), evaluating one candidate at a
  time, or K with in_flight (below) and still timing one at a time:
  timings never share a GPU. A lane keeps a Runner per problem it
  ran lately (`keep_warm`): the problem's baseline worker and a spare
  candidate worker stay up between candidates (runner.py);
- a lane takes the oldest queued candidate, or one of the problem it ran
  last (its workers are warm) submitted less than `affinity_s` after that
  oldest one (so a batch submitted at once runs problem by problem), and
  names the next queued candidate of the same problem to its Runner, so
  that candidate's worker starts ahead (the "start" sandbox needs its
  source early); that candidate is then held for the lane, and taken
  next by the same rule (else its hold goes);
- what the candidate did is its verdict (a crash is `crash`, a hang
  `timeout`: the Runner's deadlines); what the environment did (verdict
  `error`, or an exception out of the lane) is tried again on a lane that
  did not fail it, up to `max_attempts`; then the result is that error;
- a lane whose GPU fails its health check after an error is retired, and
  its candidates go to the other lanes; with no lane left, every candidate
  still waiting, and any submitted later, gets `error` saying why;
- a backstop past each candidate's own deadlines (`job_timeout_s`): a lane
  still busy then is aborted (its Runner closed from the watchdog's
  thread, which ends the workers) and the candidate's result is
  `timeout`; the lane thread's late result is dropped;
- close() aborts what runs and gives every candidate still pending its
  `error` result ("the scheduler was closed"), so every ticket is answered;
- with a compile stage (`builds`, builds.BuildPool), every source that
  builds (load_inline) is handed to it when it is submitted (build_ahead:
  the rail does so before the kind's GPU turn), so builds run on the CPUs
  beside each other and beside the GPU turns; a lane that takes a
  candidate waits for its build only if it is not done, and a build that
  failed or ran past its time is the candidate's result without a GPU turn.

Several candidates in flight per lane (`in_flight` K > 1; opt-in:
in_flight.py, gate.py): each lane gets K
threads, each taking candidates by the rules above, and the lane times
them one at a time behind its gate. The rules hold per candidate: the
backstop aborts only the late candidate's evaluation (abort(ticket)), and
a candidate in flight on a lane that is retired meanwhile (its workers
ended by the lane's close) goes back to the queue as the environment's
failure, whatever its evaluation then said.

Lanes are objects with evaluate(problem, source, next_source, options),
abort(), healthy() and close() (with in_flight > 1: evaluate(...,
token=ticket) and abort(ticket) too, and optionally lost_s(ticket): the
seconds it waited at the gate or was frozen, which the backstop does not
count), and optionally prepare_ahead(problem) (in flight: the
problem of a queued candidate made ready on the lane while its other
candidates run, below); RunnerLane is the real one, tests give fakes
(`lane_factory`) to test the rules on the CPU.

With in_flight > 1, a lane that takes a candidate also asks, in a thread
of its own, that the problem of the oldest queued candidate it has none
of running be prepared (RunnerLane.prepare_ahead: its Runner made and its
baseline's worker started, within keep_warm): in a GRPO step's batch each
problem's first candidate waited 1.6-2.6 s for its baseline's start (an
H100 at 267f017). A problem is not asked again on a lane for
AHEAD_AGAIN_S after it was asked or one of its candidates ran there
(while its Runner is likely kept); one preparation at a time per lane,
none while a job is to run alone there (nothing starts beside it)."""
import collections
import itertools
import re
import threading
import time

from .builds import note as builds_note
from .builds import verdict as builds_verdict

CLOSED_MESSAGE = "the scheduler was closed"
AHEAD_AT_ONCE = 1  # prepare_ahead calls running at once per lane (_problem_ahead)
AHEAD_AGAIN_S = 60.0  # a problem asked ahead, or run on a lane, is not asked there again before this
AHEAD_KEYS = 4096  # past this many remembered, those older than AHEAD_AGAIN_S are forgotten
NO_LANE_MESSAGE = "no GPU lane can evaluate ModelNew candidates"


class Job:
    __slots__ = ("ticket", "problem", "source", "options", "submitted", "attempts", "failed_on",
                 "held_by", "held_for", "started", "lane", "result", "done", "on_done", "shared", "alone")

    def __init__(self, ticket, problem, source, options, on_done):
        self.ticket, self.problem, self.source, self.options = ticket, problem, source, options
        self.submitted = time.monotonic()
        self.attempts = 0
        self.failed_on = set()   # lanes that failed it for the environment's reasons
        self.held_by = None      # the lane whose spare was started for it
        # in flight: the lane's thread that named it to its evaluation as the
        # next source (its spare was started for it), which takes it next
        self.held_for = None
        self.started = None
        self.lane = None
        self.result = None
        self.done = threading.Event()
        self.on_done = on_done
        self.shared = False      # in flight: another job ran on its lane beside it
        self.alone = False       # to be run again with nothing beside it (_needs_alone)


def _error(message):
    return {"verdict": "error", "feedback": message, "notes": [], "cases": []}


# what a neighbour in flight can cause an honest candidate: its memory taken
# (torch's and the driver's words for it), or the GPU kept busy past the
# gate's idle probe (evaluation.py _idle_or_error)
_NEIGHBOURS = re.compile(r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|"
                         r"the GPU was not idle", re.IGNORECASE)


def _needs_alone(result):
    """Whether a result of an evaluation that shared its lane may be its
    neighbours' doing (a crash or an error that says so): then the job runs
    again alone on that lane, and what it gets there stands (a candidate
    that claims so falsely only costs the lane that run)."""
    return (isinstance(result, dict) and result.get("verdict") in ("crash", "error")
            and bool(_NEIGHBOURS.search(str(result.get("feedback") or ""))))


def _retryable(result):
    """Whether a result is the environment's failure (verdict error): tried
    again elsewhere."""
    return isinstance(result, dict) and result.get("verdict") == "error"


class Scheduler:
    def __init__(self, lanes, max_attempts=3, job_timeout_s=None, affinity_s=30.0,
                 watchdog_s=0.5, builds=None, in_flight=None, prepare_ahead=True):
        """lanes: {name: lane object}. job_timeout_s: the backstop per
        candidate (None: none; RunnerLane's own deadlines decide), counted
        from its GPU turn (after its build; with in_flight > 1, less its
        waits at the gate and its time frozen: the lane's lost_s). builds: the compile stage (a builds.BuildPool,
        closed with the scheduler), or None. in_flight: candidates each lane
        evaluates at once (1: one at a time); None: the lanes' own
        (their `in_flight`, else 1: a lane that says nothing takes one).
        prepare_ahead: with in_flight > 1, ask a lane to prepare a queued
        problem (below); False: never (its gain measured against it)."""
        if not lanes:
            raise ValueError(NO_LANE_MESSAGE + ": none given")
        self.max_attempts = max(1, int(max_attempts))
        self.job_timeout_s = job_timeout_s
        self.affinity_s = affinity_s
        self.builds = builds
        # what each lane says it takes at once (a lane without a gate says 1)
        own = {name: int(lane.in_flight) for name, lane in lanes.items() if hasattr(lane, "in_flight")}
        if in_flight is None:
            if len(set(own.values())) > 1:
                raise ValueError(f"the lanes evaluate different numbers at once ({own})")
            in_flight = next(iter(own.values()), 1)
        over = {name: k for name, k in own.items() if k < in_flight}
        if over:
            # more threads than a lane's gate was made for would time two
            # candidates on one GPU at once
            raise ValueError(f"in_flight {in_flight} is more than these lanes take at once: {over}")
        self.in_flight = max(1, int(in_flight))
        self.prepare_ahead = prepare_ahead
        self._cond = threading.Condition()
        self._queue = collections.deque()   # jobs not yet taken, oldest first
        self._jobs = {}                     # ticket -> Job, until collected
        self._tickets = itertools.count(1)
        self._closed = False
        self._retired = {}                  # lane name -> why
        self._interrupted = set()           # tickets in flight on a lane when it was retired
        self.counters = collections.Counter()
        self._lanes = dict(lanes)
        self._last_problem = {}             # lane name -> problem key it ran last
        self._on_lane = collections.defaultdict(set)  # lane name -> jobs its threads run now
        self._asked_ahead = collections.defaultdict(dict)  # lane name -> {key: when asked or run there}
        self._ahead_running = collections.Counter()   # lane name -> prepare_ahead calls running
        self._threads = []
        for name in self._lanes:
            for i in range(self.in_flight):
                t = threading.Thread(target=self._lane_loop, args=(name,), daemon=True,
                                     name=f"kreward-lane-{name}" + (f"-{i}" if self.in_flight > 1 else ""))
                t.start()
                self._threads.append(t)
        self._watchdog = threading.Thread(target=self._watch, args=(watchdog_s,), daemon=True,
                                          name="kreward-lane-watchdog")
        self._watchdog.start()

    # ---- submitting and collecting ----
    def submit(self, problem, source, options=None, on_done=None):
        """Queues a candidate; its ticket. on_done(job) is called once, from
        the thread that finished it, when its result is in."""
        with self._cond:
            if self._closed:
                raise ValueError("the scheduler is closed")
            job = Job(next(self._tickets), problem, source, dict(options or {}), on_done)
            self._jobs[job.ticket] = job
            live = bool(self._live_lanes())
            if live:
                self._queue.append(job)
                self._cond.notify_all()
        if live:
            self.build_ahead(source)
            return job.ticket
        self._finish(job, _error(self._no_lane_message()))
        return job.ticket

    def build_ahead(self, source):
        """Starts source's build in the compile stage now, if it builds
        (the rail calls this at submit, before its kind's GPU turn; the
        same source again is one build)."""
        if self.builds is None:
            return
        try:
            self.builds.submit(source)
        except Exception:  # noqa: BLE001 - then its lane's wait builds it, or its GPU worker does
            pass

    def wait(self, ticket, timeout=None):
        """The result of a ticket (the job is then forgotten); TimeoutError
        when not done in time, KeyError for an unknown ticket."""
        with self._cond:
            job = self._jobs.get(ticket)
        if job is None:
            raise KeyError(f"ticket {ticket}: not submitted here, or already collected")
        if not job.done.wait(timeout):
            raise TimeoutError(f"ticket {ticket} is not done after {timeout} s")
        with self._cond:
            self._jobs.pop(ticket, None)
        return job.result

    def next(self, timeout=None):
        """(ticket, result) of the oldest ticket not yet collected;
        LookupError when none is pending."""
        with self._cond:
            if not self._jobs:
                raise LookupError("nothing is pending")
            ticket = min(self._jobs)
        return ticket, self.wait(ticket, timeout)

    def done(self, ticket):
        with self._cond:
            job = self._jobs.get(ticket)
        return job is not None and job.done.is_set()

    @property
    def pending(self):
        with self._cond:
            return sorted(self._jobs)

    def status(self):
        with self._cond:
            return {"lanes": {name: {"retired": self._retired.get(name),
                                     "busy": any(j.lane == name and not j.done.is_set()
                                                 for j in self._jobs.values())}
                              for name in self._lanes},
                    "queued": len(self._queue), "pending": len(self._jobs),
                    **({"builds": self.builds.status()} if self.builds is not None else {}),
                    **dict(self.counters)}

    # ---- the lanes ----
    def _live_lanes(self):
        return [n for n in self._lanes if n not in self._retired]

    def _no_lane_message(self):
        whys = "; ".join(f"{n}: {w}" for n, w in self._retired.items())
        return f"{NO_LANE_MESSAGE} ({whys or 'none left'})"

    def _take(self, name):
        """The job lane `name` runs next (lock held), or None."""
        if not self._queue:
            return None
        if any(j.alone for j in self._on_lane[name]):
            return None  # a job runs alone there: nothing starts beside it
        waiting = self._alone_waiting(name)
        if waiting is not None:
            # the lane drains for it: nothing new starts until it can run,
            # a preparation ahead included (a worker's start beside it)
            return None if self._on_lane[name] or self._ahead_running[name] else waiting
        last = self._last_problem.get(name)
        oldest = same = held = others = None
        me = threading.get_ident()
        for job in self._queue:
            if job.held_by not in (None, name) or name in job.failed_on:
                continue
            if job.held_for not in (None, me):
                # named as the next source by another of this lane's threads:
                # if this thread took it, that one's spare (started for it, or
                # in its folder once it had one) would serve nothing
                others = others or job
                continue
            if oldest is None:
                oldest = job
            if held is None and job.held_by == name:
                held = job
            if same is None and last is not None and job.problem.key == last:
                same = job
        # the problem it ran last passes the oldest only with a job submitted
        # less than affinity_s after it: a GRPO step's batch, submitted at
        # once, runs problem by problem (its workers warm, each slot's spare
        # taken by its own problem's next candidate) however long it takes,
        # and a job is passed only by those submitted up to affinity_s
        # after it (a waiting time that counted from the submission made
        # the batch's lanes take one of each problem in turn once its
        # oldest job had waited affinity_s: 14 of 64 candidates found their
        # worker started ahead on an H100 at 8a6e5fe). A job held for this
        # lane (named ahead to its Runner) keeps to the same rule: each take
        # holds the next of its problem, so a hold that passed the rule
        # would chain one problem's stream past every other job for good
        # (a job held for another thread counts as the oldest here too)
        first = others if others is not None and (oldest is None or others.submitted < oldest.submitted) \
            else oldest
        for job in (held, same):
            if job is not None and (job is first or job.submitted - first.submitted < self.affinity_s):
                return job
        if held is not None:
            held.held_by = held.held_for = None  # passed over: any lane may take it
        if others is not None and (oldest is None or oldest.submitted - others.submitted >= self.affinity_s):
            # the other thread's guess gives way: when nothing else is
            # queued for this thread (a batch's last jobs), and when it was
            # submitted affinity_s or more before what this thread would
            # take (its namer busy with a long evaluation: the rule above,
            # as for a job held for a lane)
            others.held_for = None
            return others
        return oldest

    def _alone_waiting(self, name):
        """The queued job waiting to run alone on lane `name` (lock held), or
        None."""
        return next((j for j in self._queue if j.alone and j.held_by in (None, name)
                     and name not in j.failed_on), None)

    def _next_same_problem(self, name, job):
        """The next queued job of job's problem, held for this lane (lock held)."""
        for other in self._queue:
            if other.problem.key == job.problem.key and other.held_by is None and \
                    name not in other.failed_on:
                other.held_by = name
                if self.in_flight > 1:
                    other.held_for = threading.get_ident()
                return other
        return None

    def _lane_loop(self, name):
        lane = self._lanes[name]
        while True:
            with self._cond:
                while True:
                    if self._closed or name in self._retired:
                        return
                    job = self._take(name)
                    if job is not None:
                        break
                    self._cond.wait(0.5)
                self._queue.remove(job)
                nxt = None if job.alone else self._next_same_problem(name, job)
                job.held_by, job.held_for, job.lane, job.started = name, None, name, time.monotonic()
                job.attempts += 1
                self._last_problem[name] = job.problem.key
                running = self._on_lane[name]
                running.add(job)
                if len(running) > 1:
                    for j in running:
                        j.shared = True
                ahead = self._problem_ahead(name, lane, job)
            if ahead is not None:
                try:
                    threading.Thread(target=self._prepare_ahead, args=(name, lane, ahead), daemon=True,
                                     name=f"kreward-lane-{name}-ahead").start()
                except RuntimeError:  # no thread to be had: nothing ahead, the job goes on
                    with self._cond:
                        self._ahead_running[name] -= 1
            built = self._await_build(job)
            if job.done.is_set():  # the backstop or close() answered it while it waited
                with self._cond:
                    self._off_lane(name, job)
                continue
            result = builds_verdict(built)
            if result is None:
                # (a token only in flight: lanes of one at a time take none)
                token = {"token": job.ticket} if self.in_flight > 1 else {}
                try:
                    result = lane.evaluate(job.problem, job.source,
                                           nxt.source if nxt is not None else None, job.options, **token)
                except Exception as e:  # noqa: BLE001 - the lane's failure: never the trainer's
                    result = _error(f"the lane on {name} failed: {type(e).__name__}: {e}")
                builds_note(result, built)
            else:
                with self._cond:
                    self.counters["settled_by_build"] += 1
            self._lane_done(name, lane, job, result)

    def _problem_ahead(self, name, lane, job):
        """In flight (lock held): the problem of the oldest queued job this
        lane could take whose problem it has no job of running and was not
        asked to prepare, for lane.prepare_ahead (its Runner and baseline
        started while the lane's candidates run: a problem's first
        candidate then finds its baseline ready); None: none, or the lane
        prepares nothing (one at a time, or no prepare_ahead), or a
        preparation of its own runs (one at a time: each is a worker's
        start beside the candidates in flight, and the lane's threads keep
        to one problem while it has queued candidates, affinity_s)."""
        now = time.monotonic()
        asked = self._asked_ahead[name]
        # a problem run on the lane has its Runner there: not asked while it
        # runs, nor for AHEAD_AGAIN_S after (keep_warm may end it later)
        asked[job.problem.key] = now
        if len(asked) > AHEAD_KEYS:
            for key in [k for k, t in asked.items() if now - t > AHEAD_AGAIN_S]:
                del asked[key]
        if (self.in_flight < 2 or not self.prepare_ahead or not hasattr(lane, "prepare_ahead") or job.alone
                or self._ahead_running[name] >= AHEAD_AT_ONCE or self._alone_waiting(name) is not None):
            return None  # (a job run alone has nothing started beside it)
        here = {j.problem.key for j in self._on_lane[name]}
        for other in self._queue:
            key = other.problem.key
            if (key in here or (key in asked and now - asked[key] < AHEAD_AGAIN_S)
                    or other.held_by not in (None, name) or name in other.failed_on):
                continue
            asked[key] = now
            self._ahead_running[name] += 1
            return other.problem
        return None

    def _prepare_ahead(self, name, lane, problem):
        try:
            if lane.prepare_ahead(problem):
                with self._cond:
                    self.counters["prepared_ahead"] += 1
        except Exception:  # noqa: BLE001 - the candidate's own evaluation meets it and says why
            pass
        finally:
            with self._cond:
                self._ahead_running[name] -= 1
                self._cond.notify_all()  # a job waiting to run alone may start now

    def _await_build(self, job):
        """The job's build outcome, waited for if it is not done (None: not
        staged); the backstop then counts the GPU turn from now."""
        if self.builds is None:
            return None
        try:
            built = self.builds.wait(job.source)
        except Exception as e:  # noqa: BLE001 - the stage's failure: the GPU worker builds
            built = {"state": "error", "error": f"the compile stage failed: {type(e).__name__}: {e}"}
        if built is not None:
            with self._cond:
                if job.started is not None:
                    job.started = time.monotonic()
        return built

    def _off_lane(self, name, job):
        """job's thread is done with it (lock held)."""
        self._on_lane[name].discard(job)
        self._cond.notify_all()  # a job waiting to run alone may start now

    def _lane_done(self, name, lane, job, result):
        with self._cond:
            self._off_lane(name, job)
            if job.done.is_set():  # the watchdog or close() answered it already
                return
            if (job.shared and not job.alone and name not in self._retired
                    and job.ticket not in self._interrupted and _needs_alone(result)):
                # once, on this lane, with nothing beside it: what it gets there stands
                job.alone, job.lane, job.held_by, job.held_for = True, None, name, None
                self._queue.appendleft(job)
                self.counters["alone_reruns"] += 1
                self._cond.notify_all()
                return
            job.lane = None
            if job.ticket in self._interrupted:
                # its lane was retired (its workers ended) while it ran: the
                # environment's doing, whatever the evaluation then said
                self._interrupted.discard(job.ticket)
                result = _error(f"the lane on {name} was retired while it ran "
                                f"({self._retired.get(name)})")
            if not _retryable(result):
                self.counters["evaluated"] += 1
                finish = True
            else:
                self.counters["environment_errors"] += 1
                job.failed_on.add(name)
                healthy = self._healthy(lane)
                if healthy is not True:
                    self._retire(name, f"its GPU failed a health check after an error "
                                       f"({healthy})")
                finish = job.attempts >= self.max_attempts or not self._can_run(job)
                if not finish:
                    job.held_by = job.held_for = None
                    self._queue.appendleft(job)
                    self.counters["retries"] += 1
                    self._cond.notify_all()
        if finish:
            if _retryable(result) and job.attempts > 1:
                result = dict(result)
                result["feedback"] = (f"{result.get('feedback')} (after {job.attempts} attempts "
                                      f"on {', '.join(sorted(job.failed_on))})")
            self._finish(job, result)

    def _can_run(self, job):
        """Whether a live lane that did not fail the job is left (lock held)."""
        return any(n not in job.failed_on for n in self._live_lanes())

    @staticmethod
    def _healthy(lane):
        try:
            return lane.healthy()
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {e}"

    def _retire(self, name, why):
        """Takes a lane out (lock held); its held jobs go to the others, and
        with no lane left every queued job is answered with an error."""
        if name in self._retired:
            return
        self._retired[name] = why
        self.counters["lanes_retired"] += 1
        self._interrupted |= {j.ticket for j in self._jobs.values()
                              if j.lane == name and not j.done.is_set()}
        for job in self._queue:
            if job.held_by == name:
                job.held_by = job.held_for = None
        threading.Thread(target=self._close_lane, args=(name,), daemon=True).start()
        if not self._live_lanes():
            orphans = list(self._queue)
            self._queue.clear()
            message = self._no_lane_message()
            threading.Thread(target=lambda: [self._finish(j, _error(message)) for j in orphans],
                             daemon=True).start()
        else:
            stuck = [j for j in self._queue if not self._can_run(j)]
            for j in stuck:
                self._queue.remove(j)
            if stuck:
                threading.Thread(target=lambda: [self._finish(j, _error(
                    f"every lane that could run it failed it ({', '.join(sorted(j.failed_on))})"))
                    for j in stuck], daemon=True).start()
        self._cond.notify_all()

    def _close_lane(self, name):
        try:
            self._lanes[name].close()
        except Exception:  # noqa: BLE001 - a lane that cannot close is already out
            pass

    # ---- the backstop ----
    def _watch(self, every_s):
        while True:
            with self._cond:
                if self._closed:
                    return
                late = []
                if self.job_timeout_s is not None:
                    now = time.monotonic()
                    late = [j for j in self._jobs.values() if j.lane is not None and
                            not j.done.is_set() and
                            now - j.started - self._lost_s(j) > self.job_timeout_s]
                for j in late:
                    self.counters["backstop_timeouts"] += 1
                self._cond.wait(every_s)
            for j in late:
                lane = self._lanes[j.lane] if j.lane else None
                self._finish(j, {"verdict": "timeout", "notes": [], "cases": [],
                                 "feedback": f"the evaluation ran past the scheduler's backstop of "
                                             f"{self.job_timeout_s:g} s (job_timeout_s)"})
                if lane is not None:
                    try:
                        # in flight: that candidate's evaluation only
                        lane.abort(j.ticket) if self.in_flight > 1 else lane.abort()
                    except Exception:  # noqa: BLE001
                        pass

    def _lost_s(self, job):
        """In flight: the seconds the job's evaluation waited at its lane's
        gate or was frozen (the lane's, not its own: lost_s), else 0."""
        lane = self._lanes.get(job.lane)
        if self.in_flight == 1 or not hasattr(lane, "lost_s"):
            return 0.0
        try:
            return lane.lost_s(job.ticket)
        except Exception:  # noqa: BLE001 - then the backstop counts it all
            return 0.0

    # ---- one result per job ----
    def _finish(self, job, result):
        with self._cond:
            if job.done.is_set():
                return
            job.result = result
            job.lane = None
            self._interrupted.discard(job.ticket)
            job.done.set()
            self._cond.notify_all()
        if job.on_done is not None:
            try:
                job.on_done(job)
            except Exception:  # noqa: BLE001 - a callback's failure is its owner's
                pass

    def close(self):
        """Stops the lanes; every pending job gets its result ("the
        scheduler was closed" for those not done). Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            pending = [j for j in self._jobs.values() if not j.done.is_set()]
            self._queue.clear()
            self._cond.notify_all()
        for job in pending:
            self._finish(job, _error(CLOSED_MESSAGE))
        if self.builds is not None:
            self.builds.close()  # (a lane waiting on a build gets "closed", then sees its job done)
        for name, lane in self._lanes.items():
            try:
                lane.abort()
            except Exception:  # noqa: BLE001
                pass
            self._close_lane(name)
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
