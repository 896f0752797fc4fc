"""One figure per question (areas.Question): small multiples, a panel per link and peer, Conflux
solid and its peer dashed in the same colour with min–max bars, and under each panel a strip of
Conflux's advantage over that peer, shaded where Conflux trails. No legend over the data: each
panel's title names its pair; the caption says the machine, the date and how to read it."""
import math
import textwrap
import os
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]
SIZE_TICKS = [10, 100, 1000, 10000, 100000, 1000000]
SIZE_LABELS = ["10 B", "100 B", "1 KB", "10 KB", "100 KB", "1 MB"]


def size_name(x):
    """Bytes as a benchmark chose them: powers of two in KiB / MiB (64 KiB), others in 10^3
    steps (100 KB)."""
    if x is None:
        return "—"
    binary = x >= 1024 and x & (x - 1) == 0
    for step, unit in (((1 << 20, "MiB"), (1 << 10, "KiB")) if binary else ((1000000, "MB"), (1000, "KB"))):
        if x >= step:
            v = x / step
            return f"{v:g} {unit}"
    return f"{x} B"


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display on a build machine
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("report: matplotlib missing (python3-matplotlib): no figures", file=sys.stderr)
        return None


def _drawn(ax, xs, triples, colour, style, marker):
    pts = [(x, t) for x, t in zip(xs, triples) if t and all(v is not None and v > 0 for v in t)]
    if not pts:
        return
    ys = [t[0] for _, t in pts]
    lo = [max(t[0] - t[1], 0) for _, t in pts]
    hi = [max(t[2] - t[0], 0) for _, t in pts]
    ax.errorbar([x for x, _ in pts], ys, yerr=[lo, hi], color=colour, linestyle=style, marker=marker,
                ms=4, capsize=2, lw=1.5)


def _label(v, _pos=None):
    return f"{v:,.0f}" if v >= 10 else f"{v:g}"


def _few_ticks(ax, lo, hi, times=False):
    """Log y from lo to hi (at least a factor of 4, so that ticks fall inside), ticks at 1, 2, 5
    per decade written as plain numbers (× for the advantage strip), fewer when the range is
    wide; no minor ticks: they cost most of the drawing time and say little."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    mid = math.sqrt(lo * hi)
    lo, hi = min(lo, mid / 2), max(hi, mid * 2)
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    steps = [m * 10 ** d for d in decades for m in (1, 2, 5)]  # the ends on a labelled step
    lo = max([t for t in steps if t <= lo] or [lo]) / 1.15
    hi = min([t for t in steps if t >= hi] or [hi]) * 1.15
    ax.set_ylim(lo, hi)
    for subs in ((1, 2, 5), (1,)):
        ticks = [m * 10 ** d for d in decades for m in subs if lo <= m * 10 ** d <= hi]
        if len(ticks) <= 6:
            break
    if len(ticks) > 6:  # every other decade, keeping 1 (the strip's even line)
        ticks = [t for t in ticks if round(math.log10(t)) % 2 == 0]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter((lambda v, p: _label(v) + "×") if times else _label))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_locator(NullLocator())


def _size_axis(ax, xs):
    ax.set_xscale("log")
    lo = min(min(xs), 10) / 1.6
    hi = max(max(xs), 1000000) * 1.6
    ax.set_xlim(lo, hi)
    ax.set_xticks(SIZE_TICKS)
    ax.set_xticklabels(SIZE_LABELS, fontsize=7)
    from matplotlib.ticker import NullLocator
    ax.xaxis.set_minor_locator(NullLocator())


def panel(fig, spec, s, unit, colour, xlabel):
    """One pair: the values above, the advantage strip below. Returns False when there is
    nothing to draw (no point with a size)."""
    xs = sorted(x for x in s.points if x is not None)
    if not xs:
        return False
    sub = spec.subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
    ax = fig.add_subplot(sub[0])
    rax = fig.add_subplot(sub[1], sharex=ax)
    _drawn(ax, xs, [s.points[x][0] for x in xs], colour, "-", "o")
    _drawn(ax, xs, [s.points[x][1] for x in xs], colour, "--", "s")
    ax.set_yscale("log")
    ys = [v for x in xs for t in s.points[x] if t for v in t if v and v > 0] or [1]
    _few_ticks(ax, min(ys) / 1.3, max(ys) * 1.3)
    ax.set_ylabel(unit, fontsize=8)
    ax.set_title(s.title(), fontsize=8.5)
    ax.grid(True, which="major", alpha=0.3)
    ax.tick_params(labelbottom=False, labelsize=7)
    adv = [(x, s.advantage(x)) for x in xs]
    adv = [(x, a) for x, a in adv if a is not None]
    if adv:
        rax.plot([x for x, _ in adv], [a for _, a in adv], color=colour, marker="o", ms=3, lw=1)
        # shade the span around each point where Conflux trails (half-way to its neighbours in log x)
        for i, (x, a) in enumerate(adv):
            if a < 1:
                left = math.sqrt(x * adv[i - 1][0]) if i else x / 1.5
                right = math.sqrt(x * adv[i + 1][0]) if i + 1 < len(adv) else x * 1.5
                rax.axvspan(left, right, color="#d62728", alpha=0.18, lw=0)
    rax.axhline(1, color="k", lw=0.8)
    rax.set_yscale("log")
    top = max([a for _, a in adv] + [1 / a for _, a in adv] + [1.5]) * 1.3
    _few_ticks(rax, 1 / top, top, times=True)
    rax.set_ylabel("ahead", fontsize=7)
    rax.tick_params(labelsize=6)
    rax.grid(True, which="major", alpha=0.3)
    _size_axis(rax, xs)
    rax.set_xlabel(xlabel, fontsize=7)
    return True


def draw(q, path, caption):
    """The question's figure as a PNG at path; returns the list of panels drawn (their titles),
    or None when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return None
    series = [s for s in q.main() if any(x is not None for x in s.points)]
    if not series:
        return []
    ncol = min(3, len(series))
    nrow = (len(series) + ncol - 1) // ncol
    height = 3.4 * nrow + 1.3  # inches: the panels, the title above, the caption below
    fig = plt.figure(figsize=(4.3 * ncol, height))
    grid = fig.add_gridspec(nrow, ncol, hspace=0.45, wspace=0.3, top=1 - 0.85 / height,
                            bottom=0.75 / height)
    links = []
    for s in series:  # one colour per link, the same for Conflux and its peer
        if s.link not in links:
            links.append(s.link)
    drawn = []
    for i, s in enumerate(series):
        if panel(fig, grid[i // ncol, i % ncol], s, q.unit, COLOURS[links.index(s.link) % len(COLOURS)], q.xlabel):
            drawn.append(s.title())
    fig.suptitle(textwrap.fill(q.title, 48 * ncol), fontsize=10)
    fig.text(0.01, 0.01, textwrap.fill(caption, 75 * ncol), fontsize=7, ha="left", va="bottom")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return drawn
