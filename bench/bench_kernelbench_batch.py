#!/usr/bin/env python3
"""A GRPO-like batch of fresh ModelNew candidates through kreward.Evaluator:
candidates per second on one GPU, and whether every report is present and
right (issue 31's batch target: 8 problems x 16 candidates, a third wrong,
>= 4 candidates/s on one H200).

Candidates are made fresh for every run (a nonce in each source, so no
build or import cache of an earlier run helps):
- elementwise problems (relu, sigmoid, tanh, swish, gelu): a Triton kernel
  of the problem's function, its block size varied per candidate;
- other problems: the problem's own Model as ModelNew (torch-only: it
  passes, flagged torch_fallback, as a model that copied the reference
  would);
- a third of each problem's candidates wrong: the honest answer with its
  outputs shifted (`* 1.1 + 0.1`), far outside the tolerance.

Every variant (`--variant NAME=JSON`, the Evaluator's `kernelbench` options
merged over the defaults; several to compare mechanisms in one run) gets a
fresh Evaluator and a batch of the same shape with fresh nonces (no variant
finds another's Triton kernels compiled), submitted at once (`Evaluator.
evaluate_async` for each, as a trainer's event loop would; a line per report
as it comes, and each problem's setup time as it is made); the first variant
is the ratio's base.
Printed: per variant the wall, candidates/s, the ratio, reports right,
and the medians of each evaluation phase (the reports' phase_*_s). With
KR_PROFILE=1 in its environment, also where each problem's first verify
spent its `go` (the worker's parts and heaviest functions).

`--kernelbench-method N` also runs KernelBench's own method (load, 5
correctness trials, 100 timed trials, one fresh process a candidate:
bench/kernelbench_reference_eval.py, as bench_kernelbench.py runs it) on
the first N candidates of another fresh batch of the same shape, one after
another as its eval script does, after the variants: its candidates/s, how
many it judged as expected, and every variant's rate against it (issue 31:
>= 5x, in the same run).

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_kernelbench_batch.py \\
        [--problems 8] [--per-problem 16] [--variant one='{"in_flight": 1}'] ...

Without a GPU it says so and exits 0; `--cpu` runs the torch-only
candidates on the CPU device (no timing credit there: a smoke test of the
bench itself, small counts advised)."""
import argparse
import collections
import asyncio
import json
import pathlib
import secrets
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))

# the problems of the batch, in order (the first --problems of them)
PROBLEMS = ["level1/01_relu.py", "level1/03_sigmoid.py", "level1/04_tanh.py", "level1/07_swish.py",
            "level1/02_gelu.py", "level1/05_softmax.py", "level1/22_layernorm.py",
            "level2/01_gemm_bias_relu.py", "level1/13_matmul_square.py", "level1/23_rmsnorm.py"]

# the Triton expression of each elementwise problem's function of x
ELEMENTWISE = {
    "01_relu": "tl.maximum(x, 0.0)",
    "03_sigmoid": "tl.sigmoid(x)",
    "04_tanh": "2.0 * tl.sigmoid(2.0 * x) - 1.0",
    "07_swish": "x * tl.sigmoid(x)",
    "02_gelu": "0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
}

TRITON_TEMPLATE = '''# candidate {nonce}
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def elementwise_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # {nonce}: in the kernel's own source, so Triton compiles it afresh
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = {expr}
    tl.store(y_ptr + offs, y{wrong}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        elementwise_kernel[(triton.cdiv(n, {block}),)](x, y, n, BLOCK={block})
        return y
'''

TORCH_WRONG = '''

class ModelNew(Model):
    def forward(self, *args, **kwargs):
        return super().forward(*args, **kwargs) * 1.1 + 0.1
'''


def candidates(problem, count, wrong_every, triton_ok):
    """[(source, expected verdict, identical)] for one problem: fresh
    sources, one in wrong_every wrong; identical: the problem's Model as
    ModelNew (its speedup should be 1: the timing's quality)."""
    stem = pathlib.Path(problem).stem
    text = (KB / problem).read_text()
    out = []
    for i in range(count):
        wrong = i % wrong_every == wrong_every - 1
        nonce = f"{stem}-{i}-{secrets.token_hex(6)}"
        if triton_ok and stem in ELEMENTWISE:
            src = TRITON_TEMPLATE.format(nonce=nonce, expr=ELEMENTWISE[stem], block=(256, 512, 1024, 2048)[i % 4],
                                         wrong=" * 1.1 + 0.1" if wrong else "")
            identical = False
        else:
            src = f"# candidate {nonce}\n{text}\n" + (TORCH_WRONG if wrong else "\nModelNew = Model\n")
            identical = not wrong
        out.append((src, "incorrect" if wrong else "passed", identical))
    return out


def run_kernelbench_method(batch, count, device="cuda:0"):
    """KernelBench's method on the first `count` candidates of batch, one
    after another in a fresh process each (its Triton cache and build
    folder fresh for the run): a row like run_variant's."""
    import tempfile
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    from bench_kernelbench import kb_verdict, run_kernelbench
    want_kb = {"passed": "pass", "incorrect": "wrong"}
    wrong, seconds = [], []
    with tempfile.TemporaryDirectory(prefix="kb-method-") as tmp:
        t0 = time.perf_counter()
        for i, (p, src, want, _) in enumerate(batch[:count], 1):
            res, err, s = run_kernelbench((KB / p).read_text(), src, f"{tmp}/build", f"{tmp}/triton",
                                          None, device)
            got = kb_verdict(res, err)
            seconds.append(s)
            if got != want_kb[want]:
                wrong.append((p, got, want_kb[want], ""))
            print(f"  kernelbench-method {i}/{count} at {time.perf_counter() - t0:.1f} s: "
                  f"{pathlib.Path(p).stem} {got} {s:.2f} s", flush=True)
        wall = time.perf_counter() - t0
    n = min(count, len(batch))
    return {"name": "kernelbench", "options": {"method": "KernelBench's, one after another",
                                               "count": n},
            "setup_s": 0.0, "wall_s": wall, "n": n, "rate": n / wall if wall > 0 else float("inf"),
            "wrong": wrong, "phases": {"candidate": statistics.median(seconds)} if seconds else {},
            "ops": {}, "identical_speedups": []}


async def _submit_all(ev, paths, sources, t0):
    """Every candidate submitted at once (as evaluate_batch does), each
    report taken as it comes, with a line per report: a run cut short
    still says how far it got and where the time went."""
    async def one(i):
        return i, await ev.evaluate_async(paths[i], sources[i])
    reports = [None] * len(paths)
    tasks = [asyncio.ensure_future(one(i)) for i in range(len(paths))]
    for done, fut in enumerate(asyncio.as_completed(tasks), 1):
        i, r = await fut
        reports[i] = r
        phases = {k[6:-2]: v for k, v in r.metrics().items() if k.startswith("phase_") and k.endswith("_s")}
        top = sorted(phases.items(), key=lambda kv: -kv[1])[:3]
        print(f"  {done}/{len(paths)} at {time.perf_counter() - t0:.1f} s: "
              f"{pathlib.Path(paths[i]).stem} {r.verdict} "
              + " ".join(f"{k} {v:.2f}" for k, v in top), flush=True)
    return reports


def run_variant(name, options, problems, batch, reward):
    import kreward
    paths = [str(KB / p) for p, _, _, _ in batch]
    sources = [src for _, src, _, _ in batch]
    with kreward.Evaluator(reward=reward, kernelbench=options) as ev:
        # each problem's setup (import, the baseline's worker) before the
        # clock: the batch measures candidates, the per-problem cost apart
        t0 = time.perf_counter()
        for p in problems:
            t1 = time.perf_counter()
            ev.problem(str(KB / p))
            print(f"  {name}: setup {p} {time.perf_counter() - t1:.1f} s", flush=True)
        setup = time.perf_counter() - t0
        t0 = time.perf_counter()
        reports = asyncio.run(_submit_all(ev, paths, sources, t0))
        wall = time.perf_counter() - t0
    wrong = [(p, r.verdict, want, (r.message or "")[:160]) for (p, _, want, _), r in zip(batch, reports)
             if r.verdict != want]
    phases, ops, identical, profiled = {}, {}, [], set()
    spares, cold, memo_use = {True: 0, False: 0}, collections.Counter(), collections.Counter()
    for (p, _, _, same), r in zip(batch, reports):
        for key, value in r.metrics().items():
            if key.startswith("phase_") and key.endswith("_s"):
                phases.setdefault(key[6:-2], []).append(value)
        result = json.loads(r.text("kernelbench") or "{}")
        # inside the timed phases: each side's requests and the caller's
        # own steps (the result's ops_s, timing.py clocks_read)
        for side, steps in (result.get("ops_s") or {}).items():
            for op, seconds in steps.items():
                ops.setdefault(f"{side}.{op}", []).append(seconds)
        # whether the baseline's memo stood in for most of its batches
        # (used), its fresh batches disagreed, or there was none to hold
        # them against (full: the schedule timed whole)
        memo = result.get("baseline_memo")
        if isinstance(memo, dict):
            memo_use["used" if memo.get("used") else "disagreed" if memo.get("compared") else "full"] += 1
        for key in ("calls", "batches"):
            if isinstance(result.get(key), (int, float)):
                ops.setdefault(f"({key})", []).append(result[key])
        # how many candidates found a worker started ahead for them (a
        # spare), the rest started theirs at their turn (start_and_load)
        if "started_ahead" in result:
            spares[bool(result["started_ahead"])] += 1
            if isinstance(result.get("ready_wait_s"), (int, float)):
                ops.setdefault(f"(ready wait at its turn: {'ahead' if result['started_ahead'] else 'cold'})",
                               []).append(result["ready_wait_s"])
            if not result["started_ahead"]:
                cold[result.get("started_cold_why") or "unsaid"] += 1
        # where verify's go spent its time (the caller's KR_PROFILE=1): each
        # problem's first report, every case's parts, the first case's profile
        prof = result.get("verify_go_profile")
        if prof and p not in profiled:
            profiled.add(p)
            for case, c in prof.items():
                parts = " ".join(f"{k} {v:.4f}" for k, v in c.get("parts_s", {}).items())
                print(f"  {name}: {pathlib.Path(p).stem} verify go, case {case}: wall {c.get('wall_s')} s, "
                      f"in the worker {c.get('total_s')} s: {parts}", flush=True)
            first = next(iter(prof.values()))
            print("\n".join("    " + ln for ln in first.get("top", "").splitlines()[:40] if ln.strip()),
                  flush=True)
        # the candidate worker's ready warming the libraries (off the
        # candidate's path where a spare took it: spare_ready shows a wait)
        if isinstance(result.get("worker_warm_s"), (int, float)):
            ops.setdefault("(worker ready warm)", []).append(result["worker_warm_s"])
        for step, seconds in (result.get("worker_warm_steps_s") or {}).items():
            if isinstance(seconds, (int, float)):
                ops.setdefault(f"(worker ready warm: {step})", []).append(seconds)
        # its whole start: spawn to ready, the ready's wall (freezes in it)
        # and ready's steps outside the warm
        for step, seconds in (result.get("worker_start_s") or {}).items():
            if isinstance(seconds, (int, float)):
                ops.setdefault(f"(worker start: {step})", []).append(seconds)
        # the Model timed as its own candidate: how far from 1 the speedup
        # is, with each worker's launch time (measured in its ready) beside it
        if same and r.verdict == "passed" and r.get("speedup", float("nan")) == r.get("speedup"):
            identical.append(r.get("speedup"))
            launch = result.get("launch_us") or {}
            print(f"  {name}: {pathlib.Path(p).stem} as its own candidate: speedup {r.get('speedup'):.3f}, "
                  f"time_us {result.get('time_us')}, baseline_us {result.get('baseline_us')}, "
                  f"launch_us candidate {launch.get('candidate')} baseline {launch.get('baseline')}, "
                  f"worker_start {result.get('worker_start')}, baseline_memo {result.get('baseline_memo')}, "
                  f"batches_us {result.get('batches_us')}, batches_event_us {result.get('batches_event_us')}, "
                  f"kernel_share {result.get('kernel_share')}",
                  flush=True)
    return {"name": name, "options": options, "setup_s": setup, "wall_s": wall, "n": len(reports),
            "rate": len(reports) / wall if wall > 0 else float("inf"), "wrong": wrong,
            "phases": {k: statistics.median(v) for k, v in phases.items()},
            "ops": {k: statistics.median(v) for k, v in ops.items()},
            "identical_speedups": identical, "started_ahead": spares[True], "started_cold": spares[False],
            "started_cold_why": dict(cold), "baseline_memo": dict(memo_use)}


TINY = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.{op}(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""


def tiny_problems(n):
    """n tiny elementwise problems in a temporary folder (absolute paths:
    KB / path is the path itself); their candidates are their Models."""
    import tempfile
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kb-tiny-"))
    ops = ["relu", "sigmoid", "tanh", "abs", "exp", "neg", "sin", "cos"]
    out = []
    for i in range(n):
        path = folder / f"tiny_{i}_{ops[i % len(ops)]}.py"
        path.write_text(TINY.format(op=ops[i % len(ops)]))
        out.append(str(path))
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", type=int, default=8, help="how many problems of the list (default 8)")
    p.add_argument("--only", default="", help="comma-separated problems of the list by stem (e.g. "
                   "05_softmax,22_layernorm), instead of --problems")
    p.add_argument("--per-problem", type=int, default=16, help="fresh candidates per problem (16)")
    p.add_argument("--wrong-every", type=int, default=3, help="one candidate in this many is wrong (3)")
    p.add_argument("--reward", default="kernelbench")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=JSON: the Evaluator's kernelbench options for one run (repeatable; "
                        "default one run with none)")
    p.add_argument("--cpu", action="store_true",
                   help="the CPU device, torch-only candidates (a smoke test of the bench)")
    p.add_argument("--kernelbench-method", type=int, default=0, metavar="N",
                   help="also run KernelBench's own method on N fresh candidates of the batch, one "
                        "after another, and print each variant's rate against it")
    p.add_argument("--tiny", type=int, default=0, metavar="N",
                   help="N tiny problems (64 x 256 elementwise, written to a temporary folder) instead "
                        "of the bundled ones: the scheduling and the spares' hand-offs measured where "
                        "the candidates' own work is nothing (with --cpu: on this machine)")
    p.add_argument("--json", help="write the variants' results to this file")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    if not a.cpu:
        try:
            import torch
            ok = torch.cuda.is_available()
        except ImportError:
            ok = False
        if not ok:
            print("bench_kernelbench_batch: needs a GPU (skipped); --cpu for a smoke run")
            return 0
    variants = []
    for v in a.variant or ["default={}"]:
        name, _, js = v.partition("=")
        variants.append((name, json.loads(js or "{}")))
    problems = PROBLEMS[:a.problems]
    if a.tiny > 0:
        problems = tiny_problems(a.tiny)
    elif a.only:
        stems = [x.strip() for x in a.only.split(",") if x.strip()]
        problems = [p for p in PROBLEMS if pathlib.Path(p).stem in stems]
        if len(problems) != len(stems):
            print(f"bench_kernelbench_batch: --only names problems not in the list: {a.only}")
            return 2
    # interleaved as a trainer submits a GRPO step: every problem's k-th
    # candidate before any (k+1)-th
    rows = []
    for name, options in variants:
        # fresh sources for each variant: the same candidates again would
        # find their Triton kernels compiled by the variant before (a run at
        # 63f2321 credited that to the second variant)
        per = {p: candidates(p, a.per_problem, a.wrong_every, not a.cpu) for p in problems}
        batch = [(p, *per[p][i]) for i in range(a.per_problem) for p in problems]
        if a.cpu:
            options = {**options, "devices": ["cpu"]}
        rows.append(run_variant(name, options, problems, batch, a.reward))
        r = rows[-1]
        print(f"{name}: {r['n']} candidates in {r['wall_s']:.1f} s, {r['rate']:.2f}/s, "
              f"{r['n'] - len(r['wrong'])} right; {r['started_ahead']} found a worker started ahead, "
              f"{r['started_cold']} started theirs ({json.dumps(r['started_cold_why'])}); "
              f"baseline memo {json.dumps(r['baseline_memo'])}", flush=True)
    kb = None
    if a.kernelbench_method > 0:
        per = {p: candidates(p, a.per_problem, a.wrong_every, not a.cpu) for p in problems}
        batch = [(p, *per[p][i]) for i in range(a.per_problem) for p in problems]
        kb = run_kernelbench_method(batch, a.kernelbench_method, "cpu" if a.cpu else "cuda:0")
        print(f"kernelbench: {kb['n']} candidates in {kb['wall_s']:.1f} s, {kb['rate']:.2f}/s, "
              f"{kb['n'] - len(kb['wrong'])} as expected", flush=True)
    base = rows[0]["rate"]
    variants_only = list(rows)
    if kb:
        rows.append(kb)  # a row of the table like the variants'
    print(f"\n{'variant':<14} {'setup s':>8} {'wall s':>8} {'cand/s':>8} {'vs first':>8} {'right':>9}  options")
    for r in rows:
        print(f"{r['name']:<14} {r['setup_s']:8.1f} {r['wall_s']:8.1f} {r['rate']:8.2f} "
              f"{r['rate'] / base:8.2f} {r['n'] - len(r['wrong']):>4}/{r['n']:<4}  {json.dumps(r['options'])}")
    if kb:
        print("against KernelBench's method (candidates/s): " + ", ".join(
            f"{r['name']} {r['rate'] / kb['rate']:.2f}x" for r in variants_only))
    for r in rows:
        same = r["identical_speedups"]
        if same:
            inside = sum(0.9 <= x <= 1.1 for x in same)
            print(f"{r['name']}: the Model as its own candidate, speedup {min(same):.3f}-{max(same):.3f} "
                  f"(median {statistics.median(same):.3f}), {inside} of {len(same)} within [0.9, 1.1]")
    names = sorted({k for r in rows for k in r["phases"]})
    if names:
        print(f"\nmedian seconds per phase\n{'variant':<14} " + " ".join(f"{k[:14]:>14}" for k in names))
        for r in rows:
            print(f"{r['name']:<14} " + " ".join(f"{r['phases'].get(k, float('nan')):14.3f}" for k in names))
    for r in rows:
        if r["ops"]:
            print(f"\n{r['name']}: inside the timed phases, median seconds per candidate "
                  "(a side's requests by op, the caller's own steps; (calls) and (batches) are counts)")
            for k, v in sorted(r["ops"].items(), key=lambda kv: (not kv[0].startswith("("), -kv[1])):
                print(f"  {k:<32} {v:10.4f}")
    for r in rows:
        for p, got, want, msg in r["wrong"][:10]:
            print(f"  {r['name']}: {p} {got} (expected {want}): {msg}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    # the exit status is kreward's: KernelBench's method judging otherwise is
    # what the comparison shows, not this bench's failure
    return 1 if any(r["wrong"] for r in rows if r is not kb) else 0


if __name__ == "__main__":
    sys.exit(main())
