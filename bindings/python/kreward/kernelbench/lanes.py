"""One GPU's lane for the scheduler (scheduler.py): the Runners of the
problems it ran lately, on its device, and the lane's health.

A Runner per problem (runner.py) owns that problem's baseline worker and a
spare candidate worker; a lane keeps the `keep_warm` most recently used and
closes the rest. abort() closes the Runner at work from another thread,
which ends its workers and so the evaluation (the scheduler's backstop).
healthy() asks the device for a small computation in this process: the
lane's own CUDA context (the caller's, which makes the golden outputs) must
still work."""
import collections
import os
import threading

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
    def __init__(self, device, runner_options=None, keep_warm=8):
        self.device = device
        self.runner_options = dict(runner_options or {})
        self.keep_warm = max(1, int(keep_warm))
        self._runners = collections.OrderedDict()   # problem key -> Runner, most recent last
        self._lock = threading.Lock()
        self._busy = None                           # the Runner evaluating now
        self._closed = False

    def _runner(self, problem):
        from .runner import Runner
        with self._lock:
            if self._closed:
                raise RuntimeError("the lane is closed")
            r = self._runners.pop(problem.key, None)
            if r is None:
                r = Runner(problem.imported(), self.device, **self.runner_options)
            self._runners[problem.key] = r
            old = list(self._runners.items())[:max(0, len(self._runners) - self.keep_warm)]
            for key, _ in old:
                del self._runners[key]
            self._busy = r
        for _, runner in old:
            runner.close()
        return r

    def evaluate(self, problem, source, next_source=None, options=None):
        options = {k: v for k, v in (options or {}).items() if k in EVALUATE_OPTIONS}
        runner = self._runner(problem)
        try:
            return runner.evaluate(source, next_source=next_source, **options)
        finally:
            with self._lock:
                self._busy = None

    def abort(self):
        with self._lock:
            busy = self._busy
        if busy is not None:
            busy.close()

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
            runners, self._runners = list(self._runners.values()), collections.OrderedDict()
        for r in runners:
            r.close()


def make_scheduler(options=None, cache_dir=None, no_device=False):
    """The ModelNew scheduler of a front door (the Evaluator, `kreward
    serve`): a RunnerLane per device. options (all optional): "devices"
    (default every GPU this process sees; ["cpu"] for tests: no kernel
    attribution there, so no speed pay), "runner" (Runner's options),
    "keep_warm" (8), "max_attempts" (3), "job_timeout_s" (the backstop:
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
    lanes = {str(d): RunnerLane(d, runner, o.get("keep_warm", 8)) for d in devices}
    limit = runner.get("eval_timeout_s")
    backstop = o.get("job_timeout_s", (2 * timeout if limit is None else float(limit)) + timeout)
    return Scheduler(lanes, max_attempts=o.get("max_attempts", 3), job_timeout_s=backstop,
                     builds=builds)


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
