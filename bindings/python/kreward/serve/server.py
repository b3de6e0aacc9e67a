"""What a running `kreward serve` holds: a compile-only context (problems
and rewards; kreward candidates never run in this process), the rail (the
C pool and, from the first KernelBench problem on, the ModelNew scheduler:
ModelNew candidates run in workers, their golden outputs are made here
with the problem's Model), the problem registry, the rewards, the engine
and the task store."""
import os

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


class CompileOnlyRefused(RuntimeError):
    """No GPU worker, and compile-only was not asked for: the server does not
    start."""


class Options:
    """The server's settings (the command line's, docs/serve.md)."""

    def __init__(self, problems=None, reward="makora", preset="fast", token=None,
                 max_body=8 << 20, max_queue=1024, max_batch=1024, collectors=4, gpus=None,
                 require_gpu=False, pool_options=None, drain_timeout=600.0, result_grace=30.0,
                 max_tasks=100_000, kernelbench=None, cache_dir=None, compile_only=False):
        self.problems = list(problems) if problems else default_problem_dirs()
        self.reward, self.preset = reward, preset
        self.token = token if token is not None else (os.environ.get("KREWARD_TOKEN") or None)
        self.max_body, self.max_queue, self.max_batch = max_body, max_queue, max_batch
        self.collectors, self.gpus, self.require_gpu = collectors, gpus, require_gpu
        self.pool_options = dict(pool_options or {})
        self.drain_timeout, self.result_grace = drain_timeout, result_grace
        self.max_tasks = max_tasks
        # asked for by name: serve compile checks only (no GPU worker); every
        # candidate that compiles is answered "not judged", never a reward
        self.compile_only = compile_only
        # the ModelNew scheduler's options (kernelbench/lanes.py make_scheduler)
        self.kernelbench = dict(kernelbench or {})
        self.cache_dir = cache_dir


class Server:
    def __init__(self, options, pool=None):
        self.options = o = options
        self.preset = o.preset
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
        self.mode = "compile-only" if self.compile_only else "gpu"

    def _start_pool(self):
        """The pool: GPU workers, or none when compile-only is asked for by
        name. Without a GPU worker and without that, the server does not
        start: a reward server that cannot judge would answer every
        candidate that compiles as if it were (CompileOnlyRefused)."""
        o = self.options
        if o.compile_only:
            return Pool(gpus="none", **o.pool_options)
        if o.gpus == "none":
            raise CompileOnlyRefused("--gpus none starts no GPU worker: ask for it by name "
                                     "with --compile-only (every candidate that compiles is then "
                                     "answered 'not judged', never a reward)")
        try:
            return Pool(gpus=o.gpus, **o.pool_options)
        except KrewardError as e:
            if e.code != Status.ENODEVICE:
                raise
            raise CompileOnlyRefused(f"no GPU worker can start here ({e.message}): a reward "
                                     "server that cannot judge is refused; run it where a GPU "
                                     "is, or ask for --compile-only by name (candidates that "
                                     "compile are then answered 'not judged')") from e

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
