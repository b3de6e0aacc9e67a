"""KernelBench-format problem files (a torch `Model`, `get_inputs()`,
`get_init_inputs()`) imported as libkreward problems.

The file runs only in probe subprocesses (probe.py): the caller's process
never executes it during the import. What comes out:
- tensors: the forward's tensor arguments, then the module's parameters and
  floating-point buffers lifted into inputs (a kernel must read its weights
  from somewhere; the library's generator makes fresh ones each evaluation),
  then the outputs;
- cases: the file's own sizes (timed) plus scaled ones where its
  module-level integer constants drive the shapes (notes say when not);
- a golden problem spec (the reference is `Model` on the library's inputs,
  kernelbench/reference.py), tolerances atol = rtol = 1e-2 as KernelBench's
  eval uses unless told otherwise;
- input transforms for structured inputs (symmetric, triangular, rows
  summing to one) that the ModelNew runner applies; a device-only candidate
  sees the library's raw inputs, so such problems say why they have no
  device-only form (device_only_reason)."""
import json
import os
import re
import subprocess
import sys

from . import import_cache
from .import_process import ImportProcess

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
MAX_TENSORS = 1024        # lib/problem/tensor_parse.c
DEFAULT_TOL = 1e-2        # KernelBench's eval: torch.allclose(atol=1e-02, rtol=1e-02)
SCALE_MIN = 8             # smaller constants are axes, kernel sizes, strides: never scaled
TRANSFORMS = ("symmetric", "lower_triangular", "upper_triangular", "softmax_last")
INT_DTYPES = ("i8", "u8", "i32", "i64")
FLOAT_DTYPES = ("f32", "f16", "bf16", "f64")


class ImportRefused(Exception):
    """The file cannot be imported; .reason says why."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def run_probes(path, reqs, timeout_s=300):
    """Runs the probe process on a list of requests: one result each."""
    # the probe never needs a GPU; it enters its sandbox through libkreward
    from ..json_process import library_env
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", **library_env())
    try:
        p = subprocess.run([sys.executable, PROBE, os.path.abspath(path), json.dumps(reqs)],
                           capture_output=True, text=True, timeout=timeout_s, env=env)
        out = p.stdout
        why = f"the probe exited {p.returncode}: " + " | ".join((p.stderr or "").strip().splitlines()[-3:])
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"the probe ran over {timeout_s} s"
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return results + [{"ok": False, "error": why}] * (len(reqs) - len(results))


def run_probe(path, overrides=None, real=False, determinism=False, timeout_s=300):
    return run_probes(path, [{"overrides": overrides or {}, "real": real, "determinism": determinism}],
                      timeout_s)[0]


def _ident(name, taken):
    base = re.sub(r"\W", "_", name)
    if not re.match(r"[A-Za-z_]", base):
        base = "t_" + base
    out, i = base, 1
    while out in taken or out in ("min", "max", "cdiv"):
        out, i = f"{base}_{i}", i + 1
    taken.add(out)
    return out


def _liftable(buf):
    """Float buffers with values of their own (running statistics) become
    inputs; constants, 0/1 masks (a causal mask) and integer counters keep
    their meaning only as they are, so they stay in the module."""
    st = buf.get("stats")
    if buf["dtype"] not in ("f32", "f16", "bf16", "f64") or not st:
        return False
    if st["max"] - st["min"] <= 1e-12 * max(1.0, abs(st["min"])):
        return False
    return not (st["min"] in (0.0, 1.0) and st["max"] in (0.0, 1.0) and 0 < st["mean"] < 1
                and abs(st["std"] ** 2 - st["mean"] * (1 - st["mean"])) < 1e-3)


def _init_of(desc):
    """The generator distribution closest to the values get_inputs made."""
    st, dt = desc.get("stats"), desc["dtype"]
    if dt == "bool":
        return {"dist": "bernoulli", "p": min(0.99, max(0.01, st["mean"])) if st else 0.5}
    if dt in ("i8", "u8", "i32", "i64"):
        if not st:
            return {"dist": "int", "low": 0, "high": 100}
        lo, hi = int(st["min"]), int(st["max"])
        return {"dist": "int", "low": lo, "high": hi if hi > lo else lo + 1}
    if not st:
        return {"dist": "normal", "mean": 0, "std": 1}
    lo, hi = st["min"], st["max"]
    if hi - lo <= 1e-12 * max(1.0, abs(lo)):
        # a constant (LayerNorm's weight of ones): any value is a valid weight,
        # and the library refuses constant inputs (they hide indexing bugs)
        d = 0.1 * max(1.0, abs(lo))
        return {"dist": "uniform", "low": lo - d, "high": lo + d}
    if st.get("kurtosis", 3.0) < 2.2:  # flat: rand, kaiming_uniform
        if lo >= 0 and hi <= 1 and lo < 0.01 and hi > 0.99:
            return {"dist": "uniform", "low": 0, "high": 1}  # torch.rand
        return {"dist": "uniform", "low": round(lo, 6), "high": round(hi, 6)}
    if abs(st["mean"]) < 0.02 and abs(st["std"] - 1) < 0.02:
        return {"dist": "normal", "mean": 0, "std": 1}  # randn: sample noise is not a distribution
    return {"dist": "normal", "mean": round(st["mean"], 6), "std": round(st["std"], 6)}


class ImportedProblem:
    """One imported file: .spec (the library problem, golden) or
    .device_only_reason, .cases (the probes), .tensors, .notes."""

    def __init__(self, path, base, cases, atol, rtol):
        self.path = os.path.abspath(path)
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.atol, self.rtol = atol, rtol
        self.base_probe = base         # the value probe's (or the meta probe's) description
        self.cases = cases             # [(name, overrides, probe)]; the first is the file's own
        self.notes = []
        # soundness.py: why the problem can be passed without computing it
        # (every report then carries weak_problem), or None
        self.weak = None
        self.soundness = None
        self.device_only_reason = None
        self._layout(base)
        self.spec = self._spec()

    # the tensors, in library order: forward arguments, parameters, buffers, outputs
    def _layout(self, base):
        taken, tensors, values = set(), [], []
        for i, (arg, d) in enumerate(zip(base["arg_names"], base["inputs"])):
            if d["kind"] == "unsupported":
                raise ImportRefused(self.path, f"get_inputs()[{i}] is a {d['type']}: only tensors and "
                                               "plain values can be passed")
            if d["kind"] == "value":
                values.append((i, arg))
                continue
            structure = d.get("structure")
            if structure and (d["dtype"] not in FLOAT_DTYPES or structure not in TRANSFORMS):
                # the probe's answer is the file's process's to write: a
                # transform of an integer tensor would give floats the
                # region's writer casts and the checks do not
                self.notes.append(f"get_inputs()[{i}]: the probe called a {d['dtype']} tensor "
                                  f"{str(structure)[:40]}: not applied")
                structure = None
            # a structured input's statistics are the transform's: the raw tensor is randn
            init = _init_of(d) if not structure else {"dist": "normal", "mean": 0, "std": 1}
            tensors.append({"name": _ident(arg, taken), "role": "in", "source": "input", "index": i,
                            "dtype": d["dtype"], "init": init, "transform": structure})
        for kind in ("params", "buffers"):
            for j, d in enumerate(base[kind]):
                if kind == "buffers" and not _liftable(d):
                    self.notes.append(f"buffer '{d['name']}' ({d['dtype']}, a constant, mask or "
                                      "counter) stays module state, not an input")
                    continue
                tensors.append({"name": _ident(d["name"], taken), "role": "in", "source": kind[:-1],
                                "module_name": d["name"], "dtype": d["dtype"], "init": _init_of(d),
                                "transform": None})
        outs = base["outputs"]
        for k, d in enumerate(outs):
            tensors.append({"name": _ident("out" if len(outs) == 1 else f"out{k}", taken), "role": "out",
                            "source": "output", "index": k, "dtype": d["dtype"]})
        for t in tensors:
            if t["dtype"] not in ("f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool"):
                raise ImportRefused(self.path, f"tensor '{t['name']}' has dtype {t['dtype']}, "
                                               "which the library has no name for")
        self.tensors, self.values = tensors, values
        self.taken = taken
        structured = [t["name"] for t in tensors if t.get("transform")]
        if structured:
            self.device_only_reason = (
                "structured inputs (" + ", ".join(f"{t['name']}: {t['transform']}" for t in tensors
                                                   if t.get("transform"))
                + "): the library's generator cannot make them, so only ModelNew candidates "
                  "(which get transformed inputs) are evaluated")
        if len(tensors) > MAX_TENSORS:
            self.device_only_reason = (f"{len(tensors)} tensors (lifted parameters included), the "
                                       f"library takes at most {MAX_TENSORS}")
        if any(p.get("rescale") for _, _, p in self.cases):
            self.device_only_reason = (
                (self.device_only_reason + "; and " if self.device_only_reason else "") +
                "inputs at scales and offsets drawn per call (the soundness check's recipe: a "
                "trivial answer passes the file's own inputs): the library's generator cannot "
                "make them, so only ModelNew candidates are evaluated")

    def init_for(self, case, tensor):
        """A tensor's generator distribution in one case. An integer input
        takes the range get_inputs gave it at that case's sizes (class
        indices drawn below num_classes shrink with it: the file's own range
        put targets out of bounds in a scaled case, so every candidate
        failed there); other tensors have one distribution for all cases."""
        probe = self.cases[case][2]
        recipe = probe.get("rescale")
        if recipe and tensor["source"] == "input" and tensor["dtype"] in FLOAT_DTYPES:
            # a problem strengthened by soundness.py: other scales and offsets
            return dict(tensor["init"], rescale=recipe)
        real = probe.get("real_inputs")
        if tensor["source"] != "input" or tensor["dtype"] not in INT_DTYPES or not real:
            return tensor["init"]
        return _init_of(real[tensor["index"]])

    def shapes(self, probe):
        """[shape] of every tensor in library order, for one case's probe."""
        out = []
        for t in self.tensors:
            src = t["source"]
            if src == "input":
                d = probe["inputs"][t["index"]]
            elif src == "output":
                d = probe["outputs"][t["index"]]
            else:
                d = next(x for x in probe[src + "s"] if x["name"] == t["module_name"])
            out.append(d["shape"])
        return out

    def case_values(self, case):
        """The forward's non-tensor arguments of a case: {position: value}."""
        probe = self.cases[case][2]
        return {i: probe["inputs"][i]["value"] for i, _ in self.values}

    def _spec(self):
        per_case = [self.shapes(p) for _, _, p in self.cases]
        dims, dim_of = [], {}
        for t, tensor in enumerate(self.tensors):
            for a in range(len(per_case[0][t])):
                key = tuple(c[t][a] for c in per_case)
                if key not in dim_of:
                    dim_of[key] = self._dim_name(key, len(dims))
                    dims.append(key)
        cases = []
        for c, (name, _, _) in enumerate(self.cases):
            case = {"name": name, **{dim_of[k]: k[c] for k in dims}}
            if c == 0:
                case["timing"] = True
            cases.append(case)
        tensors = []
        for t, x in enumerate(self.tensors):
            entry = {"name": x["name"], "dtype": x["dtype"], "role": x["role"],
                     "shape": [dim_of[tuple(c[t][a] for c in per_case)] for a in range(len(per_case[0][t]))]}
            if x["role"] == "in":
                entry["init"] = self._init_for_every_case(x)
            else:
                entry["tolerance"] = {"rtol": self.rtol, "atol": self.atol}
            tensors.append(entry)
        spec = {"name": re.sub(r"[^\w.-]", "_", self.name),
                "description": f"KernelBench-format problem {os.path.basename(self.path)} (imported)",
                "dims": [dim_of[k] for k in dims], "cases": cases, "tensors": tensors,
                "reference": {"golden": True}}
        scalars = self._scalars()
        if scalars:
            spec["scalars"] = scalars
        return spec

    def _init_for_every_case(self, tensor):
        """The library problem has one distribution per tensor: an integer
        input's range valid in every case (the narrowest)."""
        # the library's generator has no rescale: a problem that needs it is
        # device-only, and its ModelNew inputs come from init_for per case
        inits = [{k: v for k, v in self.init_for(c, tensor).items() if k != "rescale"}
                 for c in range(len(self.cases))]
        if tensor["dtype"] not in INT_DTYPES or any(i.get("dist") != "int" for i in inits):
            return inits[0]
        low, high = max(i["low"] for i in inits), min(i["high"] for i in inits)
        return dict(inits[0], low=low, high=max(low, high))

    def _dim_name(self, values, i):
        for k, v in self.cases[0][2]["constants"].items():
            if tuple(self.cases[c][2]["constants"].get(k) for c in range(len(self.cases))) == values:
                if k not in self.taken:
                    self.taken.add(k)
                    return k
        return _ident(f"n{i}", self.taken)

    def _scalars(self):
        out = []
        for i, arg in self.values:
            vals = {json.dumps(self.case_values(c)[i]) for c in range(len(self.cases))}
            v = self.case_values(0)[i]
            if len(vals) == 1 and type(v) in (int, float):
                out.append({"name": _ident(arg, self.taken), "dtype": "i32" if type(v) is int else "f32",
                            "value": v})
            elif self.device_only_reason is None:
                self.device_only_reason = (f"forward argument {i} ('{arg}') is {v!r}, not a number "
                                           "fixed across cases: a launch plan cannot pass it")
        return out

    def problem(self, ctx, device="cuda"):
        """The library problem with Model as its golden reference (torch in
        this process, on `device`)."""
        if self.device_only_reason:
            raise ImportRefused(self.path, f"no library problem: {self.device_only_reason}")
        from .reference import set_golden
        problem = ctx.parse_problem(self.spec, name=self.name + ".json")
        set_golden(problem, self, device)
        return problem

    def summary(self):
        return {"name": self.name, "cases": [n for n, _, _ in self.cases],
                "tensors": [(t["name"], t["source"]) for t in self.tensors],
                "device_only": self.device_only_reason is None,
                "device_only_reason": self.device_only_reason, "notes": self.notes}


def _scaled(constants, how):
    out = {}
    for i, (k, v) in enumerate(c for c in constants.items() if c[1] >= SCALE_MIN):
        if how == "small":
            out[k] = max(SCALE_MIN // 2, v // 4)
        else:
            # half, made odd, and a little different per constant: a kernel that
            # assumes powers of two, or two sizes that happen to be equal, fails here
            out[k] = (max(SCALE_MIN // 2, v // 2) | 1) + 2 * i
    return out


def _plan(consts):
    """The probe requests: the file's sizes on meta, then on the CPU for
    values, then each scaled case with all constants scaled, or only the
    first one (KernelBench files name the batch size first) when scaling
    all breaks the module (heads that no longer divide the width)."""
    reqs = [{"overrides": {}}, {"overrides": {}, "real": True}]
    scalable = [k for k, v in consts.items() if v >= SCALE_MIN]
    for how in ("small", "odd"):
        every = _scaled(consts, how)
        first = {scalable[0]: every[scalable[0]]} if scalable else {}
        reqs.append({"overrides": every, "how": how, "determinism": how == "small"})
        # one constant: "first" is "every" again (a second probe, a second note).
        # "first" runs only where "every" failed (_pick_cases reads it only
        # then): its determinism check on a case 4x the size was half the
        # probes' time on an upstream level 1 file, for an answer never read.
        # unless_ok: that request's position among those after the meta one
        if first != every:
            reqs.append({"overrides": first, "how": how, "determinism": how == "small",
                         "unless_ok": len(reqs) - 2})
    return reqs, scalable


def _key(probe):
    return json.dumps([probe["inputs"], probe["params"], probe["buffers"], probe["outputs"]], sort_keys=True)


def _pick_cases(results, reqs, scalable, consts, notes):
    cases, seen, checked = [], {_key(results[0])}, None
    for how in ("small", "odd"):
        for req, res in zip(reqs[2:], results[2:]):
            if req["how"] != how:
                continue
            if not res["ok"]:
                notes.append(f"case '{how}' with {req['overrides']}: {res['error']}")
                continue
            if _key(res) in seen:
                notes.append(f"case '{how}' with {req['overrides']}: the shapes do not change "
                             "(get_inputs does not read these constants)")
                break
            seen.add(_key(res))
            cases.append((how, req["overrides"], res))
            if "deterministic" in res and checked is None:
                checked = res["deterministic"]
            break
    unused = [k for k in scalable if not any(k in o for _, o, _ in cases)]
    if not scalable:
        notes.append("no module-level integer constant >= 8: one case, the file's own sizes")
    elif cases and unused:
        notes.append(f"constants not scaled: {', '.join(unused)}")
    return cases, checked


def import_problem(path, atol=DEFAULT_TOL, rtol=DEFAULT_TOL, scale=True, timeout_s=300,
                   cache_dir="default"):
    """Imports a KernelBench-format file: an ImportedProblem, or
    ImportRefused with the reason. cache_dir: where the probes' results of
    a successful import are kept by content (import_cache.py), so the same
    file imports again without running it; "default": $KREWARD_IMPORT_CACHE
    if set (empty: none), else ~/.cache/kreward/imports; None: no cache.
    The result's .from_cache says whether it came from there."""
    if not os.path.isfile(path):
        raise ImportRefused(path, "no such file")
    if cache_dir == "default":
        cache_dir = os.environ.get("KREWARD_IMPORT_CACHE", import_cache.DEFAULT_DIR)
    k = import_cache.key(path, scale, atol, rtol) if cache_dir else None
    kept = import_cache.read(cache_dir, k) if k else None
    if kept:
        meta, real, cases, notes = kept
    else:
        # one process runs the file for all of the import (import_process.py)
        proc = ImportProcess(path)
        try:
            meta, real, cases, notes = _probe_all(path, scale, timeout_s, proc)
            _check_soundness(path, meta, real, cases, notes, atol, rtol, timeout_s, proc)
        finally:
            proc.close()
        # a check that could not run is not kept: the next import tries again
        if k and not meta["soundness"].get("error"):
            import_cache.write(cache_dir, k, meta, real, cases, notes)
    imported = ImportedProblem(path, real, [("base", {}, meta)] + cases, atol, rtol)
    imported.notes[:0] = notes
    imported.from_cache = bool(kept)
    imported.soundness = meta.get("soundness")
    sound = imported.soundness or {}
    # a problem whose soundness is unknown is not paid for speed either: a
    # file that fails the check (on the CPU, in time) must not pass for sound
    imported.weak = sound.get("weak") or (
        f"its soundness could not be checked ({sound['error']})" if sound.get("error") else None)
    return imported


def _check_soundness(path, meta, real, cases, notes, atol, rtol, timeout_s, proc=None):
    """soundness.py on the import as probed: the result kept in meta (and so
    in the cache), every case's inputs rescaled where other scales and offsets
    break the trivial answers, notes saying what was found."""
    from . import soundness
    imp = ImportedProblem(path, real, [("base", {}, meta)] + cases, atol, rtol)
    result = soundness.check(imp, timeout_s, process=proc)
    meta["soundness"] = result
    if result.get("error"):
        notes.append(f"soundness not checked: {result['error']}: candidates get no speed credit "
                     "(weak_problem) until it is")
        return
    if result.get("strong"):
        # every case, the timed one too: a single extra case at other
        # scales left the rest passable by a candidate that tells the
        # file's own distribution from the recipe's (sampling its inputs)
        # and answers the constant only there
        meta["rescale"] = result["strong"]
        for _, _, probe in cases:
            probe["rescale"] = result["strong"]
        notes.append(f"soundness: {result['why']}")
    elif result.get("weak"):
        notes.append(f"weak problem: {result['weak']}: candidates get no speed credit")


def _probe_all(path, scale, timeout_s, proc):
    """The probes of an import, in proc (an ImportProcess): (meta, real,
    cases, notes), or ImportRefused."""
    meta = proc.probes([{"overrides": {}, "real": False, "determinism": False}], timeout_s)[0]
    if not meta["ok"]:
        raise ImportRefused(path, meta["error"])
    reqs, scalable = _plan(meta["constants"] if scale else {})
    results = [meta] + proc.probes(reqs[1:], timeout_s)
    notes = []
    real = results[1]
    if not real["ok"]:
        notes.append(f"no value statistics (a CPU run failed: {real['error']}): default distributions")
        real = meta
    else:
        real["outputs"] = meta["outputs"]  # the CPU probe skips the forward
    cases, deterministic = _pick_cases(results, reqs, scalable, meta["constants"], notes)
    if deterministic is None:  # no scaled case ran the check: the file's own sizes
        det = proc.probes([{"overrides": {}, "real": False, "determinism": True}], timeout_s)[0]
        deterministic = det.get("deterministic") if det["ok"] else None
        if not det["ok"]:
            notes.append(f"determinism not checked: {det['error']}")
    if deterministic is False:
        raise ImportRefused(path, "the reference is not deterministic (two forwards on the same "
                                  f"inputs differ; modules: {', '.join(meta['modules'])}): "
                                  "outputs cannot be checked")
    _case_values(path, real, cases, notes, timeout_s, proc)
    return meta, real, cases, notes


def _case_values(path, real, cases, notes, timeout_s, proc):
    """Where get_inputs makes integer tensors, their values at each scaled
    case's sizes (a CPU run of get_inputs per case, in one probe process):
    the file's own values are the base probe's (real)."""
    ints = [i for i, d in enumerate(real.get("inputs") or ())
            if d.get("kind") == "tensor" and d.get("dtype") in INT_DTYPES]
    if not ints or not cases or "stats" not in real["inputs"][ints[0]]:
        return
    results = proc.probes([{"overrides": o, "real": True} for _, o, _ in cases], timeout_s)
    for (how, overrides, probe), res in zip(cases, results):
        if res["ok"]:
            probe["real_inputs"] = res["inputs"]
        else:
            notes.append(f"case '{how}': integer inputs keep the file's own range (get_inputs on "
                         f"the CPU failed: {res['error']})")


def _numel(d):
    n = 1
    for s in d.get("shape", []):
        n *= s
    return n
