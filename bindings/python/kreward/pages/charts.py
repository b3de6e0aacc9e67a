"""The pages' charts: matplotlib figures rendered to SVG and inlined into
the page (no JavaScript, no fetch; text drawn as paths, so a chart looks
the same whatever fonts the viewer has). Each function takes plain rows and
returns Markup (a <figure> holding an <svg>), or a note saying why there is
no chart (matplotlib missing: `pip install 'kreward[pages]'`).

Figures are made with matplotlib's object API (matplotlib.figure.Figure),
never pyplot: no global figure state, nothing opened on a display. The SVG
is deterministic (a fixed hash salt, no date) so a page made twice from the
same input is the same file."""
import io
import math
import re

from .document import Markup, el

MAX_ROWS = 60  # rows in one chart; the pages say which they kept

VERDICT_COLORS = {"passed": "#1a7f37", "incorrect": "#cf222e", "compile_error": "#e16f24",
                  "invalid_plan": "#bf8700", "launch_error": "#a475f9", "fault": "#8250df",
                  "timeout": "#953800", "not_run": "#8c959f", "error": "#57606a"}
PALETTE = ["#0969da", "#e16f24", "#1a7f37", "#8250df", "#bf3989", "#bf8700", "#1b7c83",
           "#cf222e", "#57606a", "#6639ba"]

try:
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
    HAVE_MATPLOTLIB = True
except ImportError:  # the pages still render: tables, no charts
    HAVE_MATPLOTLIB = False

WHY_NO_CHARTS = "charts need matplotlib (pip install 'kreward[pages]'); the tables hold it all"


def _label(text, width=38):
    """A tick label: short, and never read as mathtext ($...$)."""
    text = str(text)
    if len(text) > width:
        text = text[:width - 1] + "\u2026"
    return text.replace("$", r"\$")


def _rows_axes(n, width=9.0, per_row=0.26, extra=1.2):
    """A figure sized for n rows, its axes, and the rows' y positions (the
    first row on top)."""
    fig = Figure(figsize=(width, max(2.2, extra + per_row * n)), dpi=96, layout="constrained")
    return fig, fig.add_subplot(), [n - 1 - i for i in range(n)]


def render(fig, alt):
    """The figure as inline SVG Markup (no XML prolog, no metadata)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "kreward.pages", "svg.fonttype": "path",
                                "font.size": 9}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None,
                                                  "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return el("figure", Markup(text), class_="chart", role="img", aria_label=alt)


def unavailable():
    return el("p", WHY_NO_CHARTS, class_="note")


def _style(ax):
    ax.grid(True, axis="x", color="#d0d7de", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _rows_frame(fig, ax, labels, xlabel, title, legend_cols=0):
    """A chart of one row per label, top to bottom: its labels, x label,
    title, a legend under it (legend_cols > 0), the house style."""
    n = len(labels)
    ax.set_yticks(range(n), [_label(x, 48) for x in labels][::-1])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(xlabel)
    if legend_cols:
        fig.legend(loc="outside lower center", ncol=legend_cols, fontsize=8, frameon=False)
    ax.set_title(title, loc="left", fontsize=10)
    _style(ax)


def _log_axis(axis, suffix=""):
    """Log ticks at 1, 2, 5 per decade, written plainly (2x, not 2x10^0)."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))
    axis.set_minor_formatter(NullFormatter())


def counts(rows, title, colors=None):
    """Horizontal bars: rows [(label, count)]."""
    if not HAVE_MATPLOTLIB:
        return unavailable()
    fig, ax, _ = _rows_axes(len(rows), width=6.0, per_row=0.32)
    labels = [_label(r[0]) for r in rows][::-1]
    values = [r[1] for r in rows][::-1]
    color = [(colors or {}).get(r[0], PALETTE[0]) for r in rows][::-1]
    bars = ax.barh(range(len(rows)), values, color=color, height=0.7)
    ax.bar_label(bars, padding=3, fontsize=8)
    ax.set_yticks(range(len(rows)), labels)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    ax.set_xlim(0, max(values + [1]) * 1.15)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _style(ax)
    return render(fig, title)


def speedups(rows, title):
    """Speedup per candidate with its 95 % interval, log scale, 1x marked:
    rows [(label, speedup, low or None, high or None, group)]; one colour
    per group (its problem)."""
    if not HAVE_MATPLOTLIB:
        return unavailable()
    fig, ax, ys = _rows_axes(len(rows))
    groups = {}
    for r in rows:
        groups.setdefault(r[4], PALETTE[len(groups) % len(PALETTE)])
    for y, (label, s, lo, hi, group) in zip(ys, rows):
        color = groups[group]
        if lo is not None and hi is not None:
            ax.errorbar([s], [y], xerr=[[max(0.0, s - lo)], [max(0.0, hi - s)]], fmt="o",
                        color=color, ecolor=color, elinewidth=2, capsize=3, markersize=5)
        else:
            ax.plot([s], [y], "o", color=color, markersize=5, markerfacecolor="white")
    ax.axvline(1.0, color="#57606a", linewidth=1, linestyle="--")
    ax.set_xscale("log")
    values = [v for r in rows for v in (r[1], r[2], r[3]) if v]
    lo, hi = min(values + [1.0]), max(values + [1.0])
    ax.set_xlim(lo / 1.4, hi * 1.4)
    _rows_frame(fig, ax, [r[0] for r in rows],
                "speedup (log scale); bar: 95 % interval; hollow: none; dashed: 1x", title)
    _log_axis(ax.xaxis, "x")
    return render(fig, title)


def paired_times(rows, title, unit="us", names=("candidate", "baseline")):
    """Two times per row on a log scale, joined by a line (its length is
    the ratio): rows [(label, a or None, b or None)]."""
    if not HAVE_MATPLOTLIB:
        return unavailable()
    fig, ax, ys = _rows_axes(len(rows), per_row=0.3, extra=1.5)
    for y, (_, a, b) in zip(ys, rows):
        if a and b:
            ax.plot([a, b], [y, y], color="#afb8c1", linewidth=2, zorder=1)
    for k, (name, color, marker) in enumerate(((names[0], PALETTE[0], "o"),
                                               (names[1], PALETTE[8], "D"))):
        pts = [(r[1 + k], y) for r, y in zip(rows, ys) if r[1 + k]]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker,
                       s=30, label=name, zorder=2)
    values = [v for r in rows for v in r[1:] if v]
    ax.set_xscale("log")
    if values:
        ax.set_xlim(min(values) / 1.5, max(values) * 1.5)
    _rows_frame(fig, ax, [r[0] for r in rows], f"{unit} per call (log scale)", title, 2)
    ax.grid(True, axis="y", color="#eaeef2", linewidth=0.6)
    _log_axis(ax.xaxis)
    return render(fig, title)


def stacked(rows, components, title, unit="s"):
    """Stacked horizontal bars: rows [(label, {component: value})], in the
    order of `components`."""
    if not HAVE_MATPLOTLIB:
        return unavailable()
    fig, ax, ys = _rows_axes(len(rows), per_row=0.28, extra=1.6)
    left = [0.0] * len(rows)
    for k, comp in enumerate(components):
        widths = [max(0.0, r[1].get(comp) or 0.0) for r in rows]
        ax.barh(ys, widths, left=left, height=0.7, color=PALETTE[k % len(PALETTE)],
                label=_label(comp, 30))
        left = [a + b for a, b in zip(left, widths)]
    _rows_frame(fig, ax, [r[0] for r in rows], f"wall time ({unit})", title,
                min(5, len(components)))
    return render(fig, title)


def progress(points, title):
    """A search's progress. points: [(index, verdict, speedup or None,
    reward or None, refused?)]; two panels: speedup per evaluation with the
    best so far, and reward per evaluation with the best so far."""
    if not HAVE_MATPLOTLIB:
        return unavailable()
    fig = Figure(figsize=(9.0, 5.6), dpi=96, layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    xs = [p[0] for p in points]
    for ax, k, name in ((top, 2, "speedup"), (bottom, 3, "reward")):
        best, line = -math.inf, []
        for p in points:
            v = p[k]
            ok = v is not None and (k == 3 or p[1] == "passed")
            if ok and v > best:
                best = v
            line.append(best if best > -math.inf else None)
        for verdict in sorted({p[1] for p in points}):
            sel = [p for p in points if p[1] == verdict and p[k] is not None]
            if sel:
                ax.scatter([p[0] for p in sel], [p[k] for p in sel], s=22,
                           color=VERDICT_COLORS.get(verdict, PALETTE[3]),
                           marker="x" if any(p[4] for p in sel) else "o",
                           label=verdict.replace("_", " "), zorder=3)
        steps = [(x, y) for x, y in zip(xs, line) if y is not None]
        if steps:
            ax.step([s[0] for s in steps], [s[1] for s in steps], where="post", color="#1f2328",
                    linewidth=1.4, label=f"best {name} so far", zorder=2)
        ax.set_ylabel(name + (" (x)" if k == 2 else ""))
        ax.grid(True, color="#d0d7de", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.legend(loc="best", fontsize=8, frameon=False, ncol=2)
    bottom.set_xlabel("evaluation (in the order the search made them)")
    top.set_title(title, loc="left", fontsize=10)
    return render(fig, title)


def knob_effects(knobs, points, title):
    """Speedup of each passed configuration against each knob's value:
    knobs {name: [values]}; points [({knob: value}, speedup)]."""
    if not HAVE_MATPLOTLIB or not points:
        return unavailable() if not HAVE_MATPLOTLIB else None
    names = list(knobs)
    cols = min(3, len(names))
    rows_n = (len(names) + cols - 1) // cols
    fig = Figure(figsize=(3.2 * cols, 2.4 * rows_n + 0.4), dpi=96, layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False, sharey=True)
    for i, name in enumerate(names):
        ax = axes[i // cols][i % cols]
        values = list(knobs[name])
        pos = {repr(v): j for j, v in enumerate(values)}
        xs = [pos.get(repr(a.get(name)), -1) for a, _ in points]
        ax.scatter(xs, [s for _, s in points], s=16, color=PALETTE[0], alpha=0.7)
        ax.set_xticks(range(len(values)), [_label(v, 8) for v in values])
        ax.set_title(_label(name), fontsize=9)
        ax.grid(True, axis="y", color="#d0d7de", linewidth=0.6)
    for j in range(len(names), rows_n * cols):
        axes[j // cols][j % cols].set_visible(False)
    axes[0][0].set_ylabel("speedup (x)")
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return render(fig, title)
