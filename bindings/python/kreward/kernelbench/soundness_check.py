"""The soundness check's own process (python -m
kreward.kernelbench.soundness_check, a request on stdin: soundness.check
starts it): the problem file runs here, sandboxed (file_process.py), on the
CPU. What it tries is soundness.py's docstring."""
from .. import json_process
from .soundness import RECIPES, SEEDS, cases_checked, input_layout


def _outputs(ref, inputs_mod, imp, case, layout, seed):
    tensors = inputs_mod.make_inputs(layout, seed, "cpu")
    return tensors, [o.float() for o in ref(case, tensors)]


# elements compared at a time: torch.allclose on a whole output made four
# temporaries of its size (3.3 s a call on 100M floats, 30 of the 49 s this
# check took on an upstream level 1 problem); a chunk stays in the cache,
# and an answer out of tolerance is known at its first chunk that is
CHUNK = 1 << 20


def _chunks(x):
    flat = x.reshape(-1)
    return (flat[lo:lo + CHUNK] for lo in range(0, flat.numel(), CHUNK))


def _one_thread(torch, each):
    """all(each) with torch on one thread: every chunk's operation is a
    parallel region of torch's pool, which on a shared machine waits for a
    thread the scheduler took away (64M elements at 1M a chunk: 20.9 s on
    2 threads under a load of 11 on 2 cores, 2.3 s on one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return all(each)
    finally:
        torch.set_num_threads(threads)


def _passes(torch, answer, expected, atol, rtol):
    """torch.allclose(answer.float(), expected, atol, rtol) (isclose on
    every element, all of them true: the same predicate, element by
    element), a chunk at a time, stopping at the first chunk with an element
    out of tolerance. answer: a tensor, or a number (a constant answer of
    expected's shape, never made whole)."""
    if not isinstance(answer, (int, float)):
        if answer.shape != expected.shape:
            return False
        pieces = zip(_chunks(answer), _chunks(expected))
    else:
        pieces = ((torch.full_like(e, answer), e) for e in _chunks(expected))
    return _one_thread(torch, (bool(torch.isclose(a.float(), e, rtol=rtol, atol=atol).all())
                               for a, e in pieces))


def _trivials(torch, imp, runs):
    """{name: passes every seed} for runs [(inputs, outputs)] of one case."""
    names = ["zeros", "constant", "input", "other_case"]
    passed = dict.fromkeys(names, True)
    float_inputs = [t["name"] for t in imp.tensors
                    if t["role"] == "in" and t["source"] == "input"
                    and t["dtype"] in ("f32", "f16", "bf16", "f64")]
    for i, (tensors, outs) in enumerate(runs):
        other = runs[(i + 1) % len(runs)][1]
        for k, expected in enumerate(outs):
            tries = {
                "zeros": lambda: 0.0,
                "constant": lambda: float(other[k].mean()),
                "other_case": lambda: other[k],
            }
            # an answer that failed once fails the problem's "every seed":
            # not tried again (the verdict is the same, its time is not)
            for name, answer in tries.items():
                passed[name] = passed[name] and _passes(torch, answer(), expected, imp.atol, imp.rtol)
            passed["input"] = passed["input"] and any(
                _passes(torch, tensors[n], expected, imp.atol, imp.rtol) for n in float_inputs)
    return passed


def _finite(torch, runs):
    """Every output element finite (a chunk at a time: isfinite on a whole
    output made a boolean temporary of its size)."""
    return _one_thread(torch, (bool(torch.isfinite(c).all())
                               for _, outs in runs for o in outs for c in _chunks(o)))


def run(data):
    from .file_process import confine
    confine(data["path"], gpu=False)  # before the file runs (file_process.py)
    return check(data)


def check(data):
    """The check in a process already confined to the file (run, or
    import_process.py's, which probed it first)."""
    import torch

    from . import inputs as inputs_mod
    from .importer import ImportedProblem
    from .reference import Reference
    grad = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    try:
        return _check(torch, inputs_mod, ImportedProblem, Reference, data)
    finally:
        torch.set_grad_enabled(grad)


def _check(torch, inputs_mod, ImportedProblem, Reference, data):
    imp = ImportedProblem(data["path"], data["base"], [tuple(c) for c in data["cases"]],
                          data["atol"], data["rtol"])
    ref = Reference(imp, "cpu")
    checked = cases_checked(imp, data.get("own_case_elements"))
    names = [imp.cases[c][0] for c in checked]
    trivial = {}
    for case in checked:
        own = [_outputs(ref, inputs_mod, imp, case, input_layout(imp, case), s) for s in SEEDS[:2]]
        for name, ok in _trivials(torch, imp, own).items():
            trivial[name] = trivial.get(name, False) or ok
    passing = sorted(n for n, ok in trivial.items() if ok)
    if not passing:
        return {"weak": None, "strong": None, "trivial": trivial, "case": names[0], "cases": names,
                "why": "no trivial answer passes the file's own inputs"}
    for recipe in RECIPES:
        if _breaks_every_trivial(torch, ref, inputs_mod, imp, checked, recipe):
            return {"weak": None, "strong": recipe, "trivial": trivial, "case": names[0],
                    "cases": names,
                    "why": (f"the trivial answer(s) {', '.join(passing)} pass the file's own "
                            "inputs; inputs of other scales and offsets break them, so every "
                            "case draws its inputs so")}
    return {"weak": (f"the trivial answer(s) {', '.join(passing)} pass the file's own inputs "
                     f"within atol/rtol {imp.atol:g}/{imp.rtol:g}, and inputs of other scales "
                     "and offsets did not break them"),
            "strong": None, "trivial": trivial, "case": names[0], "cases": names}


def _breaks_every_trivial(torch, ref, inputs_mod, imp, checked, recipe):
    """Whether under the recipe every trivial answer fails on some seed in
    every case checked, the reference staying finite."""
    for case in checked:
        layout = input_layout(imp, case, recipe)
        runs = [_outputs(ref, inputs_mod, imp, case, layout, s) for s in SEEDS]
        if not _finite(torch, runs) or any(_trivials(torch, imp, runs).values()):
            return False
    return True


if __name__ == "__main__":
    json_process.serve(run)
