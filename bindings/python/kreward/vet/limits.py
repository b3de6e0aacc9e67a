"""What a vetted problem must meet to be kept, and the judgement itself.

Judging is separate from measuring: a record holds what was measured, and
judge() turns it into kept/reasons under the limits of this run, so a run
resumed with other limits judges again without measuring again."""
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Limits:
    # CUDA Agent keeps problems whose reference takes under 100 ms (eager)
    max_reference_ms: float = 100.0
    # a problem is refused when timing its own sizes measures launches
    refuse_launch_bound: bool = True
    # the tolerance over the reference's own error against float64: below
    # 2, a correct candidate that rounds the other way can fail
    min_tolerance_headroom: float = 2.0
    # a kreward problem's reference under this many microseconds per call
    # (CUPTI kernel time) is too short for a speedup to mean much
    min_kernel_us: float = 5.0
    refuse_weak: bool = True
    refuse_duplicates: bool = True

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (d or {}).items() if k in names})


def judge(record, limits):
    """(kept, reasons, unchecked) for a record: reasons say why it is
    refused; unchecked lists the limits this run could not check (no GPU,
    a measurement that failed), which do not refuse on their own."""
    reasons, unchecked = [], []
    imp = record.get("import") or {}
    if not imp.get("ok"):
        return False, [f"import: {imp.get('error') or 'refused'}"], []
    if record.get("measure_error"):
        reasons.append(f"the reference did not run: {record['measure_error']}")
    det = record.get("deterministic")
    if det is False:
        reasons.append("not deterministic: two runs on the same inputs differ beyond the tolerance")
    elif det is None and not record.get("measure_error"):
        unchecked.append("determinism")
    if record.get("soundness_error"):
        unchecked.append(f"soundness ({record['soundness_error']})")
    elif (record.get("kind") == "kreward" and record.get("trivial") is None
          and not record.get("measure_error")):
        unchecked.append("soundness (the library's checks need a GPU)")
    if record.get("weak") and limits.refuse_weak:
        reasons.append(f"weak: {record['weak']}")
    ms = (record.get("reference_ms") or {}).get("eager")
    if ms is None:
        unchecked.append("reference time" + (f" ({record['time_skipped']})"
                                             if record.get("time_skipped") else ""))
    elif ms > limits.max_reference_ms:
        reasons.append(f"slow reference: {ms:.3g} ms eager > {limits.max_reference_ms:g} ms")
    if record.get("launch_bound") and limits.refuse_launch_bound:
        reasons.append("launch-bound: at the file's own sizes the GPU waits on the host's launches")
    kernel_us = record.get("kernel_us")
    if kernel_us is not None and kernel_us < limits.min_kernel_us:
        reasons.append(f"too small to time: {kernel_us:.3g} us per call < {limits.min_kernel_us:g} us")
    headroom = record.get("tolerance_headroom")
    if headroom is None:
        if record.get("kind") == "kernelbench" and not record.get("measure_error"):
            unchecked.append("tolerance headroom")
    elif headroom < limits.min_tolerance_headroom:
        reasons.append(f"tolerance too tight: the reference's own error against float64 is "
                       f"1/{headroom:.3g} of atol + rtol|x| (at most 1/"
                       f"{limits.min_tolerance_headroom:g} is kept)")
    if record.get("duplicate_of") and limits.refuse_duplicates:
        reasons.append(f"duplicate of {record['duplicate_of']}")
    return not reasons, reasons, unchecked
