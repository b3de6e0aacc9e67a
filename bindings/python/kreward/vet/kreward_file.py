"""Vetting one kreward problem (a problem.json and its reference.cu), in a
subprocess on one device (python -m kreward.vet.kreward_file, a JSON
request on stdin, one JSON line out): a reference that faults takes its
CUDA context with it, so it must not be the vetting process's.

- import: the spec parses, every shape evaluates, the reference compiles
  and its plan fits (NVRTC, no GPU needed);
- on a GPU: the library's soundness checks (kr_problem_sanity: zeros, a
  constant, an input copied, the reference near-constant), then the
  reference evaluated as a candidate against itself: it passes
  verification (which runs it twice at other addresses and compares
  bitwise: deterministic), and the benchmark gives its time (CUPTI kernel
  time per call: kernel_us; baseline_us is the reference's own);
- duplicates: the tensors, cases and the reference's source with comments
  and whitespace removed, hashed.
A CUDA reference has no float64 form to measure tolerance headroom with."""
import hashlib
import json
import os
import re

from .. import json_process


def vet(path, devices, timeout_s=600):
    """A record for the kreward problem at path (a problem.json, or a
    folder holding one)."""
    if os.path.isdir(path):
        path = os.path.join(path, "problem.json")
    record = {"kind": "kreward"}
    with devices.acquire() as where:
        req = {"path": path, "gpu": where.torch_device != "cpu"}
        result = json_process.call("kreward.vet.kreward_file", req, timeout_s,
                                   "the checking process",
                                   env={"CUDA_VISIBLE_DEVICES": where.visible_devices})
    if "error" in result:  # the process ended, or run() raised: the spec itself was read
        record["import"] = {"ok": True, "error": None}
        record["measure_error"] = result["error"]
        return record
    record.update(result)
    if not req["gpu"]:
        record["time_skipped"] = where.why_not_timed or "kreward problems are timed on a GPU"
        record.setdefault("notes", []).append("determinism, the soundness checks and the "
                                              "reference's time need a GPU")
    return record


def _normalised_source(text):
    """The source without comments and layout, its `// kreward:` launch
    lines kept (two problems with one kernel launched otherwise differ)."""
    directives = re.findall(r"//\s*kreward:[^\n]*", text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return " ".join(text.split() + [" ".join(d.split()) for d in directives])


def _fingerprint(info, folder):
    ref = info.get("reference") or {}
    source = ""
    if ref.get("kind") == "source" and ref.get("source"):
        with open(os.path.join(folder, ref["source"]), errors="replace") as f:
            source = _normalised_source(f.read())
    key = {"tensors": [[t["dtype"], t["role"], t["shape"], t.get("init")] for t in info["tensors"]],
           "cases": [c["dims"] for c in info["cases"]], "scalars": info.get("scalars"),
           "reference": source}
    return {"key": hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32],
            "samples": None}


def run(req):
    import kreward
    from kreward.errors import KrewardError
    out = {"notes": []}
    ctx = kreward.Context(no_device=not req["gpu"])
    try:
        problem = ctx.load_problem(req["path"])
        info = problem.info()
        if (info.get("reference") or {}).get("kind") == "source":
            problem.check_reference()
    except KrewardError as e:
        return {"import": {"ok": False, "error": str(e)}}
    folder = os.path.dirname(os.path.abspath(req["path"]))
    out["import"] = {"ok": True, "error": None, "cases": [c["name"] for c in info["cases"]],
                     "tensors": len(info["tensors"]), "notes": []}
    out["fingerprint"] = _fingerprint(info, folder)
    out["tolerance_headroom"] = None
    ref = info.get("reference") or {}
    if ref.get("kind") != "source":
        out["notes"].append("a golden reference (computed by the caller): only the spec is vetted")
        return out
    if not req["gpu"] or not ctx.has_device:
        return out
    out["device"] = f"cuda:0 ({ctx.info().get('device', {}).get('name', 'GPU')})"
    sound, summary = problem.sanity()
    out["sanity"] = summary
    out["trivial"] = _trivial_from_summary(summary)
    out["weak"] = None if sound else _first_failure(summary)
    with open(os.path.join(folder, ref["source"])) as f:
        source = f.read()
    report = ctx.evaluate(problem, source, preset="precise", name=ref["source"])
    verdict = report.verdict
    out["deterministic"] = verdict == "passed" or None
    if verdict != "passed":
        out["measure_error"] = (f"the reference against itself: {verdict}: "
                                f"{(report.message or '')[:200]}")
        return out
    base_us, time_us = report.get("baseline_us"), report.get("time_us")
    out["reference_ms"] = {"eager": round(base_us / 1e3, 6) if base_us else None, "compile": None}
    out["kernel_us"] = time_us
    out["launch_bound"] = None
    return out


def _trivial_from_summary(summary):
    """{answer: passes every case} from kr_problem_sanity's lines
    (lib/verify/sanity.c: "ok: ..." or "UNSOUND: ..." per check)."""
    found = {}
    for line in (summary or "").splitlines():
        verdict, _, what = line.partition(": ")
        if verdict not in ("ok", "UNSOUND"):
            continue
        passes = verdict == "UNSOUND"
        if what.startswith("writing all zeros"):
            found["zeros"] = passes
        elif what.startswith("writing all ones") or what.startswith("the reference outputs"):
            found["constant"] = found.get("constant", False) or passes
        elif what.startswith("writing a copy of input"):
            found["input"] = found.get("input", False) or passes
        elif what.startswith("the outputs"):
            found["other_case"] = passes
    return found or None


def _first_failure(summary):
    for line in (summary or "").splitlines():
        if line.startswith("UNSOUND: "):
            return line[len("UNSOUND: "):].strip()
    return "the soundness checks failed"


if __name__ == "__main__":
    json_process.serve(run)
