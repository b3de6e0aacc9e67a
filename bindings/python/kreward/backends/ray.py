"""kreward on a Ray cluster: one actor per GPU (num_gpus=1), each owning a
local kreward.Pool on the GPU Ray gave it, and compile actors on CPUs, behind
the Evaluator's methods (evaluate, evaluate_completion, evaluate_batch,
evaluate_async, score_of, close).

    pool = kreward.backends.ray.RayPool.from_cluster()   # ray.init(address="auto")
    reports = pool.evaluate_batch(problems, completions=texts)

Ray places the actors and restarts them; kreward schedules nothing across
machines itself. A batch is cut into chunks; a chunk goes first to a
compile actor (NVRTC, the launch plan and admissibility on a CPU: a
candidate that fails there never occupies a GPU), and the candidates that
compiled go on to a GPU actor. Without GPU actors (a CPU-only cluster, CI)
the compile actors' reports (not_run) are final.

Faults: an actor that dies (its node lost, killed) is restarted by Ray
(max_restarts); the chunks it held are resubmitted to the live actors, up
to `max_attempts` times, after which each of their jobs gets a report with
verdict error: no job goes without a report. A candidate's own fault
costs a worker process inside the actor's pool, never the actor.

Problems travel as portable specs (a registered name, or JSON with the
reference inlined; kreward.problem_spec), rewards as a preset name or
JSON configuration: the actors resolve them (kreward.serve's registry and
rewards), so a golden problem (a Python callback) cannot be used here."""
import itertools
import json
import math
import os
import tempfile
import threading
import time

from ..completion import completion_text, extract_code
from ..problem_spec import portable
from ..problems import KERNELBENCH, ProblemError, looks_like_kernelbench
from ..problems import kind_of as _kind_of
from ..report_data import ReportData
from .remote import RemoteBackend

try:
    import ray
except ImportError:  # reported when a RayPool is made
    ray = None


class _Resolver:
    """The server-side half of a job: problems and rewards by spec, and the
    rail both kinds run on (kreward/rail.py: the actor's pool, and its
    ModelNew scheduler on the GPU Ray gave it)."""

    def __init__(self, problems, reward, preset, gpus, pool_options, kernelbench=None):
        from ..context import Context
        from ..kernelbench.lanes import make_scheduler
        from ..pool import Pool
        from ..rail import Rail
        from ..serve.problems import Registry
        from ..serve.rewards import Rewards
        from ..serve.server import default_problem_dirs
        self.ctx = Context(no_device=True)
        self.registry = Registry(self.ctx, problems or default_problem_dirs())
        self.rewards = Rewards(self.ctx, reward)
        self.preset = preset
        # one cache per node: the GPU actors find what the compile actors built
        pool_options.setdefault("cache_dir", os.path.join(tempfile.gettempdir(),
                                                          f"kreward-ray-cache-{os.getuid()}"))
        self.pool = Pool(gpus=gpus, **pool_options)
        cache = pool_options["cache_dir"]
        self.rail = Rail(self.pool, lambda: make_scheduler(kernelbench, cache))

    def run(self, specs):
        """JSON reports for job specs (dicts of kreward.serve.jobs.make)."""
        from ..serve import jobs
        from ..serve.engine import Engine
        built = [jobs.make(self, s) for s in specs]
        todo = [i for i, j in enumerate(built) if j.source is not None]
        reports = self.rail.evaluate_batch([built[i].submit_args() for i in todo])
        out = [None] * len(built)
        for i, r in zip(todo, reports):
            out[i] = r.to_json()
            r.close()
        for i, j in enumerate(built):
            if out[i] is None:
                out[i] = Engine._no_code(j)
        return out

    def status(self):
        return self.rail.status()["pool"]


class _Actor:
    """A Ray actor's body (wrapped by ray.remote in RayPool)."""

    def __init__(self, problems, reward, preset, gpus, pool_options, kernelbench=None):
        self.r = _Resolver(problems, reward, preset, gpus, pool_options, kernelbench)

    def run(self, specs):
        return self.r.run(specs)

    def status(self):
        return dict(self.r.status(), pid=os.getpid())


def kind_of(spec):
    """A spec's kind; "kreward" for what cannot be told (the actor says
    what is wrong with it)."""
    try:
        return _kind_of(spec)
    except ProblemError:
        return "kreward"


def _error(message):
    return ('{"format": 1, "verdict": "error", "flags": [], "metrics": {}, "texts": '
            '{"message": ' + json.dumps(message) + "}}")


class RayPool(RemoteBackend):
    """gpu_actors: one per GPU to use (None: every GPU of the cluster);
    compile_actors: CPU actors for the compile stage (None: one per four
    cluster CPUs, at most 32; 0: GPU actors compile); chunk: jobs per actor
    call; reward, preset, fallback: as for Evaluator (reward: a preset or
    JSON config); problems: problem directories on the nodes (default the
    bundled suite); max_restarts: Ray's, per actor (-1: forever);
    max_attempts: how often a chunk is resubmitted after its actor died;
    pool_options: kreward.Pool options for every actor's pool; kernelbench:
    the ModelNew scheduler's options for every actor (kernelbench/lanes.py
    make_scheduler; default: the GPU Ray gave the actor).

    KernelBench problems (a .py path, the file's text, a name registered in
    the nodes' problem directories) go to the GPU actors directly (there is
    nothing to compile on a CPU first), or, on a cluster without GPU actors,
    to the compile actors, which evaluate them only where `kernelbench`
    names devices (["cpu"] in tests) and otherwise answer error (not
    judged)."""

    def __init__(self, gpu_actors=None, compile_actors=None, chunk=8, reward="makora",
                 preset="fast", fallback=None, problems=None, max_restarts=-1, max_attempts=3,
                 pool_options=None, actor_concurrency=4, kernelbench=None):
        if ray is None:
            raise ImportError("kreward.backends.ray needs ray (pip install ray, or pip install 'kreward[ray]')")
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None)
        res = ray.cluster_resources()
        if gpu_actors is None:
            gpu_actors = int(res.get("GPU", 0))
        if compile_actors is None:
            compile_actors = max(1, min(32, int(res.get("CPU", 1)) // 4))
        if gpu_actors == 0 and compile_actors == 0:
            raise ValueError("a RayPool needs GPU actors or compile actors")
        self.fallback, self.chunk, self.max_attempts = fallback, chunk, max_attempts
        self._defaults = {"reward": reward, "preset": preset}
        self.reward_spec = reward
        pool_options = dict(pool_options or {})
        args = (problems, reward, preset)
        opts = dict(max_restarts=max_restarts, max_task_retries=0,
                    max_concurrency=actor_concurrency)
        remote = ray.remote(_Actor)
        # a compile actor's pool: compile-only, one compile worker on its one CPU
        self.compile = [remote.options(num_cpus=1, **opts).remote(
            *args, "none", dict(pool_options, compile_workers=1), kernelbench)
            for _ in range(compile_actors)]
        # a GPU actor sees one device (Ray sets CUDA_VISIBLE_DEVICES): its pool takes it
        self.gpu = [remote.options(num_gpus=1, num_cpus=1, **opts).remote(
            *args, None, pool_options, kernelbench) for _ in range(gpu_actors)]
        self._turn = {id(self.compile): itertools.count(), id(self.gpu): itertools.count()}
        self._lock = threading.Lock()
        self.resubmitted = 0
        # every actor up (and its pool started) before the first job
        ray.get([a.status.remote() for a in self.compile + self.gpu])

    @classmethod
    def from_cluster(cls, address="auto", **kw):
        """A RayPool over a running cluster (ray.init(address)): one actor
        per GPU the cluster has, compile actors on its CPUs."""
        if ray is None:
            raise ImportError("kreward.backends.ray needs ray (pip install ray, or pip install 'kreward[ray]')")
        if not ray.is_initialized():
            ray.init(address=address)
        return cls(**kw)

    # ---- dispatch ----
    def _pick(self, actors):
        with self._lock:
            return actors[next(self._turn[id(actors)]) % len(actors)]

    def _stage(self, actors, specs):
        """JSON reports for specs through one kind of actor: chunks spread
        round-robin, a chunk whose actor died resubmitted to the next."""
        if not specs:
            return []
        n = len(specs)
        size = max(1, min(self.chunk, math.ceil(n / len(actors))))
        chunks = {}
        for start in range(0, n, size):
            ref = self._pick(actors).run.remote(specs[start:start + size])
            chunks[ref] = (start, 1)
        out = [None] * n
        while chunks:
            done, _ = ray.wait(list(chunks), num_returns=1)
            ref = done[0]
            start, attempt = chunks.pop(ref)
            part = specs[start:start + size]
            try:
                out[start:start + len(part)] = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                if attempt >= self.max_attempts:
                    msg = (f"the actor evaluating this job died {attempt} times "
                           f"({type(e).__name__})")
                    out[start:start + len(part)] = [_error(msg)] * len(part)
                    continue
                with self._lock:
                    self.resubmitted += 1
                chunks[self._pick(actors).run.remote(part)] = (start, attempt + 1)
        return out

    def _spec(self, problem, source, completion, name="candidate.cu"):
        kind = kind_of(problem)
        shown = ()
        if kind == KERNELBENCH:
            problem = portable(problem)
            shown = (problem,) if looks_like_kernelbench(problem) else ()
        if source is None and completion is not None:
            source = extract_code(completion_text(completion), sources=shown, kind=kind)
        spec = dict(self._defaults, problem=portable(problem), name=name)
        if source is None:
            spec["completion"] = ""  # no code: the actor's "no code" report
        else:
            spec["source"] = source
        return spec

    def run_specs(self, specs):
        """JSON reports (text) for job specs, in order: ModelNew candidates
        on the GPU actors (the compile actors without any), kreward ones
        through the compile actors first."""
        kb = [i for i, s in enumerate(specs) if kind_of(s["problem"]) == KERNELBENCH]
        rest = [i for i in range(len(specs)) if i not in set(kb)]
        out = [None] * len(specs)
        if kb:
            for i, t in zip(kb, self._stage(self.gpu or self.compile, [specs[i] for i in kb])):
                out[i] = t
        for i, t in zip(rest, self._run_kreward([specs[i] for i in rest])):
            out[i] = t
        return out

    def _run_kreward(self, specs):
        if not specs:
            return []
        if not self.compile:
            return self._stage(self.gpu, specs)
        first = self._stage(self.compile, specs)
        if not self.gpu:
            return first
        # compiled and admissible: not_run on a CPU; the GPU actors judge those
        todo = [i for i, t in enumerate(first) if json.loads(t)["verdict"] == "not_run"]
        for i, t in zip(todo, self._stage(self.gpu, [specs[i] for i in todo])):
            first[i] = t
        return first

    # ---- the Evaluator's methods ----
    def evaluate(self, problem, source=None, completion=None, name="candidate.cu"):
        return ReportData(self.run_specs([self._spec(problem, source, completion, name)])[0])

    def evaluate_batch(self, problems, sources=None, completions=None):
        problems, items, are_sources = self._batch_items(problems, sources, completions)
        specs = [self._spec(p, s, None) if are_sources else self._spec(p, None, s)
                 for p, s in zip(problems, items)]
        return [ReportData(t) for t in self.run_specs(specs)]

    def status(self):
        return {"gpu": ray.get([a.status.remote() for a in self.gpu]),
                "compile": ray.get([a.status.remote() for a in self.compile]),
                "resubmitted": self.resubmitted}

    def close(self):
        for a in self.compile + self.gpu:
            ray.kill(a, no_restart=True)
        self.compile, self.gpu = [], []
        self._close_no_code()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_alive(actor, timeout=60.0):
    """Waits until an actor answers again (after Ray restarted it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ray.get(actor.status.remote(), timeout=5)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
