"""What a running `kreward serve` holds: a compile-only context (problems
and rewards; kreward candidates never run in this process), the rail (the
C pool and, from the first KernelBench problem on, the ModelNew scheduler:
ModelNew candidates run in workers, their golden outputs are made here
with the problem's Model), the problem registry, the rewards, the engine
and the task store."""
import os
import warnings

from ..constants import Status
from ..context import Context
from ..errors import KrewardError
from ..kernelbench.lanes import make_scheduler
from ..pool import Pool
from ..rail import Rail
from .engine import Engine
from .problems import Registry
from .rewards import Rewards
from .tasks import TaskStore

BUNDLED = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                        "examples", "problems"))


def default_problem_dirs():
    """$KREWARD_PROBLEMS (':'-separated), else the bundled suite
    (examples/problems of the source tree)."""
    env = os.environ.get("KREWARD_PROBLEMS")
    if env:
        return [d for d in env.split(os.pathsep) if d]
    return [BUNDLED] if os.path.isdir(BUNDLED) else []


class Options:
    """The server's settings (the command line's, docs/serve.md)."""

    def __init__(self, problems=None, reward="makora", preset="fast", fallback=0.0, token=None,
                 max_body=8 << 20, max_queue=1024, max_batch=1024, collectors=4, gpus=None,
                 require_gpu=False, pool_options=None, drain_timeout=600.0, result_grace=30.0,
                 max_tasks=100_000, kernelbench=None, cache_dir=None):
        self.problems = list(problems) if problems else default_problem_dirs()
        self.reward, self.preset, self.fallback = reward, preset, fallback
        self.token = token if token is not None else (os.environ.get("KREWARD_TOKEN") or None)
        self.max_body, self.max_queue, self.max_batch = max_body, max_queue, max_batch
        self.collectors, self.gpus, self.require_gpu = collectors, gpus, require_gpu
        self.pool_options = dict(pool_options or {})
        self.drain_timeout, self.result_grace = drain_timeout, result_grace
        self.max_tasks = max_tasks
        # the ModelNew scheduler's options (kernelbench/lanes.py make_scheduler)
        self.kernelbench = dict(kernelbench or {})
        self.cache_dir = cache_dir


class Server:
    def __init__(self, options, pool=None):
        self.options = o = options
        self.preset, self.fallback = o.preset, o.fallback
        self.ctx = Context(no_device=True)
        self.pool = self.rail = None
        try:
            self.registry = Registry(self.ctx, o.problems)
            self.rewards = Rewards(self.ctx, o.reward)
            self.pool = pool or self._start_pool()
            self.rail = Rail(self.pool, lambda: make_scheduler(o.kernelbench, o.cache_dir))
            self.engine = Engine(self.rail, max_queue=o.max_queue, collectors=o.collectors)
        except BaseException:
            self._free()
            raise
        self.tasks = TaskStore(o.max_tasks)
        self.compile_only = self.pool.status().get("gpus", 0) == 0

    def _start_pool(self):
        o = self.options
        try:
            return Pool(gpus=o.gpus, **o.pool_options)
        except KrewardError as e:
            if e.code != Status.ENODEVICE or o.gpus is not None or o.require_gpu:
                raise
            warnings.warn(f"kreward serve: {e.message}: compile checks only (candidates end "
                          "not_run and score the fallback)", RuntimeWarning, stacklevel=2)
            return Pool(gpus="none", **o.pool_options)

    def close(self):
        """Every accepted job gets its report (the pool's error report for
        those still pending), then the pool and context are freed."""
        if self.pool is not None:
            self.engine.close()
        self._free()

    def _free(self):
        if self.rail is not None:
            self.rail.close()
        elif self.pool is not None:
            self.pool.close()
        self.ctx.close()
