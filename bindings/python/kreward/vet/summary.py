"""The summary of a vetting run: counts, what refused how many, and one
row per problem (markdown: it reads in a terminal and renders in docs)."""

PER_PROBLEM_ROWS = 200  # beyond this, the table lists the refused ones only


def _ms(v):
    return "-" if v is None else f"{v:.3g}"


def _reason_class(reason):
    head = reason.split(":", 1)[0]
    if head.startswith("duplicate of"):
        return "duplicate"
    return head


def table(records, limits, devices, skipped=()):
    kept = [r for r in records if r["kept"]]
    lines = [f"# Vetting: {len(kept)} of {len(records)} problems kept", ""]
    lines.append(f"Limits: reference under {limits.max_reference_ms:g} ms eager, "
                 f"tolerance headroom at least {limits.min_tolerance_headroom:g}, "
                 f"{'launch-bound refused, ' if limits.refuse_launch_bound else ''}"
                 f"{'weak refused, ' if limits.refuse_weak else ''}"
                 f"{'duplicates refused' if limits.refuse_duplicates else 'duplicates kept'}; "
                 f"measured on {', '.join(devices)}.")
    unchecked = {}
    for r in records:
        for u in r.get("unchecked") or []:
            unchecked[u] = unchecked.get(u, 0) + 1
    if unchecked:
        lines.append("Not checked: " + "; ".join(f"{u} ({n})" for u, n in sorted(unchecked.items()))
                     + ".")
    if skipped:
        lines.append(f"Skipped {len(skipped)} file(s) that are not problems.")
    lines.append("")
    counts = {}
    for r in records:
        for reason in r["reasons"]:
            c = _reason_class(reason)
            counts[c] = counts.get(c, 0) + 1
    if counts:
        lines += ["| refused for | problems |", "|---|---:|"]
        lines += [f"| {c} | {n} |" for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
        lines.append("")
    rows = records if len(records) <= PER_PROBLEM_ROWS else [r for r in records if not r["kept"]]
    if rows:
        lines += ["| problem | kind | kept | eager ms | compile ms | headroom | trivial passes "
                  "| why refused |", "|---|---|---|---:|---:|---:|---|---|"]
        for r in rows:
            ms = r.get("reference_ms") or {}
            trivial = r.get("trivial") or {}
            passes = ", ".join(k for k, v in trivial.items() if v) or "-"
            if r.get("strengthened") and passes != "-":
                passes += " (broken: inputs rescaled)"
            head = r.get("tolerance_headroom")
            head = "-" if head is None else "exact" if head >= 1e9 else f"{head:.3g}"
            why = "; ".join(r["reasons"]).replace("|", "/")
            lines.append(f"| {r['problem']} | {r['kind']} | {'yes' if r['kept'] else 'no'} | "
                         f"{_ms(ms.get('eager'))} | {_ms(ms.get('compile'))} | "
                         f"{head} | {passes} | {why[:160]} |")
    return "\n".join(lines) + "\n"
