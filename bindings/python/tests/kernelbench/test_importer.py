"""The KernelBench importer on every problem of examples/kernelbench (CPU:
the probes run torch on the meta device and the CPU), and its refusals."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="the KernelBench importer needs torch (CPU is enough)")

import kreward  # noqa: E402
from kreward.kernelbench import ImportRefused, import_problem  # noqa: E402
from kreward.kernelbench.inputs import _fingerprint, digest, make_inputs  # noqa: E402
from kreward.kernelbench.reference import Reference  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]
CORPUS = sorted((ROOT / "examples" / "kernelbench").glob("level*/*.py"))
REFUSED = {"28_dropout": "not deterministic"}
KB_27 = ROOT / "examples" / "kernelbench" / "level1" / "27_cross_entropy.py"
STRUCTURED = {"17_matmul_symmetric": "symmetric", "18_matmul_lower_triangular": "lower_triangular",
              "26_kldiv": "softmax_last"}
# files whose own inputs let a trivial answer pass (soundness.py): every case
# rescaled, so only ModelNew candidates are evaluated (docs/vetting.md)
RESCALED = {"26_kldiv", "27_cross_entropy", "04_gemm_gelu_softmax"}
_cache = {}


def imported(path):
    if path not in _cache:
        try:
            _cache[path] = import_problem(str(path))
        except ImportRefused as e:
            _cache[path] = e
    return _cache[path]


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 30
    assert {p.parent.name for p in CORPUS} == {"level1", "level2", "level3"}


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_import_corpus(path):
    imp = imported(path)
    if path.stem in REFUSED:
        assert isinstance(imp, ImportRefused)
        assert REFUSED[path.stem] in imp.reason
        return
    assert not isinstance(imp, ImportRefused), getattr(imp, "reason", "")
    assert len(imp.cases) >= 2, imp.notes  # every corpus file names its sizes as constants
    # the library parses the spec: every case's shapes are the probe's
    with kreward.Context(no_device=True) as ctx:
        prob = ctx.parse_problem(imp.spec)
        assert prob.num_cases == len(imp.cases)
        for c, (_, _, probe) in enumerate(imp.cases):
            assert [list(prob.shape(t, c)) for t in range(len(imp.tensors))] == imp.shapes(probe)
    assert all(bool(p.get("rescale")) == (path.stem in RESCALED) for _, _, p in imp.cases)
    if path.stem in RESCALED:
        assert "soundness check's recipe" in imp.device_only_reason
    if path.stem in STRUCTURED:
        assert STRUCTURED[path.stem] in imp.device_only_reason
        assert any(t["transform"] == STRUCTURED[path.stem] for t in imp.tensors)
    if path.stem not in STRUCTURED and path.stem not in RESCALED:
        assert imp.device_only_reason is None


def _lifted(stem):
    path = next(p for p in CORPUS if p.stem == stem)
    imp = imported(path)
    return imp, {t["name"]: imp.shapes(imp.cases[0][2])[i] for i, t in enumerate(imp.tensors)}


def test_parameters_lifted_with_their_shapes():
    imp, shapes = _lifted("19_conv2d")
    assert shapes == {"x": [16, 3, 256, 256], "conv2d_weight": [64, 3, 3, 3], "out": [16, 64, 254, 254]}
    imp, shapes = _lifted("01_mlp")
    assert [n for n, src in imp.summary()["tensors"] if src == "param"] == [
        "network_0_weight", "network_0_bias", "network_2_weight", "network_2_bias",
        "network_4_weight", "network_4_bias"]
    assert shapes["network_4_weight"] == [64, 512]


def test_buffers_that_are_state_stay_in_the_module():
    imp, shapes = _lifted("04_causal_self_attention")
    assert "bias" not in shapes  # the causal mask keeps its meaning only as it is
    assert any("buffer 'bias'" in n for n in imp.notes)
    imp, shapes = _lifted("05_conv_bn_relu")
    assert {"bn_weight", "bn_bias"} <= set(shapes) and "bn_running_mean" not in shapes


def test_scaled_cases_change_sizes_and_say_what_failed():
    imp, _ = _lifted("04_causal_self_attention")
    names = [n for n, _, _ in imp.cases]
    assert names == ["base", "small", "odd"]
    # scaling every constant breaks n_embd % n_head: the note says so, and only the batch scales
    assert any("case 'odd'" in n and "invalid" in n for n in imp.notes)
    assert imp.cases[2][1] == {"batch_size": 9}


def test_integer_inputs_keep_to_each_cases_range():
    """Cross-entropy's targets index num_classes: in a scaled case with 250
    classes they are drawn below 250 (with the file's [0, 999] every
    candidate, and the reference, failed there with an index out of
    bounds); the library problem's one range is valid in every case."""
    imp = imported(KB_27)
    t = next(x for x in imp.tensors if x["name"] == "targets")
    for case, (_, overrides, probe) in enumerate(imp.cases):
        classes = overrides.get("num_classes", 1000)
        init = imp.init_for(case, t)
        assert init["dist"] == "int" and init["low"] == 0 and init["high"] == classes - 1, init
        x = make_inputs([dict(t, shape=imp.shapes(probe)[1], init=init)], 5, "cpu")["targets"]
        assert int(x.max()) < classes
        # the reference runs on them
        Reference(imp, "cpu")(case, {**make_inputs(
            [dict(u, shape=s, init=imp.init_for(case, u)) for u, s in zip(imp.tensors, imp.shapes(probe))
             if u["role"] == "in"], 5, "cpu")})
    spec_init = next(x for x in imp.spec["tensors"] if x["name"] == "targets")["init"]
    assert spec_init["high"] == min(o.get("num_classes", 1000) for _, o, _ in imp.cases) - 1


HINGE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 64
input_shape = (64,)


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]


def get_init_inputs():
    return []
"""


def test_a_file_that_only_works_at_its_own_sizes_says_so_once_per_scale(tmp_path):
    """KernelBench's HingeLoss broadcasts targets of batch_size over the last
    axis, which works only while batch_size equals it: no scaled case, and
    one note for each scale tried (with one constant, scaling "every" and
    "the first" constant are the same probe)."""
    (tmp_path / "hinge.py").write_text(HINGE)
    imp = import_problem(str(tmp_path / "hinge.py"))
    assert [c[0] for c in imp.cases] == ["base"]
    for how in ("small", "odd"):
        assert sum(n.startswith(f"case '{how}'") for n in imp.notes) == 1, imp.notes


READS_VALUES_IN_INIT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        # Swin's drop-path rates: a value read while building (no meta tensor has one)
        self.rates = [x.item() for x in torch.linspace(0, 0.1, 3)]
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x) * (1 + self.rates[1])


batch_size = 64
width = 32


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width]
"""


def test_a_module_that_reads_values_while_built_is_probed_on_the_cpu(tmp_path):
    """KernelBench's SwinMLP and SwinTransformerV2 were refused ("Tensor.item()
    cannot be called on meta tensors"): a module that cannot be built on
    the meta device is built, and run, on the CPU when its inputs are small
    enough, its scaled cases too."""
    (tmp_path / "reads.py").write_text(READS_VALUES_IN_INIT)
    imp = import_problem(str(tmp_path / "reads.py"))
    assert [c[0] for c in imp.cases] == ["base", "small", "odd"], imp.notes
    assert [t["source"] for t in imp.tensors] == ["input", "param", "param", "output"]
    assert imp.cases[0][2]["device"] == "cpu" and "meta" in imp.cases[0][2]["meta_error"]


def test_reference_is_the_model_on_lifted_weights():
    imp, _ = _lifted("01_gemm_bias_relu")
    ref = Reference(imp, "cpu")
    layout = [{"name": t["name"], "shape": s, "dtype": t["dtype"], "init": t["init"]}
              for t, s in zip(imp.tensors, imp.shapes(imp.cases[1][2])) if t["role"] == "in"]
    x = make_inputs(layout, 7, "cpu")
    got = ref(1, x)[0]
    want = torch.relu(x["x"] @ x["linear_weight"].T + x["linear_bias"])
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.equal(make_inputs(layout, 8, "cpu")["x"], x["x"])  # fresh per seed


BAD = {
    "no_inputs.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                     "def get_init_inputs():\n    return []\n", "defines no get_inputs"),
    "object_input.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                        "        return x\ndef get_inputs():\n    return [object()]\n"
                        "def get_init_inputs():\n    return []\n", "only tensors and plain values"),
    "raises.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                  "def get_inputs():\n    raise ValueError('broken on purpose')\n"
                  "def get_init_inputs():\n    return []\n", "broken on purpose"),
    "dict_output.py": ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        return {'y': x}\ndef get_inputs():\n    return [torch.randn(8, 8)]\n"
                       "def get_init_inputs():\n    return []\n", "not a tensor or a tuple"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_refusals_say_why(tmp_path, name):
    src, why = BAD[name]
    (tmp_path / name).write_text(src)
    with pytest.raises(ImportRefused) as e:
        import_problem(str(tmp_path / name))
    assert why in e.value.reason


def deep_model(layers):
    return ("import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range({layers}))\n"
            "    def forward(self, x):\n        for l in self.layers:\n            x = l(x)\n        return x\n"
            "batch = 32\ndef get_inputs():\n    return [torch.randn(batch, 16)]\n"
            "def get_init_inputs():\n    return []\n")


def test_a_deep_model_keeps_its_device_only_form(tmp_path):
    """82 tensors (40 layers' weights and biases lifted, the input, the
    output): over the library's old limit of 64, a library problem now."""
    (tmp_path / "deep.py").write_text(deep_model(40))
    imp = import_problem(str(tmp_path / "deep.py"))
    assert imp.device_only_reason is None
    with kreward.Context(no_device=True) as ctx:
        problem = imp.problem(ctx)
        assert len(problem.tensors()) == 82


def test_more_tensors_than_the_library_takes_have_no_device_only_form(tmp_path):
    (tmp_path / "deeper.py").write_text(deep_model(512))
    imp = import_problem(str(tmp_path / "deeper.py"))
    assert "1026 tensors" in imp.device_only_reason and "at most 1024" in imp.device_only_reason
    with kreward.Context(no_device=True) as ctx, pytest.raises(ImportRefused):
        imp.problem(ctx)


def test_constants_that_drive_nothing_are_reported(tmp_path):
    src = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
           "unused = 1024\ndef get_inputs():\n    return [torch.randn(64, 64)]\n"
           "def get_init_inputs():\n    return []\n")
    (tmp_path / "fixed.py").write_text(src)
    imp = import_problem(str(tmp_path / "fixed.py"))
    assert [n for n, _, _ in imp.cases] == ["base"]
    assert any("do not change" in n for n in imp.notes)


@pytest.mark.parametrize("fn", [digest, lambda x: _fingerprint(x[0])], ids=["digest", "gpu_mixer"])
def test_input_digest_sees_every_change(fn):
    """The digest the caller and the worker compare after a call (and the
    mixer it uses for GPU tensors, run here on the CPU): equal for equal
    tensors, different after one element changes anywhere or two swap."""
    a = torch.randn(1000, 37)
    d = fn([a])
    assert fn([a.clone()]) == d
    for i in (0, 1, 18_500, a.numel() - 1):
        b = a.clone()
        b.view(-1)[i] += 1e-3
        assert fn([b]) != d, i
    b = a.clone()
    flat = b.view(-1)
    flat[0], flat[1] = flat[1].item(), flat[0].item()
    assert fn([b]) != d
    for t in (torch.ones(3, dtype=torch.bool), torch.randn(5, dtype=torch.bfloat16),
              torch.arange(7, dtype=torch.int8)):
        assert fn([t]) == fn([t.clone()])
    assert digest([a.reshape(-1)]) != digest([a])  # the shape counts
    assert digest([torch.empty(0)]) == digest([torch.empty(0)])


SMALL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x))


batch, n = {batch}, 64


def get_inputs():
    return [torch.randn(batch, n)]


def get_init_inputs():
    return [n]
"""


def _same_import(a, b):
    import json
    return (json.dumps(a.tensors, sort_keys=True) == json.dumps(b.tensors, sort_keys=True)
            and [c[:2] for c in a.cases] == [c[:2] for c in b.cases] and a.notes == b.notes)


def test_an_import_is_kept_by_content_and_not_run_again(tmp_path, monkeypatch):
    """The probes' results of a successful import are kept under a key of
    the file's bytes (import_cache.py): the same file imports again
    without any probe (they fail here), another file or another scale
    probes, a kept file that is garbage is ignored and written again, and
    cache_dir=None keeps nothing."""
    from kreward.kernelbench import importer
    path, cache = tmp_path / "small.py", tmp_path / "cache"
    path.write_text(SMALL.format(batch=32))
    first = import_problem(str(path), cache_dir=str(cache))
    assert not first.from_cache and len(list(cache.glob("*.json"))) == 1

    def no_probe(*a, **kw):
        raise AssertionError("a probe ran for a kept import")

    with monkeypatch.context() as m:
        m.setattr(importer, "run_probes", no_probe)
        m.setattr(importer.ImportProcess, "_start", no_probe)  # the import's own process
        again = import_problem(str(path), cache_dir=str(cache))
        assert again.from_cache and _same_import(first, again)
        path.write_text(SMALL.format(batch=48))  # another file: probed
        with pytest.raises(AssertionError, match="a probe ran"):
            import_problem(str(path), cache_dir=str(cache))
        path.write_text(SMALL.format(batch=32))
        with pytest.raises(AssertionError, match="a probe ran"):  # another scale
            import_problem(str(path), scale=False, cache_dir=str(cache))
    kept = next(cache.glob("*.json"))
    kept.write_text('{"format": 1, "key": "')
    redone = import_problem(str(path), cache_dir=str(cache))
    assert not redone.from_cache and _same_import(first, redone)
    assert import_problem(str(path), cache_dir=str(cache)).from_cache
    none = tmp_path / "none"
    assert not import_problem(str(path), cache_dir=None).from_cache and not none.exists()
    monkeypatch.setenv("KREWARD_IMPORT_CACHE", str(cache))
    assert import_problem(str(path)).from_cache
    monkeypatch.setenv("KREWARD_IMPORT_CACHE", "")
    assert not import_problem(str(path)).from_cache


def test_a_probe_that_calls_an_integer_tensor_structured_is_not_believed(tmp_path):
    """The probe's answer comes from the problem file's own process: a
    "symmetric" integer input (structure() marks floating tensors only)
    would make float values the region's writer casts to int while the
    checks keep them float. Not applied, and said."""
    from kreward.kernelbench import importer
    (tmp_path / "f.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x, k):\n"
        "        return x * k.float()\nN = 8\n"
        "def get_inputs():\n    return [torch.randn(N, N), torch.randint(0, 5, (N, N), dtype=torch.int32)]\n"
        "def get_init_inputs():\n    return []\n")
    imp = import_problem(str(tmp_path / "f.py"), cache_dir=None)
    base = dict(imp.base_probe, inputs=[dict(d) for d in imp.base_probe["inputs"]])
    base["inputs"][1]["structure"] = "symmetric"
    base["inputs"][0]["structure"] = "softmax_last"  # a floating one: kept
    forged = importer.ImportedProblem(imp.path, base, imp.cases, imp.atol, imp.rtol)
    by_index = {t["index"]: t for t in forged.tensors if t.get("source") == "input"}
    assert by_index[1]["transform"] is None and by_index[0]["transform"] == "softmax_last"
    assert any("not applied" in n for n in forged.notes), forged.notes
