"""One GPU's lane for the scheduler (scheduler.py): the Runners of the
problems it ran lately, on its device, and the lane's health.

A Runner per problem (runner.py) owns that problem's baseline worker and a
spare candidate worker; a lane keeps the `keep_warm` most recently used and
closes the rest. abort() closes the Runner at work from another thread,
which ends its workers and so the evaluation (the scheduler's backstop).
healthy() asks the device for a small computation in this process: the
lane's own CUDA context (the caller's, which makes the golden outputs) must
still work.

With in_flight > 1 (opt-in: in_flight.py, gate.py) each problem's Runner
is an InFlightRunner, the lane has one gate and one cap on spares
(in_flight.LaneSpares: max_spares across its problems' slots), and
evaluate() is called from that many scheduler threads at once:
abort(token) then ends one evaluation, abort() all of them."""
import collections
import math
import os
import threading
import time

# ModelNew candidates each lane evaluates at once, timed one at a time
# (in_flight.py, gate.py). On an H100 (5403e83) 4 gave 2.42x the
# candidates/s of 1, the timing's quality the same; it stays opt-in while a
# neighbour can still change an honest candidate's verdict (its GPU memory
# taken: `crash`; a spinning kernel left running: `error`):
# docs/kernelbench.md, "Several candidates in flight per GPU".
DEFAULT_IN_FLIGHT = 1
CLOSE_WAIT_S = 30.0  # close() waits this long for a Runner being made ahead (prepare_ahead)

# The evaluation options a scheduler job may carry (Runner.evaluate's).
EVALUATE_OPTIONS = ("seed", "verify_seeds", "batches", "calls", "checks", "baseline",
                    "class_name", "baseline_memo")
# What each timing preset asks of an evaluation (the C path's "fast" and
# "precise", docs/api.md): more verified seeds and timed batches, and the
# baseline timed in full (as the C path's precise never shares its samples).
PRESETS = {"fast": {}, "precise": {"verify_seeds": 3, "batches": 9, "baseline_memo": False}}


def visible_devices():
    """The GPUs this process sees ("cuda:0", ...), by torch: the ones
    CUDA_VISIBLE_DEVICES lets it see."""
    import torch
    if not torch.cuda.is_available():
        return []
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


class RunnerLane:
    def __init__(self, device, runner_options=None, keep_warm=8, in_flight=DEFAULT_IN_FLIGHT,
                 gpu_probe=True, max_spares=None):
        """in_flight: candidates evaluated at once (1, the default: one at a
        time; more: in_flight.py); gpu_probe: with in_flight > 1 on a GPU,
        probe it idle before each timed phase (gpu_probe.py); max_spares:
        with in_flight > 1, the most spare candidate workers the lane keeps
        across its problems' slots (None: in_flight, one per evaluation in
        flight; 0: none. in_flight.LaneSpares)."""
        self.device = device
        self.runner_options = dict(runner_options or {})
        self.keep_warm = max(1, int(keep_warm))
        self.in_flight = max(1, int(in_flight))
        self.gate = self.spares = None
        if self.in_flight > 1:
            from .in_flight import LaneSpares, lane_gate
            self.gate = lane_gate(device, probe=gpu_probe)
            self.spares = LaneSpares(self.in_flight if max_spares is None else max_spares)
        self._runners = collections.OrderedDict()   # problem key -> Runner, most recent last
        self._lock = threading.Lock()
        self._busy = {}                             # token -> the Runner evaluating it
        self._preparing = set()                     # problem keys prepare_ahead is making
        self._prepared = threading.Condition(self._lock)  # notified as each is done
        self._closed = False

    def _runner(self, problem, token):
        with self._lock:
            if self._closed:
                raise RuntimeError("the lane is closed")
            # (its Runner being made ahead: that one, not a second)
            while problem.key in self._preparing and not self._closed:
                self._prepared.wait(1.0)
            r = self._runners.pop(problem.key, None)
            if r is None and self.gate is None:
                r = self._new_runner(problem)
        if r is None:
            # in flight: made outside the lane's lock (it waits at the gate,
            # and an abort must not wait for it)
            made = self._new_runner(problem)
            with self._lock:
                r = self._runners.pop(problem.key, None)
                if r is None:
                    r, made = made, None  # (else another thread's, made meanwhile, is used)
            if made is not None:
                made.close()
        with self._lock:
            if self._closed:
                r.close()
                raise RuntimeError("the lane is closed")
            self._runners[problem.key] = r
            self._busy[token] = r
            old = self._evict()
        for runner in old:
            runner.close()
        return r

    def prepare_ahead(self, problem):
        """With several in flight: problem's Runner made and its baseline's
        worker started now, for a candidate of it still queued (the
        scheduler asks), where the lane has room for it under keep_warm
        without ending another's workers. The candidate then finds its
        baseline ready (in_flight.InFlightRunner.start_baseline_ahead). True
        if it made one. A failure here is left for the candidate's own
        evaluation to meet and report."""
        if self.gate is None:  # one at a time: a start now would run beside a timed phase
            return False
        with self._lock:
            if (self._closed or problem.key in self._runners or problem.key in self._preparing
                    or len(self._runners) + len(self._preparing) >= self.keep_warm):
                return False
            self._preparing.add(problem.key)
        made = None
        try:
            from .in_flight import tracked
            try:
                with tracked(self.gate):  # its workers frozen in every timed phase
                    made = self._new_runner(problem)
                    made.start_baseline_ahead()
            except Exception:  # noqa: BLE001 - the candidate's evaluation meets it and says why
                if made is not None:
                    made.close()
                return False
            with self._lock:
                if not self._closed and problem.key not in self._runners:
                    self._runners[problem.key] = made
                    made = None
        finally:
            with self._lock:
                self._preparing.discard(problem.key)
                self._prepared.notify_all()
        if made is not None:  # (closed, or a candidate's thread made its own meanwhile)
            made.close()
            return False
        return True

    def _new_runner(self, problem):
        from .runner import Runner
        if self.gate is None:
            return Runner(problem.imported(), self.device, **self.runner_options)
        from .in_flight import InFlightRunner
        with self.gate.shared(candidate=False):  # (it computes on the GPU: not during a timed phase)
            return InFlightRunner(Runner(problem.imported(), self.device, **self.runner_options), self.gate,
                                  self.spares)

    def _evict(self):
        """The Runners past keep_warm, least recently used first, none that
        an evaluation uses (lock held): taken out, for the caller to close."""
        busy = {id(r) for r in self._busy.values()}
        extra = len(self._runners) + len(self._preparing) - self.keep_warm
        old = [(k, r) for k, r in self._runners.items() if id(r) not in busy][:max(0, extra)]
        for key, _ in old:
            del self._runners[key]
        return [r for _, r in old]

    def evaluate(self, problem, source, next_source=None, options=None, token=None):
        """token: the caller's name for this evaluation (abort(token)); with
        in_flight > 1, several may run at once from different threads."""
        options = {k: v for k, v in (options or {}).items() if k in EVALUATE_OPTIONS}
        token = object() if token is None else token
        runner = self._runner(problem, token)
        try:
            if self.gate is None:
                return runner.evaluate(source, next_source=next_source, **options)
            from .in_flight import tracked
            with tracked(self.gate):
                return runner.evaluate(token, source, next_source=next_source, **options)
        finally:
            with self._lock:
                self._busy.pop(token, None)
                old = self._evict()
            for r in old:
                r.close()

    def abort(self, token=None):
        """Ends the evaluation of token (in flight: only its workers), or
        every evaluation of the lane (None)."""
        with self._lock:
            busy = list(self._busy.items())
        for t, runner in busy:
            if token is None:
                runner.close()
            elif t == token:
                if self.gate is None:
                    runner.close()
                else:
                    runner.abort(token)

    def lost_s(self, token):
        """Seconds token's evaluation (in flight) waited at the gate or was
        frozen: the scheduler's backstop does not count them."""
        with self._lock:
            runner = self._busy.get(token)
        return runner.lost_s(token) if self.gate is not None and runner is not None else 0.0

    def healthy(self):
        """True, or why this process cannot compute on the lane's device."""
        if self.device == "cpu":
            return True
        import torch
        try:
            with torch.cuda.device(self.device):
                x = torch.ones(1024, device=self.device)
                ok = float(x.sum().item()) == 1024.0
                torch.cuda.synchronize()
            return True if ok else "a sum of ones came out wrong"
        except Exception as e:  # noqa: BLE001 - a poisoned or lost device says so here
            return f"{type(e).__name__}: {e}"

    def close(self):
        with self._lock:
            self._closed = True
            self._prepared.notify_all()
            # a Runner being made ahead is closed by its maker on seeing the
            # close: waited for, so none outlives this call
            deadline = time.monotonic() + CLOSE_WAIT_S
            while self._preparing and time.monotonic() < deadline:
                self._prepared.wait(max(0.0, deadline - time.monotonic()))
            runners, self._runners = list(self._runners.values()), collections.OrderedDict()
        for r in runners:
            r.close()


def make_scheduler(options=None, cache_dir=None, no_device=False):
    """The ModelNew scheduler of a front door (the Evaluator, `kreward
    serve`): a RunnerLane per device. options (all optional): "devices"
    (default every GPU this process sees; ["cpu"] for tests: no kernel
    attribution there, so no speed pay), "runner" (Runner's options),
    "keep_warm" (8), "in_flight" (1: candidates evaluated at once per
    lane, timed one at a time: in_flight.py; opt-in: 2.42x at 4 on an
    H100, docs/kernelbench.md), "gpu_probe" (True: with in_flight > 1, the GPU idle probe before
    each timed phase), "max_spares" (with in_flight > 1, the most spare
    candidate workers a lane keeps across its problems: default
    in_flight), "prepare_ahead" (True: with in_flight > 1, a queued
    problem's Runner and baseline started while the lane's candidates run,
    scheduler.py), "affinity_s" (30: how much later a queued candidate of
    the problem a lane ran last may have been submitted than the oldest
    one and still be taken before it; 0: in submission order),
    "max_attempts" (3), "job_timeout_s" (the backstop:
    default the Runner's evaluation limit plus its timeout), "builds" (the
    compile stage, builds.py: False for none, or a dict of "workers"
    (default the host's CPUs), "timeout_s" (the Runner's), "pch" (True),
    "arch"). KrewardError ENODEVICE, saying why, when there is no device to
    run on.

    The stage's architectures (TORCH_CUDA_ARCH_LIST, given to the Runners
    too so their workers find its builds current): "arch" if given, else
    the Runner option "cuda_arch", else those of every GPU this process
    sees (build_env.arch_list: what torch in a GPU worker would pick), else
    the caller's TORCH_CUDA_ARCH_LIST; none of them (CPU lanes): no stage,
    builds stay in the GPU workers as before (a guessed architecture would
    be rebuilt there, or fail where the GPU's would not)."""
    from ..constants import Status
    from ..errors import KrewardError
    from .scheduler import Scheduler
    o = dict(options or {})
    devices = o.get("devices")
    if devices is None:
        devices = [] if no_device else visible_devices()
    if not devices:
        why = ("no_device was asked for" if no_device else
               "no GPU is visible to this process (torch.cuda sees none; CUDA_VISIBLE_DEVICES="
               f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!r})")
        raise KrewardError(Status.ENODEVICE, f"ModelNew candidates cannot be evaluated here: {why}: "
                           "they run on a GPU this process can use (or send them to a `kreward "
                           "serve` or Ray pool on a GPU machine)")
    runner = dict(o.get("runner") or {})
    if cache_dir is not None:
        runner.setdefault("cache_dir", os.path.join(cache_dir, "kernelbench"))
    timeout = float(runner.get("timeout_s", 600.0))
    builds = _build_pool(o.get("builds", {}), devices, runner, timeout)
    in_flight = max(1, int(o.get("in_flight", DEFAULT_IN_FLIGHT)))
    lanes = {str(d): RunnerLane(d, runner, o.get("keep_warm", 8), in_flight, o.get("gpu_probe", True),
                                o.get("max_spares"))
             for d in devices}
    limit = runner.get("eval_timeout_s")
    backstop = o.get("job_timeout_s", (2 * timeout if limit is None else float(limit)) + timeout)
    prepare_ahead = o.get("prepare_ahead", True)
    if not isinstance(prepare_ahead, bool):  # ("false" would read as true)
        raise ValueError(f'the kernelbench option "prepare_ahead" is true or false, not {prepare_ahead!r}')
    affinity = o.get("affinity_s", 30.0)
    if isinstance(affinity, bool) or not isinstance(affinity, (int, float)) or not 0 <= affinity < math.inf:
        raise ValueError(f'the kernelbench option "affinity_s" is a number of seconds >= 0, not {affinity!r}')
    return Scheduler(lanes, max_attempts=o.get("max_attempts", 3), job_timeout_s=backstop,
                     builds=builds, in_flight=in_flight, prepare_ahead=prepare_ahead,
                     affinity_s=float(affinity))


def _build_pool(options, devices, runner, timeout):
    """The compile stage of make_scheduler (its docstring says how the
    architectures are chosen), or None; sets the Runners' cuda_arch and
    pch_dir to the stage's."""
    if options is False or options is None:
        return None
    from .build_env import arch_list
    from .builds import BuildPool
    from .runner import DEFAULT_CACHE
    b = dict(options)
    arch = (b.get("arch") or runner.get("cuda_arch") or arch_list(devices)
            or os.environ.get("TORCH_CUDA_ARCH_LIST"))
    if not arch:
        return None
    pool = BuildPool(runner.get("cache_dir") or DEFAULT_CACHE, arch, workers=b.get("workers"),
                     timeout_s=float(b.get("timeout_s", timeout)),
                     sandbox=runner.get("sandbox", "auto") is not None, use_pch=b.get("pch", True))
    runner["cuda_arch"] = arch
    runner.setdefault("pch_dir", pool.pch_dir)
    return pool
