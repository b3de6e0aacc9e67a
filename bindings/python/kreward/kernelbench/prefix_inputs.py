"""get_inputs at the file's own sizes, its large random tensors made only
as far as the value probe reads them (probe.py, the "real" request).

The value probe's evidence is the statistics of the first STATS_LIMIT
(2^26) elements of each input, as the file made it at its own sizes.
Making upstream level 1 inputs whole (4096 x 393216 floats: 6.4 GB, each
page touched once) took 18-38 s of an import on 2 cores, for elements
nothing reads. So while get_inputs runs, a torch function mode
(Prefixes) stands in for a tensor of more than `limit` elements drawn by
torch.rand, torch.randn or torch.randint: a meta tensor of its full shape
(what get_inputs and the probe see: shape, dtype) and, beside it, its
first `limit` elements in flat order, drawn by the same sampler (rand is
uniform_, randn normal_, randint random_(low, high): torch's own
definitions). An operation on such a tensor is followed only where the
first elements of its result are the operation on the first elements of
its operands:
- elementwise operations (ELEMENTWISE) whose tensor operands are tracked
  tensors of the result's shape, contiguous, or 0-dimensional tensors and
  numbers (a scale drawn by torch.rand(()): the same for every element);
- reshapes of a contiguous tensor to a contiguous one (flat order kept);
- shape and dtype queries, answered by the meta tensor (the CPU's answer).
Anything else on a tracked tensor (a sum, a sort, a transpose, indexing,
an in-place write by index, its device, a custom generator) raises
NotPrefix, and the probe runs get_inputs again the ordinary way, whole on
the CPU: today's evidence, at today's cost. So the statistics are of the
same elements, computed by the same operations, as from the whole tensor.
The first tensor drawn is the whole one's first elements bit for bit
(torch's CPU generator draws a tensor's elements in order: the tests check
it); a later one is a fresh draw of the same distribution, the generator
having advanced by a prefix and not a whole tensor, which no honest file
can depend on. A file that tells the
meta stand-in apart (its type, a failure it catches) and changes its
values so could as well have changed the elements past the first 2^26,
which no probe ever read."""
import torch
from torch.overrides import TorchFunctionMode

_ARITHMETIC = (
    "add sub subtract rsub mul multiply div divide true_divide floor_divide neg negative abs "
    "absolute pow square sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan tanh sigmoid "
    "relu floor ceil round trunc frac sign sgn clamp clamp_min clamp_max clip reciprocal fmod "
    "remainder maximum minimum where lerp erf erfc erfinv atan asin acos sinh cosh asinh acosh "
    "atanh nan_to_num heaviside lt le gt ge eq ne less less_equal greater greater_equal "
    "not_equal logical_not logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
    "bitwise_not").split()
_DUNDER = ("add radd sub rsub mul rmul truediv rtruediv div floordiv rfloordiv mod rmod pow rpow "
           "neg abs lt le gt ge eq ne and rand or ror xor rxor invert").split()
_CASTS = "float double half bfloat16 int long short char byte bool to type_as".split()
# the result's element i is the operation on the operands' elements i
ELEMENTWISE = frozenset(_ARITHMETIC + [n + "_" for n in _ARITHMETIC] + _CASTS +
                        [f"__{n}__" for n in _DUNDER] + [f"__i{n}__" for n in _DUNDER])
# a contiguous tensor to a contiguous one of its elements in the same flat order
REFLAT = frozenset("reshape view flatten unsqueeze squeeze contiguous clone detach view_as "
                   "reshape_as ravel".split())
# what a meta tensor answers as the CPU tensor would
QUERIES = frozenset("shape dtype ndim size dim numel nelement ndimension __len__ element_size "
                    "is_floating_point is_complex is_contiguous layout requires_grad".split())
SAMPLERS = {torch.rand: "rand", torch.randn: "randn", torch.randint: "randint"}


class NotPrefix(BaseException):
    """get_inputs did something to a tracked tensor whose result's first
    elements are not the operation on its operands' first elements. A
    BaseException: a file's `except Exception` does not swallow it (and
    Prefixes.failed says so even where a bare except does)."""


def _name(func):
    name = getattr(func, "__name__", "")
    if name == "__get__":  # a property: Tensor.shape's getter
        return getattr(getattr(func, "__self__", None), "__name__", "")
    return name


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _leaves(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _leaves(y)
    else:
        yield x


def _swap(x, table):
    if isinstance(x, (list, tuple)):
        return type(x)(_swap(y, table) for y in x)
    if isinstance(x, dict):
        return {k: _swap(v, table) for k, v in x.items()}
    return table.get(id(x), x) if isinstance(x, torch.Tensor) else x


def _randint_range(args, kwargs):
    """(low, high) of a torch.randint call: randint(high, size) or
    randint(low, high, size), by position or keyword."""
    given = len(args) + sum(k in kwargs for k in ("low", "high", "size"))
    names = ("low", "high", "size") if given == 3 else ("high", "size")
    bound = dict(zip(names, args), **{k: kwargs[k] for k in ("low", "high") if k in kwargs})
    return int(bound.get("low", 0)), int(bound["high"])


class Prefixes(TorchFunctionMode):
    """The mode get_inputs runs under (the module docstring)."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit
        self.known = {}      # id(meta tensor) -> (meta tensor, its first `limit` elements)
        self.failed = None   # why get_inputs must run again whole

    def prefix(self, x):
        """The first elements of a tracked tensor, or None."""
        entry = self.known.get(id(x)) if isinstance(x, torch.Tensor) else None
        return entry[1] if entry is not None and entry[0] is x else None

    def _refuse(self, why):
        self.failed = self.failed or why
        raise NotPrefix(why)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.failed:  # after a refusal the values are no longer followed
            self._refuse(self.failed)
        if func in SAMPLERS:
            return self._sample(func, args, kwargs)
        tracked = [x for x in _leaves((args, kwargs)) if self.prefix(x) is not None]
        if not tracked:
            return func(*args, **kwargs)
        name = _name(func)
        if name in QUERIES:
            return func(*args, **kwargs)
        if "out" in kwargs or name not in ELEMENTWISE | REFLAT:
            self._refuse(f"{name or func!r} on a tensor of more than {self.limit} elements")
        try:
            return self._follow(func, name, args, kwargs, tracked)
        except NotPrefix:
            raise
        except Exception as e:  # noqa: BLE001 - the whole run raises it again, or not
            self._refuse(f"{name} failed on the stand-in: {type(e).__name__}")

    def _sample(self, func, args, kwargs):
        device = kwargs.get("device")
        if (kwargs.get("generator") is not None or kwargs.get("out") is not None
                or kwargs.get("layout") not in (None, torch.strided)
                or (device is not None and torch.device(device).type != "cpu")):
            return func(*args, **kwargs)
        full = func(*args, **dict(kwargs, device="meta"))
        if full.numel() <= self.limit:
            return func(*args, **kwargs)  # made whole, as the probe always did
        first = torch.empty(self.limit, dtype=full.dtype, device="cpu")
        kind = SAMPLERS[func]
        if kind == "rand":
            first.uniform_(0, 1)
        elif kind == "randn":
            first.normal_(0, 1)
        else:
            first.random_(*_randint_range(args, kwargs))
        self.known[id(full)] = (full, first)
        return full

    def _follow(self, func, name, args, kwargs, tracked):
        for x in _leaves((args, kwargs)):
            if isinstance(x, torch.Tensor) and self.prefix(x) is None and x.dim() != 0:
                self._refuse(f"{name} with a tensor of shape {tuple(x.shape)} beside a large one")
        if not all(t.is_contiguous() for t in tracked):
            self._refuse(f"{name} on a non-contiguous view of a large tensor")
        # the meta call gives the result's shape and dtype at full size (0-dim
        # operands on meta too: the same type promotion as on the CPU)
        to_meta = {id(x): x.to("meta") for x in _leaves((args, kwargs))
                   if isinstance(x, torch.Tensor) and self.prefix(x) is None}
        to_meta.update({id(t): t for t in tracked})
        full = func(*_swap(args, to_meta), **_swap(kwargs, to_meta))
        firsts = {id(t): self.prefix(t) for t in tracked}
        if name in REFLAT:
            if not (isinstance(full, torch.Tensor) and full.is_contiguous()
                    and full.numel() == tracked[0].numel() and len(tracked) == 1):
                self._refuse(f"{name} to a non-contiguous layout")
            first = firsts[id(tracked[0])]
            first = first.clone() if name == "clone" else first
        else:
            if not (isinstance(full, torch.Tensor) and full.is_contiguous()
                    and all(t.shape == full.shape for t in tracked)):
                self._refuse(f"{name} broadcasts a large tensor")
            first = func(*_swap(args, firsts), **_swap(kwargs, firsts))
            if not (isinstance(first, torch.Tensor) and first.shape == (self.limit,)
                    and first.dtype == full.dtype):
                self._refuse(f"{name} did not keep the elements' order")
        self.known[id(full)] = (full, first)
        return full
