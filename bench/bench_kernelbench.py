#!/usr/bin/env python3
"""End-to-end time per ModelNew candidate: kreward's path against
KernelBench's own eval path, on the same corpus problems and candidates, in
the same run, one after the other on the same GPU.

  kreward      kreward.kernelbench.runner.Runner(...).evaluate(source): a worker
               process per candidate, every case verified, batches timed on the
               caller's clock, checked calls drawn after the batch, input
               digests, kernel attribution (torch_fallback), the reference
               re-timed after every candidate by the same procedure in a
               worker kept per problem (no candidate process alive then; with
               the baseline memo, the default, 3 fresh batches counted with the
               memo's when they agree: --no-baseline-memo times it in full, so
               two runs show what the memo saves in the baseline_timed phase).
               Importing the problem and building the Runner happen once per
               problem and are reported apart ("setup").
  KernelBench  its eval_kernel_against_ref as scripts/eval_from_generations.py
               runs it (bench/kernelbench_reference_eval.py, replicated from
               the commit named there): a spawned process per candidate, 5
               correctness trials, 100 timed trials with an L2 flush each, the
               reference timed the same way (the >10x speedup flag), a build
               directory per candidate.

Each side gets its own fresh torch-extension and Triton cache directories (a
candidate's first compile counts on both sides, as for a new candidate in
training). Candidates: examples/kernelbench/candidates/manifest.json, and
with --reference each problem's own Model as a ModelNew (a torch-only
candidate); --all adds every importable corpus problem's Model.

Printed: one row per candidate (problem, candidate, the manifest's expectation,
kreward's verdict, KernelBench's verdict, seconds per candidate on each side,
their ratio KernelBench / kreward), the totals, and for the cheating
candidates which path caught each (kreward: any verdict but pass, or
torch_fallback / mostly_torch / timing_mismatch, which withhold speed credit; KernelBench: not
correct, or flagged excessive_speedup).

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_kernelbench.py [--json out.json]

Needs torch with CUDA (and triton for the Triton candidates); without a GPU
it prints "bench_kernelbench: needs a GPU (skipped)" and exits 0.
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))
sys.path.insert(0, str(ROOT / "bench"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", nargs="*", default=None,
                   help="only problems whose path contains one of these (e.g. level1/01_relu)")
    p.add_argument("--reference", action="store_true",
                   help="also each selected problem's Model as a candidate")
    p.add_argument("--all", action="store_true",
                   help="every corpus problem, with its Model as a candidate (implies --reference)")
    p.add_argument("--models-only", action="store_true",
                   help="only the problems' own Models as candidates, no manifest candidate "
                        "(implies --reference)")
    p.add_argument("--seed", type=int, default=1, help="kreward's evaluation seed")
    p.add_argument("--budget-s", type=float, default=450.0,
                   help="start no candidate after this many seconds (the rest are listed as not run)")
    p.add_argument("--kb-trials", type=int, default=None,
                   help="KernelBench's perf trials (default: its 100)")
    p.add_argument("--staging", choices=("auto", "host"), default="auto",
                   help="how kreward's workers get a batch's inputs: auto (CUDA IPC where the "
                        "driver allows), host (through host memory: the way before it)")
    p.add_argument("--problems-dir", type=pathlib.Path, default=None,
                   help="problems from this folder's level*/*.py instead of the corpus (e.g. a "
                        "KernelBench checkout's KernelBench/): their Models only")
    p.add_argument("--no-baseline-memo", action="store_true",
                   help="kreward times the baseline in full after every candidate "
                        "(Runner(baseline_memo=False)), not 3 fresh batches with its memo's")
    p.add_argument("--no-kernelbench", action="store_true",
                   help="kreward's side only (KernelBench's eval is not run)")
    p.add_argument("--no-spare-ahead", action="store_true",
                   help="kreward's spare worker (the next candidate's) started once a candidate is "
                        "done, not while it runs (Runner(spare_ahead=False)): with KernelBench's eval "
                        "run too, no spare at all, as before (its start would overlap KernelBench's "
                        "timing), so each candidate's start_and_load pays the worker's start")
    p.add_argument("--zygote", action="store_true",
                   help="kreward's workers forked from the process's zygote, torch imported there "
                        "(Runner(zygote=True)), not each started by exec")
    p.add_argument("--attribution", choices=("cupti", "torch"), default="cupti",
                   help="how kreward attributes a candidate's kernels: CUPTI's records "
                        "(kernel_trace.py, the default) or a torch.profiler session "
                        "(Runner(attribution='torch'), to measure what the trace saves in the "
                        "attribute phase)")
    p.add_argument("--json", help="write every row, with feedback, to this file (rewritten after "
                                  "each candidate, so a run cut short keeps what it did)")
    args = p.parse_args(argv)
    if args.problems_dir:
        args.models_only = True
    return args


def gpu_missing():
    """Why this machine cannot run the bench, or None."""
    try:
        import torch
    except ImportError:
        return "no torch"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def select(args):
    """[(problem path relative to KB, candidate path relative to KB/candidates
    or None for the Model itself, expected outcome)]."""
    root = problems_root(args)
    manifest = {} if args.problems_dir else json.loads((KB / "candidates" / "manifest.json").read_text())
    problems = ([str(p.relative_to(root)) for p in sorted(root.glob("level*/*.py"))]
                if args.all or args.problems_dir else list(manifest))
    if args.problems:
        problems = [p for p in problems if any(s in p for s in args.problems)]
    out = []
    for p in problems:
        for cand, expect in ({} if args.models_only else manifest.get(p, {})).items():
            out.append((p, cand, expect))
        if args.reference or args.all or args.models_only:
            out.append((p, None, "torch_fallback"))
    return out


def problems_root(args):
    return args.problems_dir.resolve() if args.problems_dir else KB


def model_as_candidate(problem_src):
    return problem_src + "\nModelNew = Model\n"


def spare_options(args):
    """The Runner's spare options: the next candidate's worker started while
    a candidate runs, its start over before that one's timed batches (the
    default); --no-spare-ahead: started once a candidate is done, or, with
    KernelBench's eval run after each candidate, none (that start would
    overlap KernelBench's timing)."""
    if not args.no_spare_ahead:
        return {"spare": True, "spare_ahead": True}
    return {"spare": True, "spare_ahead": False} if args.no_kernelbench else {"spare": False}


def is_cheat(cand):
    return cand is not None and os.path.basename(cand).startswith("cheat_")


# ---- verdicts ----

def kreward_verdict(res):
    v = res["verdict"]
    if v == "pass" and res.get("torch_fallback"):
        v += " (torch_fallback)"
    if v == "pass" and res.get("mostly_torch"):
        v += " (mostly_torch)"
    if v == "pass" and res.get("timing_mismatch"):
        v += " (timing_mismatch)"
    return v


def kreward_caught(res):
    return (res["verdict"] != "pass" or bool(res.get("torch_fallback")) or bool(res.get("mostly_torch"))
            or bool(res.get("timing_mismatch")))


def kb_verdict(res, err):
    """KernelBench's outcome in words: pass, wrong, compile_error,
    runtime_error, error (its process failed), timeout, retry (a lock file)."""
    if err:
        return "timeout" if err.startswith("timeout") else "error"
    if res is None:
        return "retry"
    md = res["metadata"]
    if not res["compiled"]:
        return "compile_error"
    if not res["correctness"]:
        return "runtime_error" if "runtime_error" in md else "wrong"
    return "pass (excessive_speedup)" if md.get("excessive_speedup") else "pass"


def kb_caught(res, err):
    """Anything but a pass (or a retry, which is no verdict) pays no reward."""
    return kb_verdict(res, err) not in ("pass", "retry")


def kb_feedback(res, err):
    if err or res is None:
        return err or "lock file error: KernelBench asks for a retry"
    md = res["metadata"]
    for k in ("compilation_error", "runtime_error", "correctness_issue", "error_during_performance"):
        if k in md:
            return f"{k}: {md[k]}"[:300]
    return md.get("correctness_trials", "")


# ---- the two sides ----

def run_kreward(runner, src, seed, cache, quiet_after=False):
    """quiet_after: KernelBench's eval runs next, so a spare worker still
    starting (one started at the evaluation's end: its candidate failed
    before its timed batches) is waited for first, inside kreward's time
    (the next candidate would wait for it in its start_and_load)."""
    # the runner gives each candidate's worker a Triton cache of its own
    # inside its sandbox (a shared one would let a candidate plant kernels
    # for another); `cache` is the KernelBench side's, kept for symmetry of
    # the arguments
    del cache
    t0 = time.perf_counter()
    res = runner.evaluate(src, seed=seed)
    if quiet_after and runner.spare:
        t1 = time.perf_counter()
        runner.wait_spare()
        res["spare_wait_s"] = round(time.perf_counter() - t1, 4)
    return res, time.perf_counter() - t0


def run_kernelbench(problem_src, src, build_dir, cache, trials, device="cuda:0"):
    import kernelbench_reference_eval as kbe
    from kreward.kernelbench.triton_extract import triton_kernels
    try:
        backend = "triton" if triton_kernels(src) else "cuda"
    except SyntaxError:
        backend = "cuda"  # KernelBench's exec reports the syntax error
    kw = {"num_correct_trials": kbe.NUM_CORRECT_TRIALS, "measure_performance": True,
          "num_perf_trials": trials or kbe.NUM_PERF_TRIALS, "build_dir": build_dir,
          "device": device, "backend": backend}
    t0 = time.perf_counter()
    res, err = kbe.evaluate_in_fresh_process(problem_src, src, env={"TRITON_CACHE_DIR": cache}, **kw)
    return res, err, time.perf_counter() - t0


# ---- output ----

COLUMNS = ("problem", "candidate", "expected", "kreward", "KernelBench", "kreward s", "KB s", "KB/kreward")


def table(rows):
    """The rows as a fixed-width text table."""
    cells = [COLUMNS]
    for r in rows:
        ran_kb = r["kb_verdict"] != "not run"
        ratio = f"{r['kb_s'] / r['kreward_s']:.2f}" if ran_kb and r["kreward_s"] > 0 else "-"
        cells.append((r["problem"], r["candidate"], r["expected"], r["kreward_verdict"], r["kb_verdict"],
                      f"{r['kreward_s']:.2f}", f"{r['kb_s']:.2f}" if ran_kb else "-", ratio))
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip() for c in cells)


def totals(rows, setup_s):
    if not rows:
        return "no candidate ran"
    kr, kb = sum(r["kreward_s"] for r in rows), sum(r["kb_s"] for r in rows)
    n = len(rows)
    if all(r["kb_verdict"] == "not run" for r in rows):
        return (f"totals over {n} candidates: kreward {kr:.1f} s ({kr / n:.2f} s/candidate); "
                f"problem setup (import + reference) {setup_s:.1f} s in all")
    return (f"totals over {n} candidates: kreward {kr:.1f} s ({kr / n:.2f} s/candidate), KernelBench "
            f"{kb:.1f} s ({kb / n:.2f} s/candidate), KernelBench/kreward {kb / kr:.2f}x\n"
            f"kreward problem setup (import + reference), once per problem: {setup_s:.1f} s in all; "
            f"with it, KernelBench/kreward {kb / (kr + setup_s):.2f}x")


def phases_report(rows):
    """Where kreward's time per candidate went: each phase's mean seconds
    over the candidates that reached it (evaluation.py's phases_s)."""
    sums, counts = {}, {}
    for r in rows:
        for name, sec in (r.get("kreward_phases_s") or {}).items():
            sums[name] = sums.get(name, 0.0) + sec
            counts[name] = counts.get(name, 0) + 1
    if not sums:
        return "kreward phases: none recorded"
    return "kreward phases (mean s per candidate): " + ", ".join(
        f"{name} {sums[name] / counts[name]:.2f}" for name in sums)


def memo_report(rows, off):
    """How often kreward's baseline memo stood in for most of the
    baseline's batches (evaluation.py's baseline_memo)."""
    if off:
        return "kreward baseline memo: off (--no-baseline-memo): the baseline timed in full every time"
    memos = [r["kreward_baseline_memo"] for r in rows if r.get("kreward_baseline_memo")]
    if not memos:
        return "kreward baseline memo: no baseline timed"
    used = sum(1 for m in memos if m["used"])
    disagreed = sum(1 for m in memos if m["compared"] and not m["used"])
    return (f"kreward baseline memo: used in {used} of {len(memos)} baseline timings "
            f"({disagreed} fell back to the full schedule: their fresh batches disagreed)")


def cheats_report(rows):
    lines = []
    for r in rows:
        if is_cheat(r["cand_path"]):
            by = [name for name, hit in (("kreward", r["kreward_caught"]), ("KernelBench", r["kb_caught"])) if hit]
            lines.append(f"  {r['problem']} {r['candidate']}: caught by {' and '.join(by) or 'neither'}"
                         f" (kreward: {r['kreward_verdict']}; KernelBench: {r['kb_verdict']})")
    if not lines:
        return "no cheating candidates ran"
    n = len(lines)
    kr = sum(1 for r in rows if is_cheat(r["cand_path"]) and r["kreward_caught"])
    kb = sum(1 for r in rows if is_cheat(r["cand_path"]) and r["kb_caught"])
    return "\n".join([f"cheating candidates caught: kreward {kr} of {n}, KernelBench {kb} of {n}"] + lines)


def main(argv=None):
    args = parse_args(argv)
    why = gpu_missing()
    if why:
        print(f"bench_kernelbench: needs a GPU (skipped: {why})")
        return 0
    import torch
    from kreward.kernelbench import ImportRefused, import_problem
    from kreward.kernelbench.runner import Runner
    import kernelbench_reference_eval as kbe

    work = select(args)
    tmp = tempfile.mkdtemp(prefix="bench_kernelbench-")
    kr_ext, kr_triton = os.path.join(tmp, "kreward-ext"), os.path.join(tmp, "kreward-triton")
    kb_triton = os.path.join(tmp, "kb-triton")
    print(f"bench_kernelbench: {len(work)} candidates on {torch.cuda.get_device_name(0)}; KernelBench "
          f"{kbe.KERNELBENCH_COMMIT[:12]} (atol=rtol={kbe.TOLERANCE[torch.float32]} fp32, "
          f"{kbe.NUM_CORRECT_TRIALS} trials, {args.kb_trials or kbe.NUM_PERF_TRIALS} timed); caches in {tmp}; "
          f"kreward {spare_options(args)}", flush=True)
    t_start = time.perf_counter()
    root = problems_root(args)
    runners, setup_s, rows, skipped, refused = {}, 0.0, [], [], []

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "setup_s": setup_s, "not_run": skipped, "not_set_up": refused,
                           "spare": spare_options(args),
                           "kernelbench_commit": kbe.KERNELBENCH_COMMIT}, f, indent=1, default=str)

    for problem, cand, expect in work:
        label = cand.split("/", 1)[1] if cand else "Model (itself)"
        if time.perf_counter() - t_start > args.budget_s:
            skipped.append(f"{problem} {label}")
            continue
        problem_src = (root / problem).read_text()
        if problem not in runners:
            # the candidates come problem by problem: the ones before are
            # done, and their baseline workers' GPU memory is freed
            for earlier in runners.values():
                if not isinstance(earlier, str):
                    earlier.close()
            t0 = time.perf_counter()
            try:
                imp = import_problem(str(root / problem))
                # a spare worker only where its start is over before either
                # side's timing (spare_options)
                runners[problem] = Runner(imp, "cuda", cache_dir=kr_ext, staging=args.staging,
                                          baseline_memo=not args.no_baseline_memo,
                                          attribution=args.attribution, zygote=args.zygote,
                                          **spare_options(args))
            except ImportRefused as e:
                runners[problem] = f"not imported ({e.reason})"
            except Exception as e:  # noqa: BLE001 - a problem the Runner cannot take is a row, not the end
                runners[problem] = f"no Runner ({type(e).__name__}: {e})"
            setup_s += time.perf_counter() - t0
        runner = runners[problem]
        if isinstance(runner, str):
            print(f"  {problem}: {runner[:400]}: skipped", flush=True)
            refused.append({"problem": problem, "why": runner})
            save()
            continue
        src = (KB / "candidates" / cand).read_text() if cand else model_as_candidate(problem_src)
        kr_res, kr_s = run_kreward(runner, src, args.seed, kr_triton, quiet_after=not args.no_kernelbench)
        if args.no_kernelbench:
            kb_res, kb_err, kb_s = None, None, 0.0
        else:
            build = os.path.join(tmp, "kb-build", problem.replace("/", "_"), label.replace("/", "_"))
            kb_res, kb_err, kb_s = run_kernelbench(problem_src, src, build, kb_triton, args.kb_trials)
        ran_kb = not args.no_kernelbench
        row = {"problem": problem, "candidate": label, "cand_path": cand, "expected": expect,
               "kreward_verdict": kreward_verdict(kr_res), "kreward_caught": kreward_caught(kr_res),
               "kreward_s": kr_s, "kreward_feedback": kr_res.get("feedback"),
               "kreward_compile_s": kr_res.get("compile_seconds"), "kreward_speedup": kr_res.get("speedup"),
               "kreward_phases_s": kr_res.get("phases_s"), "kreward_ops_s": kr_res.get("ops_s"),
               "kreward_started_ahead": kr_res.get("started_ahead"),
               "kreward_worker_warm_s": kr_res.get("worker_warm_s"),
               "kreward_spare_wait_s": kr_res.get("spare_wait_s"),
               "kreward_staging": kr_res.get("staging"), "kreward_notes": kr_res.get("notes"),
               "kreward_baseline_memo": kr_res.get("baseline_memo"),
               "kb_verdict": kb_verdict(kb_res, kb_err) if ran_kb else "not run",
               "kb_caught": ran_kb and kb_caught(kb_res, kb_err),
               "kb_s": kb_s, "kb_feedback": kb_feedback(kb_res, kb_err) if ran_kb else None,
               "kb_runtime_ms": kb_res and kb_res.get("runtime"),
               "kb_ref_runtime_ms": kb_res and kb_res.get("ref_runtime")}
        rows.append(row)
        save()
        fb = f" ({str(row['kreward_feedback'])[:300]})" if row["kreward_feedback"] else ""
        print(f"  {problem} {label}: kreward {row['kreward_verdict']} in {kr_s:.2f} s{fb} (staging "
              f"{row['kreward_staging']})"
              + (f", KernelBench {row['kb_verdict']} in {kb_s:.2f} s" if ran_kb else ""), flush=True)
    for runner in runners.values():
        if not isinstance(runner, str):
            runner.close()  # a second close is a no-op
    print()
    print(table(rows))
    print()
    print(totals(rows, setup_s))
    print(phases_report(rows))
    print(memo_report(rows, args.no_baseline_memo))
    print(cheats_report(rows))
    if skipped:
        print(f"not run (past --budget-s {args.budget_s:.0f}): " + ", ".join(skipped))
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
