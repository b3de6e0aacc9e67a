"""weight_slots.WeightSlots: a lifted model's fresh weights put into its
module dicts for a timed call (worker.py `go`), with functional_call's
results: tied aliases take the new tensor too, buffers as parameters, and
the model's own tensors come back after the batch, also after a call that
raised."""
import pytest

torch = pytest.importorskip("torch", reason="needs torch")
nn = torch.nn

from kreward.kernelbench.weight_slots import WeightSlots  # noqa: E402


class Tied(nn.Module):
    """An encoder and a decoder sharing one weight, a buffer read in forward."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 6, bias=False)
        self.dec = nn.Linear(6, 6)
        self.dec.weight = self.enc.weight
        self.register_buffer("scale", torch.ones(6))

    def forward(self, x):
        return self.dec(self.enc(x)) * self.scale


def fresh(model, names, seed):
    gen = torch.Generator().manual_seed(seed)
    shapes = dict(model.named_parameters()) | dict(model.named_buffers())
    return {n: torch.randn(shapes[n].shape, generator=gen) for n in names}


def test_the_slots_give_functional_calls_results_aliases_included():
    model = Tied()
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    assert "dec.weight" not in names  # named_parameters leaves the tied alias out
    own = {n: t for n, t in list(model.named_parameters()) + list(model.named_buffers())}
    slots = WeightSlots(model, names)
    x = torch.randn(3, 6)
    with torch.no_grad():
        for seed in range(3):
            state = fresh(model, names, seed)
            want = torch.func.functional_call(model, state, (x,))
            slots.put([state[n] for n in slots.names])
            got = model(x)
            assert torch.equal(got, want), seed
            assert model.dec.weight is state["enc.weight"]  # the alias took it too
        slots.restore()
    assert model.dec.weight is model.enc.weight is own["enc.weight"] and model.scale is own["scale"]


def test_the_models_own_tensors_come_back_after_a_call_that_raised():
    model = Tied()
    names = ["enc.weight", "dec.bias"]
    slots = WeightSlots(model, names)
    before = (model.enc.weight, model.dec.bias)
    state = fresh(model, names, 1)
    slots.put([state[n] for n in names])
    try:
        model(torch.randn(2, 7))  # a wrong shape: raises inside the forward
    except RuntimeError:
        pass
    finally:
        slots.restore()
    assert (model.enc.weight, model.dec.bias) == before
    assert isinstance(model.enc.weight, nn.Parameter)


def test_a_name_the_model_does_not_have_is_refused():
    with pytest.raises(LookupError, match="no parameter or buffer 'enc.nothing'"):
        WeightSlots(Tied(), ["enc.nothing"])
