"""The value probe's get_inputs by prefix (kernelbench/prefix_inputs.py): a
large tensor drawn by torch.rand/randn/randint is made only as far as the
statistics read it, and only where its first elements follow from its
operands' first elements; the probe's answer is the one the whole tensor
gave. In-process with a small STATS_LIMIT (the files are ours), and one
probe process for the requests the importer skips (probe.py unless_ok)."""
import pytest

torch = pytest.importorskip("torch", reason="the KernelBench importer needs torch (CPU is enough)")

from kreward.kernelbench import importer, probe  # noqa: E402
from kreward.kernelbench.prefix_inputs import NotPrefix, Prefixes  # noqa: E402

LIMIT = 4096  # elements the statistics read here (2^26 in the probe): a multiple of 16
HEAD = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, *xs):\n"
        "        return xs[0] * 2\nB = 64\nD = 1024\ndef get_init_inputs():\n    return []\n"
        "def get_inputs():\n")
FOLLOWED = {  # the first elements of each input are the operations on the first drawn
    "rand_affine": "    return [torch.rand(B, D) * 2 - 1]",
    "randn_inplace": "    return [torch.randn(B, D).mul_(3).add_(1)]",
    "randint_reshaped": "    return [torch.randint(0, 7, (B * D,)).reshape(B, D).float()]",
    "scale_drawn_once": "    s = torch.rand(())\n    return [torch.rand(B, D) * s, torch.rand(B, D)]",
    "small_beside": "    return [torch.rand(B, D), torch.randint(0, 2, (B,)).float() * 2 - 1]",
}
WHOLE = {  # a result's first elements depend on more than the operands' first elements
    "index_write": "    x = torch.rand(B, D)\n    x[0, 5] = 7.0\n    return [x]",
    "normalised": "    x = torch.rand(B, D)\n    return [x / x.sum()]",
    "broadcast_row": "    return [torch.rand(B, D) + torch.arange(D)]",
    "cumsum": "    return [torch.rand(B, D).cumsum(1)]",
    "transposed": "    return [torch.rand(B, D).t().contiguous() * torch.arange(B * D).reshape(D, B)]",
    "caught_refusal": ("    x = torch.rand(B, D)\n    try:\n        x.sum()\n    except BaseException:\n"
                       "        pass\n    return [x * 2]"),
}


def _value_probe(path, monkeypatch, by_prefix):
    """probe.probe's value request with STATS_LIMIT = LIMIT: (its answer,
    whether get_inputs ran by prefix)."""
    monkeypatch.setattr(probe, "STATS_LIMIT", LIMIT)
    took = {}
    real_inputs_by_prefix = probe._inputs_by_prefix

    def spy(mod):
        if not by_prefix:  # today's way: get_inputs whole
            took["prefix"] = False
            return list(mod.get_inputs()), None
        inputs, mode = real_inputs_by_prefix(mod)
        took["prefix"] = mode is not None
        return inputs, mode

    monkeypatch.setattr(probe, "_inputs_by_prefix", spy)
    return probe.probe(str(path), {"overrides": {}, "real": True}), took["prefix"]


@pytest.mark.parametrize("name", sorted(FOLLOWED))
def test_the_prefix_gives_the_whole_tensors_statistics(tmp_path, monkeypatch, name):
    """torch's CPU generator draws a tensor's elements in order: the first
    tensor's prefix is the whole tensor's first elements, bit for bit, so
    the statistics are equal; a later draw is a fresh one of the same
    distribution (the generator advanced by the prefix, not the whole)."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + FOLLOWED[name] + "\n")
    fast, by_prefix = _value_probe(path, monkeypatch, True)
    whole, _ = _value_probe(path, monkeypatch, False)
    assert by_prefix
    assert [(d["shape"], d["dtype"]) for d in fast["inputs"]] == [(d["shape"], d["dtype"])
                                                                  for d in whole["inputs"]]
    assert fast["inputs"][0]["stats"] == whole["inputs"][0]["stats"]
    for a, b in zip(fast["inputs"][1:], whole["inputs"][1:]):
        assert a["stats"]["min"] == pytest.approx(b["stats"]["min"], abs=0.01)
        assert a["stats"]["max"] == pytest.approx(b["stats"]["max"], abs=0.01)
        assert a["stats"]["mean"] == pytest.approx(b["stats"]["mean"], abs=0.5)


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_what_the_prefix_cannot_follow_is_made_whole(tmp_path, monkeypatch, name):
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + WHOLE[name] + "\n")
    fast, by_prefix = _value_probe(path, monkeypatch, True)
    whole, _ = _value_probe(path, monkeypatch, False)
    assert not by_prefix
    assert fast["inputs"] == whole["inputs"]
    if name == "index_write":
        assert fast["inputs"][0]["stats"]["max"] == 7.0


def test_only_large_draws_are_stood_in_for():
    with torch.device("cpu"), Prefixes(LIMIT) as mode:
        small = torch.rand(LIMIT)
        large = torch.randn(LIMIT + 1)
        y = large * 2
    assert small.device.type == "cpu" and mode.prefix(small) is None
    assert large.device.type == "meta" and y.shape == (LIMIT + 1,)
    assert torch.equal(mode.prefix(y), mode.prefix(large) * 2)
    with pytest.raises(NotPrefix), Prefixes(LIMIT) as mode:
        torch.rand(LIMIT + 1).sum()
    assert "sum" in mode.failed


def test_a_fallback_request_runs_only_where_its_first_choice_failed(tmp_path):
    path = tmp_path / "f.py"
    path.write_text(HEAD + "    return [torch.rand(B, D)]\n")
    res = importer.run_probes(str(path), [
        {"overrides": {}}, {"overrides": {"B": 8}, "unless_ok": 0},
        {"overrides": {"nope": 3}}, {"overrides": {"B": 8}, "unless_ok": 2}])
    assert [r["ok"] for r in res] == [True, False, False, True]
    assert res[1].get("skipped") and not res[2].get("skipped")
    assert res[3]["inputs"][0]["shape"] == [8, 1024]
