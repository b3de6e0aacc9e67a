"""The server's rewards: its default, presets by name, and JSON
configurations sent by clients.

A client's configuration may not load code: "plugins" (shared objects) are
refused, and a string is a preset name or JSON text, never a path (a path
would make the server read its own files). The operator's default reward
(--reward) may be a file and may load plugins."""
import collections
import json
import threading

from .. import constants
from ..openrlhf_answer import score_range
from ..errors import KrewardError


class RewardError(ValueError):
    """A reward the request cannot have (HTTP 400)."""


class Rewards:
    def __init__(self, ctx, default="makora", cache=32):
        self.ctx = ctx
        self.default = ctx.reward(default) if default is not None else None
        self._cache = collections.OrderedDict()
        self._max = cache
        self._lock = threading.Lock()

    def get(self, spec):
        """The kreward.Reward for a request's "reward" field (None: the
        server's default)."""
        if spec is None:
            return self.default
        if isinstance(spec, str) and spec in constants.PRESETS:
            key, config = spec, spec
        else:
            if isinstance(spec, str):
                if not spec.lstrip().startswith("{"):
                    raise RewardError(f"reward {spec!r}: a preset ({', '.join(constants.PRESETS)}) "
                                      "or a JSON configuration object")
                try:
                    spec = json.loads(spec)
                except ValueError as e:
                    raise RewardError(f"reward: malformed JSON: {e}") from e
            if not isinstance(spec, dict):
                raise RewardError("reward: a preset name or a JSON configuration object")
            if "plugins" in spec:
                raise RewardError("reward: a request cannot load plugins; start the server with "
                                  "--reward CONFIG to use them")
            key = config = json.dumps(spec, sort_keys=True)
        with self._lock:
            r = self._cache.get(key)
            if r is not None:
                self._cache.move_to_end(key)
                return r
        try:
            r = self.ctx.reward(config)
        except KrewardError as e:
            raise RewardError(f"reward: {e}") from e
        with self._lock:
            self._cache[key] = r
            while len(self._cache) > self._max:
                # a job in flight keeps its Reward alive: dropping it here is safe
                self._cache.popitem(last=False)
        return r

    def bounds(self, spec):
        """(lowest, highest) the reward of a request's "reward" field pays, from
        its ladder (None without one): how OpenRLHF's scores map it onto
        0..1, as the file adapter does."""
        return score_range(self.get(spec))
