"""Vetting one KernelBench-format file in two steps: the import (its probes
and the soundness check run in subprocesses on the CPU:
kernelbench/importer.py, soundness.py), then measure.py in a subprocess on
one device. A run imports a chunk of files, then measures them (vet/__init__),
so no import's CPU work disturbs a measurement's clock."""
import time

from .. import json_process
from ..kernelbench.importer import ImportRefused, import_problem


def vet(path, devices, atol, rtol, compile_too=True, timeout_s=600):
    """Both steps: a record (kreward/vet/__init__.py documents its fields).
    devices: a placement.Devices, where the file's reference is measured."""
    record, imp = import_step(path, atol, rtol, timeout_s)
    return measure_step(record, imp, devices, atol, rtol, compile_too, timeout_s)


def import_step(path, atol, rtol, timeout_s=600):
    """(record, ImportedProblem or None when the import was refused: the
    record is then complete)."""
    record = {"kind": "kernelbench"}
    try:
        imp = import_problem(path, atol=atol, rtol=rtol, timeout_s=timeout_s)
    except ImportRefused as e:
        record["import"] = {"ok": False, "error": e.reason}
        if "not deterministic" in e.reason:
            record["deterministic"] = False
        return record, None
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
        record["soundness_error"] = sound["error"]
    return record, imp


def measure_step(record, imp, devices, atol, rtol, compile_too=True, timeout_s=600):
    """The record with what measure.py found on a device (as it is when the
    import was refused)."""
    if imp is None:
        return record
    # started before the device is free: its torch import overlaps the
    # measurement ahead of it. It sees no GPU until the request names its
    # own (measure.py), so nothing it did before can land on another's
    child = json_process.start("kreward.vet.measure", env={"CUDA_VISIBLE_DEVICES": ""})
    t0 = time.monotonic()
    try:
        with devices.acquire() as where:
            waited = time.monotonic() - t0
            req = {"path": imp.path, "base": imp.base_probe, "cases": imp.cases, "atol": atol,
                   "rtol": rtol, "device": where.torch_device, "time": where.times,
                   "compile": compile_too, "visible_devices": where.visible_devices}
            result = child.call(req, timeout_s, "the measuring process")
    finally:
        child.kill()
    if "error" in result:
        record["measure_error"] = result["error"]
        return record
    notes = result.pop("notes", [])
    steps = result.pop("steps_s", {})
    record.update(result)
    record.setdefault("steps_s", {}).update(device_wait_s=round(waited, 3), **steps)
    record.setdefault("notes", []).extend(notes)
    if not where.times:
        record["time_skipped"] = where.why_not_timed
    return record

