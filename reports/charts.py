"""The page's charts, drawn with matplotlib as small SVG text to inline in the page (no image files, no script).

Figures are made with matplotlib.figure.Figure directly, not pyplot: no GUI backend is ever chosen, no global
figure registry grows, and nothing here changes another caller's matplotlib state (settings are scoped with
rc_context). Text stays text in the SVG (svg.fonttype "none": a fraction of the size of glyph paths), names are
never read as mathtext (text.parse_math off: a solution called "a$b" must not raise), and each chart's ids carry
its own prefix, so two charts inlined in one page share none. matplotlib escapes the text it writes, so names from
results are inert in the SVG; the page inserts the SVG as markup only because it is made here.
"""
from __future__ import annotations

import io
import math
import re
from contextlib import contextmanager

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator

# Colour-blind-friendly, distinguishable on white (Okabe & Ito), then matplotlib's tab10 for more solutions.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
MARKERS = ["o", "s", "D", "^", "v", "P", "h", "<"]
BASELINE_MARKERS = ["x", "+", "1", "2"]
# Ticks of a logarithmic speedup axis: 1-2-5 steps, so a few always fall inside any span over 3x.
NICE_RATIOS = [m * 10.0 ** e for e in range(-3, 4) for m in (1, 2, 5)]
DASHES = ["--", "-.", ":", (0, (5, 1, 1, 1))]
BANDWIDTH = "#8250df"
CEILING = "#57606a"
WIDTH_IN = 5.6
# Applied while a chart is made and saved: several are read when a text is created, not when it is drawn.
# A short font list: with svg.fonttype "none" it is written into every text element's style.
RC = {"text.parse_math": False, "font.size": 9.5, "font.family": "sans-serif",
      "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"], "axes.spines.top": False,
      "axes.spines.right": False, "svg.fonttype": "none"}
LABEL_LIMIT = 32    # characters of a name drawn in a chart: a long one would squeeze the plot to nothing


def styles(names: list[str]) -> dict[str, dict]:
    """One colour and marker per solution, the same in both of a problem's charts. The markers differ in shape,
    so solutions that land on the same spot (the same shape's intensity, near-equal rates) stay told apart."""
    return {name: {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)]}
            for i, name in enumerate(names)}


def speedup_chart(data: dict, palette: dict, prefix: str) -> str:
    """Speedup over the baseline per benchmark shape: one dot per solution with its 95% interval as a bar.

    The x axis is logarithmic when the speedups span more than 3x (a ratio's natural scale), linear otherwise
    (a log axis over 0.95-0.98 has no ticks to read); 1x, the baseline, is always in view.
    """
    with _style():
        return _speedup_chart(data, palette, prefix)


def _speedup_chart(data: dict, palette: dict, prefix: str) -> str:
    rows, series = data["rows"], data["series"]
    n = max(1, len(series))
    band = min(0.8, 0.2 * n + 0.1)
    fig = Figure(figsize=(WIDTH_IN, 1.1 + len(rows) * (0.16 * n + 0.24)))
    ax = fig.add_subplot()
    xs = [1.0]
    for s, line in enumerate(series):
        offset = (s - (n - 1) / 2) * band / n
        for row, speed, low, high in line["points"]:
            y = row + offset
            style = palette[line["name"]]
            ax.errorbar([speed], [y], xerr=[[speed - min(low, speed)], [max(high, speed) - speed]], ms=5,
                        fmt=style["marker"], color=style["color"], capsize=3, elinewidth=1.2,
                        label=_short(line["name"]) if row == line["points"][0][0] else None)
            ax.annotate(f"{speed:.2f}×", (max(high, speed), y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=7, color="#1f2328")
            xs += [low, high, speed]
    ax.axvline(1.0, color=CEILING, linestyle="--", linewidth=1)
    lo, hi = min(xs), max(xs)
    if hi / lo > 3:
        ax.set_xscale("log")
        ax.set_xlim(lo / 1.25, hi * 1.4)
        ax.xaxis.set_major_locator(FixedLocator([t for t in NICE_RATIOS if lo / 1.25 <= t <= hi * 1.4]))
        ax.minorticks_off()
    else:
        pad = (hi - lo) * 0.12 or 0.05
        ax.set_xlim(lo - pad, hi + 2.2 * pad)
        ax.xaxis.set_major_locator(MaxNLocator(5, steps=[1, 2, 2.5, 5, 10]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.set_yticks(range(len(rows)), [_short(r) for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(f"speedup over {_short(data['baseline'])} (higher is faster; bars: 95% interval)")
    ax.grid(axis="x", color="#d0d7de", linewidth=0.6)
    _legend(ax, columns=3)
    return _svg(fig, prefix)


def roofline_chart(data: dict, palette: dict, prefix: str) -> str:
    """Achieved TFLOP/s against arithmetic intensity (FLOP/byte), log-log, under the measured ceilings: each
    dtype's compute peak (flat) and the copy bandwidth (the slope, TFLOP/s = FLOP/byte x GB/s / 1000)."""
    with _style():
        return _roofline_chart(data, palette, prefix)


def _roofline_chart(data: dict, palette: dict, prefix: str) -> str:
    points = [p for line in data["series"] for p in line["points"]]
    points += [p for pts in data["baselines"].values() for p in pts]
    bw = data["copy_gbps"]
    ridges = [1e3 * peak / bw for peak in data["compute"].values()] if bw else []
    xs = [p[0] for p in points] + ridges
    x0, x1 = min(xs) / 5, max(xs) * 5
    ys = [p[1] for p in points] + list(data["compute"].values()) + ([x0 * bw / 1e3] if bw else [])
    entries = len(data["series"]) + len(data["baselines"]) + len(data["compute"]) + bool(bw)
    fig = Figure(figsize=(WIDTH_IN, 3.0 + 0.2 * math.ceil(entries / 2)))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    _ceilings(ax, data, x0, x1)
    for line in data["series"]:
        style = palette[line["name"]]
        ax.scatter([p[0] for p in line["points"]], [p[1] for p in line["points"]], s=40, zorder=4,
                   marker=style["marker"], facecolors="none", edgecolors=style["color"], linewidths=1.6,
                   label=_short(line["name"]))
    for i, (label, pts) in enumerate(data["baselines"].items()):
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=40, zorder=3, color="#1f2328",
                   marker=BASELINE_MARKERS[i % len(BASELINE_MARKERS)], label=f"{_short(label)} (baseline)")
    ax.set_xlim(x0, x1)
    ax.set_ylim(min(ys) / 1.6, max(ys) * 2)
    for axis, (low, high) in ((ax.xaxis, (x0, x1)), (ax.yaxis, ax.get_ylim())):
        # Ticks at 1, 2 and 5 times powers of ten where the axis spans few decades, else at the powers alone.
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if high / low < 300 else (1.0,)))
        axis.set_major_formatter(FuncFormatter(_plain))
    ax.minorticks_off()        # a log axis's minor ticks cost more to lay out than the rest of the chart
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.grid(which="major", color="#d0d7de", linewidth=0.6)
    _legend(ax, columns=2)
    return _svg(fig, prefix)


def _ceilings(ax, data: dict, x0: float, x1: float) -> None:
    """The roofs: a flat line per dtype's compute peak from its ridge point on, the bandwidth slope up to the
    highest ridge (where no compute peak is known, across the whole axis).
    The roofs are named in the legend, not on the plot, where a label would sit on the points it explains."""
    bw = data["copy_gbps"]
    top = max(data["compute"].values(), default=None)
    if bw:
        end = min(x1, 1e3 * top / bw) if top else x1
        ax.plot([x0, end], [x0 * bw / 1e3, end * bw / 1e3], color=BANDWIDTH, linewidth=1.6,
                label=f"copy {bw:.0f} GB/s")
    for i, (dtype, peak) in enumerate(data["compute"].items()):
        start = max(x0, 1e3 * peak / bw) if bw else x0
        ax.plot([start, x1], [peak, peak], color=CEILING, linewidth=1.6, linestyle=DASHES[i % len(DASHES)],
                label=f"{dtype} peak {peak:.0f} TFLOP/s")


def _legend(ax, columns: int) -> None:
    """Above the plot: beside it, the legend would take the width the points need."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False, fontsize=8.5,
                  ncols=min(columns, len(handles)), borderaxespad=0, handletextpad=0.4, columnspacing=1.2)


def _short(text: str) -> str:
    return text if len(text) <= LABEL_LIMIT else text[:LABEL_LIMIT - 1] + "…"


def _plain(value: float, _pos) -> str:
    """Log-axis ticks as plain numbers (1, 10, 100, 1000, 1e+04): matplotlib's default is mathtext, off here."""
    return f"{value:g}"


@contextmanager
def _style():
    with matplotlib.rc_context({**RC, "svg.hashsalt": "gauntlet"}):   # fixed: the same data, the same SVG
        yield


def _svg(fig: Figure, prefix: str) -> str:
    """The figure as an <svg> element (no XML prologue), every id in it (and every reference to one) prefixed,
    so two charts inlined in one page share none: matplotlib numbers its groups from 1 in every figure."""
    fig.set_layout_engine("constrained")
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m[1]}"', text)
    text = re.sub(r'\b((?:xlink:)?href)="#([^"]+)"', lambda m: f'{m[1]}="#{prefix}-{m[2]}"', text)
    return re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m[1]})", text)
