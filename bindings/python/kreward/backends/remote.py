"""What the two remote backends, backends/http.py's Client (`kreward serve`)
and backends/ray.py's RayPool, share around their own evaluate(problem,
source, completion, name) and evaluate_batch: the rest of the Evaluator
protocol (backends/base.py)."""
import asyncio
import threading

from ..context import Context
from .base import Backend
from .local import no_code_report


class RemoteBackend(Backend):
    """A backend on another machine. The class sets self.fallback
    (score_of's value for an unscored report) and reward_spec: the reward
    it sends with every job (a preset name or a JSON configuration; None:
    the other side's default, makora)."""
    reward_spec = None

    def evaluate_completion(self, problem, completion):
        return self.evaluate(problem, completion=completion)

    async def evaluate_async(self, problem, source=None, completion=None, name="candidate.cu"):
        """evaluate() off the event loop (in a thread: the call blocks)."""
        return await asyncio.to_thread(self.evaluate, problem, source, completion, name)

    def no_code(self, why=None, kind=None):
        """compile_error for a completion without code (the policy's doing):
        there is nothing to send, so it is scored here, with the reward the
        backend sends."""
        lock = self.__dict__.setdefault("_no_code_lock", threading.Lock())
        with lock:
            if "_no_code_reward" not in self.__dict__:
                ctx = Context(no_device=True)
                self._no_code_reward = (ctx, ctx.reward(self.reward_spec or "makora"))
        return no_code_report(self._no_code_reward[1], why, kind)

    def _close_no_code(self):
        ctx_reward = self.__dict__.pop("_no_code_reward", None)
        if ctx_reward is not None:
            ctx_reward[1].close()
            ctx_reward[0].close()

    @staticmethod
    def _batch_items(problems, sources, completions):
        """evaluate_batch's arguments as (problems, items, items_are_sources),
        of one length."""
        problems = list(problems)
        items = list(sources if sources is not None else completions or [])
        if len(items) != len(problems):
            raise ValueError(f"{len(problems)} problems for {len(items)} candidates")
        return problems, items, sources is not None
