"""Knob spaces: named knobs, each with a finite list of values, and
constraints over knobs and problem dims that every configuration must meet
(e.g. "BM % TM == 0", "N % BLOCK == 0"). An action is one index per knob
(a MultiDiscrete action); an assignment is {knob: value}."""
import itertools
import random

from . import expr

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class KnobSpace:
    """knobs: {name: [values]} (order kept: it is the action's order and
    the grid's); values are ints, bools or strings (strings only for CUDA
    defines that are not used in plan expressions). constraints: expression
    strings over knobs and dims (see kreward.tune.expr) or callables
    f(assignment, dims) -> bool, each checked for every problem case."""

    def __init__(self, knobs, constraints=()):
        if not knobs:
            raise ValueError("a knob space needs at least one knob")
        self.knobs = {}
        for name, values in dict(knobs).items():
            if not name or not set(name) <= _NAME_CHARS or name[0].isdigit():
                raise ValueError(f"knob name {name!r}: an identifier")
            values = list(values)
            if not values:
                raise ValueError(f"knob {name!r} has no values")
            if len(set(map(repr, values))) != len(values):
                raise ValueError(f"knob {name!r} lists a value twice: {values}")
            for v in values:
                if not isinstance(v, (int, str)):  # bool is an int
                    raise TypeError(f"knob {name!r}: value {v!r} is not an int, bool or str")
            self.knobs[name] = values
        self.constraints = list(constraints)
        for c in self.constraints:
            if isinstance(c, str):
                expr.parse(c)
            elif not callable(c):
                raise TypeError(f"a constraint is an expression string or a callable, not {c!r}")

    @property
    def names(self):
        return list(self.knobs)

    @property
    def nvec(self):
        """Values per knob: the MultiDiscrete action space's nvec."""
        return [len(v) for v in self.knobs.values()]

    @property
    def size(self):
        n = 1
        for k in self.nvec:
            n *= k
        return n

    def decode(self, action):
        """{knob: value} for an action (one index per knob)."""
        idx = [int(i) for i in action]
        if len(idx) != len(self.knobs):
            raise ValueError(f"an action has {len(self.knobs)} indices, got {len(idx)}")
        out = {}
        for (name, values), i in zip(self.knobs.items(), idx):
            if not 0 <= i < len(values):
                raise ValueError(f"knob {name!r}: index {i} outside [0, {len(values)})")
            out[name] = values[i]
        return out

    def encode(self, assignment):
        """The action (indices) of an assignment."""
        missing = set(self.knobs) - set(assignment)
        extra = set(assignment) - set(self.knobs)
        if missing or extra:
            raise ValueError(f"assignment {assignment}: missing {sorted(missing)}, unknown "
                             f"{sorted(extra)}")
        out = []
        for name, values in self.knobs.items():
            v = assignment[name]
            matches = [i for i, x in enumerate(values) if x == v and type(x) is type(v)]
            if not matches:
                raise ValueError(f"knob {name!r}: {v!r} is not one of {values}")
            out.append(matches[0])
        return out

    def key(self, assignment):
        """A hashable canonical form of an assignment."""
        return tuple(self.encode(assignment))

    def violated(self, assignment, cases=({},)):
        """None when every constraint holds for every case (dims dicts);
        else the first that does not, as a sentence."""
        for dims in cases:
            env = {**dims, **{k: int(v) for k, v in assignment.items() if not isinstance(v, str)}}
            for c in self.constraints:
                try:
                    ok = expr.evaluate(c, env) if isinstance(c, str) else c(dict(assignment), dict(dims))
                except expr.ExprError as e:
                    return f"constraint {c}: {e}"
                if not ok:
                    where = f" (case {dims})" if dims else ""
                    name = c if isinstance(c, str) else getattr(c, "__name__", repr(c))
                    return f"constraint {name} does not hold{where}"
        return None

    def __iter__(self):
        """Every assignment, in grid order (the last knob varies fastest)."""
        names = self.names
        for combo in itertools.product(*self.knobs.values()):
            yield dict(zip(names, combo))

    def valid(self, cases=({},)):
        """Every assignment meeting the constraints, in grid order."""
        return [a for a in self if self.violated(a, cases) is None]

    def sample(self, rng=None):
        rng = rng or random.Random()
        return {name: rng.choice(values) for name, values in self.knobs.items()}

    def __repr__(self):
        return f"KnobSpace({self.knobs}, {len(self.constraints)} constraints, {self.size} points)"
