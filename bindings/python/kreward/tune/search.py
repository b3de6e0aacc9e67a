"""Search strategies over a TuneEnv, and what a tuning run returns.

Budget: `max_evals` new configurations judged (each costs a compile at
least; those that pass the checks, a GPU evaluation). Memoised repeats and
assignments a declared constraint rules out (no compile) are free. random draws configurations that meet the constraints without
replacement; grid walks them in grid order (the last knob fastest);
ppo (ppo.py) learns a policy. Each submits `batch_size` configurations per
step: one batch to the backend, spread over its GPUs."""
import json
import random
import time

from .env import better


class TuneResult:
    """best: the best configuration's knobs (None when none passed);
    best_result: its Result (report, speedup, reward); evaluations: new
    configurations judged (compiled); gpu_runs: how many of them a backend ran;
    refused: how many the checks refused; wall_s: the whole run;
    history: every step's Result in order; source: the best CUDA variant's
    source (None for Triton or when none passed). to_dict / to_json: all
    of it as JSON (what `kreward report FILE --html` reads); to_html: the
    run as a page (kreward.pages)."""

    def __init__(self, strategy, env, history, wall_s, gpu_runs, gpu_wall_s):
        self.strategy = strategy
        self.history = list(history)
        fresh = [r for r in self.history if r.counted]
        self.evaluations = len(fresh)
        self.gpu_runs = gpu_runs
        self.gpu_wall_s = gpu_wall_s
        self.refused = sum(1 for r in fresh if r.invalid is not None)
        self.wall_s = wall_s
        self.best_result = None
        for r in self.history:
            if better(r, self.best_result):
                self.best_result = r
        self.best = dict(self.best_result.assignment) if self.best_result else None
        self.source = None
        if self.best is not None and hasattr(env.kernel, "render"):
            self.source = env.kernel.render(self.best)
        space = env.space
        self.kernel_name = getattr(env.kernel, "name", None)
        self.problem = _problem_name(getattr(env.kernel, "problem", None))
        self.knobs = {k: list(v) for k, v in space.knobs.items()}
        self.constraints = [c for c in space.constraints if isinstance(c, str)]
        self.space_size = space.size

    @property
    def report(self):
        return self.best_result.report if self.best_result else None

    @property
    def speedup(self):
        return self.best_result.speedup if self.best_result else None

    @property
    def reward(self):
        return self.best_result.reward if self.best_result else None

    @property
    def wall_per_eval_s(self):
        """Wall time of the run per new configuration judged."""
        return self.wall_s / self.evaluations if self.evaluations else None

    @property
    def wall_per_gpu_eval_s(self):
        """Wall time of the backend's batches per configuration it ran."""
        return self.gpu_wall_s / self.gpu_runs if self.gpu_runs else None

    def summary(self):
        return {"strategy": self.strategy, "best": self.best, "speedup": self.speedup,
                "reward": self.reward, "evaluations": self.evaluations,
                "gpu_runs": self.gpu_runs, "refused": self.refused, "wall_s": self.wall_s,
                "wall_per_eval_s": self.wall_per_eval_s,
                "wall_per_gpu_eval_s": self.wall_per_gpu_eval_s}

    def to_dict(self):
        """The run as plain data: summary(), the knob space, the best
        configuration's report and source, and every step (knobs, verdict,
        speedup and its interval, reward, time, whether it ran, was refused
        or came from the memo, its wall time and message)."""
        d = {"format": TUNE_FORMAT, "version": 1, "kernel": self.kernel_name,
             "problem": self.problem, "knobs": self.knobs, "constraints": self.constraints,
             "space_size": self.space_size, **self.summary(), "source": self.source,
             "best_report": self.report, "history": [_step(r) for r in self.history]}
        return d

    def to_json(self, path=None, indent=None):
        """to_dict() as JSON text; written to `path` too when given."""
        text = json.dumps(self.to_dict(), indent=indent, default=str)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def to_html(self, path, title=None):
        """Writes the run as one HTML page that works offline (kreward.pages:
        the search's progress, the best configuration, every evaluation)."""
        from ..pages import write_tune_page
        write_tune_page(self.to_dict(), path, title=title)

    def __repr__(self):
        return (f"<TuneResult {self.strategy}: best {self.best} speedup {self.speedup} after "
                f"{self.evaluations} evaluations>")


TUNE_FORMAT = "kreward.tune"  # kreward.pages.load reads it back


def _problem_name(problem):
    """A problem for the dump: its path, or its name when given as text."""
    if isinstance(problem, str) and not problem.lstrip().startswith("{"):
        return problem
    if isinstance(problem, str):
        try:
            return json.loads(problem).get("name") or "(a problem given as JSON)"
        except (ValueError, AttributeError):
            return "(a problem given as text)"
    return getattr(problem, "name", None) or (type(problem).__name__ if problem else None)


def _step(r):
    m = (r.report or {}).get("metrics") or {}
    t = (r.report or {}).get("texts") or {}
    return {**r.as_info(), "speedup_low": m.get("speedup_low"),
            "speedup_high": m.get("speedup_high"), "baseline_us": m.get("baseline_us"),
            "message": t.get("message") or t.get("feedback")}


def _ordered(env, strategy, seed):
    order = env.space.valid(env.kernel.cases(env.ctx))
    if strategy == "random":
        random.Random(seed).shuffle(order)
    return order


def run(env, strategy="random", max_evals=32, batch_size=8, seed=0, **options):
    """Tunes with a strategy ("random", "grid", "ppo") for max_evals new
    configurations; returns a TuneResult."""
    if max_evals < 1 or batch_size < 1:
        raise ValueError("max_evals and batch_size are at least 1")
    env.max_evals = max_evals
    env.reset(seed=seed)
    start = len(env.history)
    runs0, gpu0 = env.gpu_runs, env.gpu_wall_s
    t0 = time.perf_counter()
    if strategy in ("random", "grid"):
        order = _ordered(env, strategy, seed)
        i = 0
        while not env.exhausted and i < len(order):
            batch = []
            while i < len(order) and len(batch) < min(batch_size, max_evals - env.evaluations):
                if env.cached(order[i]) is None:
                    batch.append(order[i])
                else:  # judged before (another run on this env): free, so kept in history
                    env.evaluate([order[i]])
                i += 1
            if batch:
                env.step_batch(batch)
    elif strategy == "ppo":
        from .ppo import run_ppo
        run_ppo(env, batch_size=batch_size, seed=seed, **options)
    else:
        raise ValueError(f"strategy {strategy!r}: random, grid or ppo")
    return TuneResult(strategy, env, env.history[start:], time.perf_counter() - t0,
                      env.gpu_runs - runs0, env.gpu_wall_s - gpu0)
