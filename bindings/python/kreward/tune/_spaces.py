"""Gymnasium's Env and spaces when gymnasium is installed; otherwise the
two spaces the tuning environment uses, with the same attributes and
methods (nvec / low, high, shape; sample, contains, seed), so code written
against gymnasium runs either way (the GPU machine has no gymnasium and no
network to install it)."""
import math
import random

try:
    import numpy as np
except ImportError:  # the binding itself needs no numpy
    np = None

try:
    import gymnasium
    from gymnasium import spaces as _gspaces
except ImportError:
    gymnasium = None

HAVE_GYMNASIUM = gymnasium is not None


class _MultiDiscrete:
    def __init__(self, nvec, seed=None):
        self.nvec = list(nvec)
        self.shape = (len(self.nvec),)
        self._rng = random.Random(seed)

    def seed(self, seed=None):
        self._rng = random.Random(seed)
        return [seed]

    def sample(self):
        return [self._rng.randrange(n) for n in self.nvec]

    def contains(self, x):
        x = list(x)
        return len(x) == len(self.nvec) and all(
            float(i).is_integer() and 0 <= int(i) < n for i, n in zip(x, self.nvec))

    def __repr__(self):
        return f"MultiDiscrete({self.nvec})"


class _Box:
    def __init__(self, low, high, shape):
        self.low, self.high, self.shape = low, high, tuple(shape)

    def contains(self, x):
        x = list(x)
        return len(x) == self.shape[0] and all(
            isinstance(v, (int, float)) and not math.isnan(v) and self.low <= v <= self.high
            for v in map(float, x))

    def __repr__(self):
        return f"Box({self.low}, {self.high}, {self.shape})"


def multi_discrete(nvec, seed=None):
    if HAVE_GYMNASIUM:
        return _gspaces.MultiDiscrete(nvec, seed=seed)
    return _MultiDiscrete(nvec, seed)


def box(size):
    if HAVE_GYMNASIUM:
        return _gspaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)
    return _Box(-math.inf, math.inf, (size,))


def vector(values):
    """An observation: a float32 array where numpy exists, else a list."""
    if np is not None:
        return np.asarray(values, dtype=np.float32)
    return [float(v) for v in values]


EnvBase = gymnasium.Env if HAVE_GYMNASIUM else object
