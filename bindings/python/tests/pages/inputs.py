"""What the page tests render: reports built by hand the way the library
and the ModelNew runner fill them on a GPU (the numbers and feedbacks are
of the kind the gpu tests print), scored by the real reward presets; the
three line shapes the suites and a batch write; a vetting run's lines
written by hand in `kreward problems vet`'s schema; a tuning run against
the synthetic backend. Each holds an attack in a text a candidate
controls."""
import json

import kreward

ATTACK = "<script>alert(1)</script>"
ATTACK_NAME = "<img src=x onerror=alert(2)>.cu"

UNWRITTEN = ("case 'pow2' (N=1048576): 524288 of 1.05M outputs of 'c' wrong; output 'c': first "
             "wrong at [524288]: got NaN (never written), expected -0.08797; the last 524288 "
             "elements were never written (from [524288]) (2 of 2 cases fail)")
PRECISION = ("case 'pow2' (N=1048576): 1.02M of 1.05M outputs of 'c' wrong (max abs error "
             "0.00386, relative L2 error 0.000307); the errors look like reduced precision; "
             "output 'c': first wrong at [0]: got -1.04004, expected -1.04042 (2 of 2 cases "
             "fail)")


def report(verdict, metrics=(), texts=(), flags=(), preset="makora"):
    """A report dict as kr_report_json writes it, scored by `preset`."""
    with kreward.Context(no_device=True) as ctx, ctx.reward(preset) as reward, \
            kreward.Report() as r:
        r.verdict = verdict
        for k, v in dict(metrics).items():
            r[k] = v
        for k, v in dict(texts).items():
            r.set_text(k, v)
        if flags:
            r.flags = list(flags)
        if verdict not in ("not_run", "error"):
            reward.score(r)
        return r.to_dict()


def timed(speedup, low, high, base_us, **more):
    m = {"compiled": 1, "correct": 1, "speedup": speedup, "speedup_low": low,
         "speedup_high": high, "baseline_us": base_us, "time_us": base_us / speedup,
         "compile_seconds": 0.11, "bench_wall_s": 0.38, "time_samples": 200}
    m.update(more)
    return m


def c_suite_line(problem, candidate, expect, rep):
    """A line of `kreward suite DIR --jsonl` on kreward problems."""
    not_run = rep["verdict"] == "not_run"
    return {"problem": problem, "candidate": candidate, "expect": expect,
            "as_expected": (not not_run) and rep["verdict"] == expect, "not_run": not_run,
            "report": rep}


def kb_suite_line(problem, candidate, expected, as_expected, rep):
    """A line of `kreward suite examples/kernelbench --jsonl`."""
    return dict(rep, suite={"problem": problem, "candidate": candidate, "expected": expected,
                            "as_expected": as_expected})


def modelnew(verdict, phases, flags=(), **metrics):
    m = {"cases_total": 3, "evaluation_s": round(sum(phases.values()), 4), **metrics}
    m.update({f"phase_{k}_s": v for k, v in phases.items()})
    if verdict != "error":
        m["compiled"] = 1
    m["correct"] = 1 if verdict == "passed" else 0
    return m


def suite_lines():
    """A suite run on a GPU: kreward problems (the C suite's shape) and
    KernelBench problems (the Python suite's), each verdict and an attack."""
    lines = [
        c_suite_line("l1_vector_add", "candidates/fast.cu", "passed", report(
            "passed", timed(2.31, 2.25, 2.37, 23.6), {"problem": "vector_add",
                                                      "candidate": "fast.cu",
                                                      "feedback": "correct; 2.31x the baseline"})),
        c_suite_line("l1_vector_add", "candidates/slow.cu", "passed", report(
            "passed", timed(0.62, 0.6, 0.64, 23.6), {"problem": "vector_add",
                                                     "candidate": "slow.cu"})),
        c_suite_line("l1_vector_add", "candidates/wrong.cu", "incorrect", report(
            "incorrect", {"compiled": 1, "correct": 0, "mismatches": 524288,
                          "compile_seconds": 0.09},
            {"feedback": UNWRITTEN, "message": "524288 of 1.05M outputs of 'c' wrong"},
            ["unwritten", "shape_specific"])),
        c_suite_line("l2_softmax", "candidates/fast.cu", "passed", report(
            "passed", timed(26.98, 26.1, 27.9, 412.0, bench_wall_s=0.92),
            {"feedback": "correct; 26.98x the baseline"})),
        c_suite_line("l2_softmax", "candidates/precision.cu", "incorrect", report(
            "incorrect", {"compiled": 1, "correct": 0}, {"feedback": PRECISION}, ["precision"])),
        c_suite_line("l2_softmax", ATTACK_NAME, "incorrect", report(
            "incorrect", {"compiled": 1, "correct": 0},
            {"feedback": ATTACK + " and <b>bold</b> &amp; more", "candidate": ATTACK_NAME})),
        c_suite_line("l3_bias_gelu", "candidates/syntax.cu", "compile_error", report(
            "compile_error", {"compiled": 0, "compile_seconds": 0.05},
            {"compile_log": "syntax.cu(3): error: expected an expression",
             "feedback": "compile error: syntax.cu(3): error: expected an expression"})),
        c_suite_line("l4_matmul_f32", "candidates/oob.cu", "fault", report(
            "fault", {"compiled": 1, "correct": 0},
            {"feedback": "the kernel faulted: an illegal memory access"})),
        c_suite_line("l4_matmul_f32", "candidates/tiled.cu", "passed", report(
            "passed", timed(4.94, 4.7, 5.1, 1850.0, bench_wall_s=1.7), flags=["noisy"])),
        c_suite_line("l4_attention_causal", "candidates/hang.cu", "timeout", report(
            "timeout", {"compiled": 1, "correct": 0},
            {"feedback": "a kernel ran past the deadline (a hang)"})),
        kb_suite_line("level1/01_relu", "level1_01_relu/honest_cuda.py", "pass", True, report(
            "passed", modelnew("passed", {"start_and_load": 2.1, "verify": 0.4,
                                          "baseline_ready": 0.2, "timed": 1.3, "attribute": 0.1,
                                          "end_candidate": 0.05},
                               speedup=1.18, speedup_low=1.1, speedup_high=1.26, time_us=41.0,
                               baseline_us=48.4, custom_share=0.97, kernel_share=0.9),
            {"kind": "kernelbench", "feedback": "correct on 3 cases; 1.18x the baseline",
             "source": "import torch\nclass ModelNew(torch.nn.Module): ..."},
            preset="kernelbench")),
        kb_suite_line("level1/01_relu", "level1_01_relu/torch_clamp.py", "torch_fallback", True,
                      report("passed", modelnew("passed", {"start_and_load": 1.4, "verify": 0.3,
                                                           "timed": 0.9},
                                                speedup=1.01, speedup_low=0.97, speedup_high=1.05,
                                                time_us=47.9, baseline_us=48.4, torch_fallback=1),
                             {"kind": "kernelbench",
                              "feedback": "correct, but no kernel of its own ran (torch did the "
                                          "work): no speed credit"},
                             ["torch_fallback"], preset="kernelbench")),
        kb_suite_line("level1/05_softmax", "level1_05_softmax/wrong_axis.py", "wrong", True,
                      report("incorrect", modelnew("incorrect", {"start_and_load": 1.9,
                                                                 "verify": 0.6}),
                             {"kind": "kernelbench",
                              "feedback": "case 0: output 0 wrong at [0, 3]: got 0.1, expected "
                                          "0.02 (max abs error 0.9)"}, preset="kernelbench")),
        kb_suite_line("level3/01_mlp", "level3_01_mlp/not_run.py", "pass", None, report(
            "not_run", {"compiled": 1},
            {"kind": "kernelbench", "unavailable": "no NVIDIA GPU: ModelNew candidates need one"},
            preset="kernelbench")),
    ]
    return lines


def batch_lines():
    """A trainer's batch: plain reports, no suite object, the same problem
    many times (90 reports, 72 passed: the charts keep each problem's best
    past MAX_ROWS)."""
    out = []
    for i in range(90):
        s = 0.5 + (i % 9) * 0.4
        if i % 5 == 4:
            out.append(report("incorrect", {"compiled": 1, "correct": 0},
                               {"problem": f"p{i % 7}", "candidate": f"rollout-{i}",
                                "feedback": PRECISION}, ["precision"]))
        else:
            out.append(report("passed", timed(s, s * 0.97, s * 1.03, 100.0),
                              {"problem": f"p{i % 7}", "candidate": f"rollout-{i}"}))
    return out


def vet_lines():
    """`kreward problems vet`'s lines, written by hand: a kept problem, a
    flagged one, a refused one, an import failure, a duplicate; a note and
    a reason that try to inject markup."""
    def line(problem, kept, **kw):
        d = {"problem": problem, "path": f"level1/{problem}.py", "kind": "kernelbench",
             "kept": kept, "reasons": [],
             "import": {"ok": True, "error": None, "cases": ["base", "odd"], "tensors": 2,
                        "notes": []},
             "deterministic": True, "device": "cuda:0",
             "reference_ms": {"eager": 0.41, "compile": 0.22}, "launch_bound": False,
             "trivial": {"zeros": "fails", "constant": "fails", "input": "fails",
                         "other_case": "fails"},
             "strengthened": False, "weak": None, "tolerance_headroom": 12.5,
             "duplicate_of": None, "seconds": 3.2}
        d.update(kw)
        return d
    return [
        line("01_relu", True),
        line("05_softmax", True, reasons=["launch-bound at its timing case: speedups are noisy"],
             launch_bound=True, reference_ms={"eager": 0.012, "compile": 0.03}),
        line("19_relu_zeros", False, reasons=["zeros pass every case: it cannot tell a lazy "
                                              "kernel from a fast one"],
             trivial={"zeros": "passes", "constant": "passes", "input": "fails",
                      "other_case": None}, weak="outputs are all zeros"),
        line("23_broken", False, reasons=["the problem does not import"],
             **{"import": {"ok": False, "error": "ModuleNotFoundError: No module named 'flash'\n"
                           + ATTACK, "cases": [], "tensors": 0, "notes": [ATTACK]}},
             deterministic=None, reference_ms={"eager": None, "compile": None},
             launch_bound=None, trivial={"zeros": None, "constant": None, "input": None,
                                         "other_case": None}, tolerance_headroom=None,
             seconds=0.4),
        line("42_matmul_again", False, reasons=["a duplicate of 13_matmul_square"],
             duplicate_of="13_matmul_square"),
        line("7_gemm_nondet", True, reasons=["<b>nondeterministic</b> reference: widened"],
             deterministic=False, strengthened=True, tolerance_headroom=1.4,
             reference_ms={"eager": 3.9, "compile": 2.2}),
        line("l2_softmax", True, kind="kreward", path="examples/problems/l2_softmax/problem.json",
             reference_ms={"eager": 0.09, "compile": None}),
    ]


def write_jsonl(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path
