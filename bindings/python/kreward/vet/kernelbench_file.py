"""Vetting one KernelBench-format file: the import (its probes and the
soundness check run in subprocesses: kernelbench/importer.py,
soundness.py), then measure.py in a subprocess on one device."""
import json
import os
import subprocess
import sys

from ..kernelbench.importer import ImportRefused, import_problem

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def vet(path, devices, atol, rtol, compile_too=True, timeout_s=600):
    """A record (kreward/vet/__init__.py documents its fields). devices: a
    placement.Devices, where the file's reference is measured."""
    record = {"kind": "kernelbench"}
    try:
        imp = import_problem(path, atol=atol, rtol=rtol, timeout_s=timeout_s)
    except ImportRefused as e:
        record["import"] = {"ok": False, "error": e.reason}
        if "not deterministic" in e.reason:
            record["deterministic"] = False
        return record
    record["import"] = {"ok": True, "error": None, "cases": [c[0] for c in imp.cases],
                        "tensors": len(imp.tensors), "notes": list(imp.notes),
                        "device_only_reason": imp.device_only_reason,
                        "from_cache": bool(getattr(imp, "from_cache", False))}
    sound = imp.soundness or {}
    record["trivial"] = sound.get("trivial")
    record["strengthened"] = sound.get("strong")
    record["weak"] = imp.weak
    if sound.get("error"):
        record.setdefault("notes", []).append(f"soundness not checked: {sound['error']}")
    with devices.acquire() as where:
        req = {"path": imp.path, "base": imp.base_probe, "cases": imp.cases, "atol": atol,
               "rtol": rtol, "device": where.torch_device, "time": where.times,
               "compile": compile_too}
        result = _measure(req, where, timeout_s)
    if "error" in result:
        record["measure_error"] = result["error"]
        return record
    notes = result.pop("notes", [])
    record.update(result)
    record.setdefault("notes", []).extend(notes)
    if not where.times:
        record["time_skipped"] = where.why_not_timed
    return record


def _measure(req, where, timeout_s):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [_PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        CUDA_VISIBLE_DEVICES=where.visible_devices)
    try:
        out = subprocess.run([sys.executable, "-m", "kreward.vet.measure"],
                             input=json.dumps(req), capture_output=True, text=True, env=env,
                             timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"ran past {timeout_s} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1][:300]
        how = (f"exit {out.returncode}" if out.returncode >= 0 else
               "killed: out of memory?" if out.returncode == -9 else f"signal {-out.returncode}")
        return {"error": f"the measuring process ended ({how}): {tail}"}
    return json.loads(lines[-1])
