"""Duplicates: two problems that compute the same function on the same
inputs. Each record carries a fingerprint (measure.py, kreward_file.py): a
key of what the inputs and outputs are (shapes, dtypes, distributions;
for a kreward problem, its reference's source too) and, for a KernelBench
file, a sample of its outputs on inputs drawn from fixed seeds (`samples`
the first, `draws` the others). Records with one key and close samples at
every draw both have are one problem; the first by name is the original,
the others name it in duplicate_of."""
import math

ATOL, RTOL = 1e-5, 1e-3  # two references of one function differ by rounding only


def _close(a, b):
    if isinstance(a, str) or isinstance(b, str):  # "nan", "inf" kept as text
        return a == b
    return abs(a - b) <= ATOL + RTOL * abs(b) and math.isfinite(a) == math.isfinite(b)


def _same_outputs(x, y):
    if x is None or y is None:
        return x is None and y is None  # a kreward problem: the key holds everything
    if len(x) != len(y):
        return False
    for a, b in zip(x, y):
        if len(a["values"]) != len(b["values"]):
            return False
        if not all(_close(u, v) for u, v in zip(a["values"], b["values"])):
            return False
        if not (_close(a["sum"], b["sum"]) and _close(a["abs_sum"], b["abs_sum"])):
            return False
    return True


def _same_draws(x, y):
    """Every draw both fingerprints hold agrees (a record of an earlier
    run holds none beyond the first)."""
    return all(_same_outputs(a, b) for a, b in zip(x.get("draws") or [], y.get("draws") or []))


def mark(records):
    """Sets duplicate_of on every record (None for originals). The original
    is the first by name among those kept on every other count (their
    "kept" before duplicates are judged), then among the rest: a problem
    refused for a noisy reading must not take its copy down with it."""
    originals = {}
    for r in sorted(records, key=lambda r: (not r.get("kept", True), r["problem"])):
        r["duplicate_of"] = None
        fp = r.get("fingerprint")
        if not fp or not (r.get("import") or {}).get("ok"):
            continue
        for first in originals.get(fp["key"], []):
            if first.get("kind") == r.get("kind") and _same_outputs(
                    first["fingerprint"].get("samples"), fp.get("samples")) and _same_draws(
                    first["fingerprint"], fp):
                r["duplicate_of"] = first["problem"]
                break
        else:
            originals.setdefault(fp["key"], []).append(r)
    return records
