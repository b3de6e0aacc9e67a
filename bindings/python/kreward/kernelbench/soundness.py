"""Whether an imported KernelBench problem can be passed without computing
it, checked at import (docs/kernelbench.md, "Weak problems").

A problem whose outputs concentrate under the inputs its get_inputs draws
(a loss over many random elements is nearly constant) is passed by a
constant fitted to that distribution: the scaled cases keep the
distribution, and a constant stays inside the tolerance. So at import the
trivial answers are tried against the reference on fresh inputs of the
problem's cheapest case and of its own sizes (the timed case, up to
OWN_CASE_ELEMENTS input elements):
- zeros; a constant (each output's mean on another seed: fitted to the
  distribution, not to these inputs); an input passed through (of an
  output's shape); the reference's output on another seed.
Where one passes every seed, inputs of other scales and offsets are tried
(each call drawing its own: a scale of 10^U(-1, 1) and an offset of up to
its size, for the forward's floating-point inputs; the lifted weights and
integer inputs keep theirs, which is within the Model's semantics): when
under them every trivial answer fails on some seed and the reference stays
finite, every case of the problem draws its floating-point inputs so
(fresh per call: the recipe, not one scale, is kept), the timed case too,
so no candidate can tell checked inputs by their distribution; otherwise
it is weak: the import says so, every report carries `weak_problem`, and no
preset pays it for speed.

The check runs the problem's file, so it runs in a subprocess of its own,
sandboxed, as the importer's probes do (soundness_check.py): the caller
never executes the file during an import. This file is what both sides
share: the recipes, the seeds, which cases are checked, their inputs."""
from .. import json_process

# inputs of other scales and offsets, tried in order: the first that breaks
# every trivial answer and keeps the reference finite is kept
RECIPES = ({"log10_scale": [-1.0, 1.0], "offset": 1.0},
           {"log10_scale": [-1.0, 1.0]},
           {"offset": 2.0})
SEEDS = (101, 202, 303)  # fixed: the verdict of an import is a property of the file
OWN_CASE_ELEMENTS = 1 << 25  # the file's own sizes are checked too up to this many input elements


def check(imp, timeout_s=300, process=None):
    """The soundness of an ImportedProblem, from a subprocess (process: the
    import's ImportProcess, which probed the file; else one of its own):
    {"weak": why
    or None, "strong": a recipe or None, "trivial": what passed under the
    file's own inputs, "why": a sentence}; {"error": why} when the check
    could not run (the import goes on, and says so)."""
    data = {"path": imp.path, "base": imp.base_probe, "cases": imp.cases, "atol": imp.atol,
            "rtol": imp.rtol, "own_case_elements": OWN_CASE_ELEMENTS}
    if process is not None:
        return process.soundness(data, timeout_s)
    return json_process.call("kreward.kernelbench.soundness_check", data, timeout_s,
                             "the soundness check", env={"CUDA_VISIBLE_DEVICES": ""})



def cheapest_case(imp):
    """The case of the fewest input elements."""
    return min(range(len(imp.cases)), key=lambda c: _input_elements(imp, c))


def _input_elements(imp, case):
    n = 0
    for t, shape in zip(imp.tensors, imp.shapes(imp.cases[case][2])):
        if t["role"] == "in":
            k = 1
            for s in shape:
                k *= s
            n += k
    return n


def cases_checked(imp, own_case_elements=None):
    """The cheapest case, and the file's own (the timed one) where its
    inputs are at most OWN_CASE_ELEMENTS: a loss can concentrate at the
    timed sizes only (its spread shrinks with the elements it averages),
    and a candidate answering the constant only at those sizes passed
    every check made at the others."""
    cheap = cheapest_case(imp)
    limit = OWN_CASE_ELEMENTS if own_case_elements is None else own_case_elements
    if cheap != 0 and _input_elements(imp, 0) <= limit:
        return [cheap, 0]
    return [cheap]


def input_layout(imp, case, recipe=None):
    """The input tensors of one case as inputs.make_inputs takes them; with
    a recipe, the forward's floating-point inputs at other scales and
    offsets."""
    shapes = imp.shapes(imp.cases[case][2])
    out = []
    for t, s in zip(imp.tensors, shapes):
        if t["role"] != "in":
            continue
        init = imp.init_for(case, t)
        if recipe and t["source"] == "input" and t["dtype"] in ("f32", "f16", "bf16", "f64"):
            init = dict(init, rescale=recipe)
        out.append(dict(t, shape=s, init=init))
    return out
