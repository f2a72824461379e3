"""Small inline SVG charts: a latency histogram on a log axis, and a verdict grid (checks x seeds).
Plain strings, no plotting library: the HTML report must carry everything it shows."""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

from reports.histogram import GAMMA, NEG_BASE, ZERO_KEY

COLORS = {"pass": "#2e7d32", "fail": "#c62828", "error": "#ef6c00", "skipped": "#9e9e9e", None: "#eeeeee"}
PER_DECADE = 10  # display bins per factor of ten


def fmt_ns(ns: float | int | None) -> str:
    """A duration for people: 850 ns, 12.3 µs, 4.56 ms, 1.20 s."""
    if ns is None:
        return "–"
    a = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if a >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def histogram(keys_counts: Sequence[tuple[int, int]], title: str, width: int = 420, height: int = 170,
              x_label: str = "latency (log scale)", y_label: str = "count") -> str:
    """Bars of counts over log-spaced latency bins (PER_DECADE per decade), with both axes
    labelled; non-positive latencies, if any, are one bar at the left labelled '≤0'."""
    nonpos = sum(c for k, c in keys_counts if k == ZERO_KEY or k <= NEG_BASE)
    bins: dict[int, int] = {}
    for k, c in keys_counts:
        if k == ZERO_KEY or k <= NEG_BASE:
            continue
        upper = GAMMA ** k  # the bucket's upper edge, in ns
        b = math.floor(math.log10(max(upper, 1.0)) * PER_DECADE)
        bins[b] = bins.get(b, 0) + c
    if not bins and not nonpos:
        return ""
    lo, hi = (min(bins), max(bins)) if bins else (0, 0)
    slots = (hi - lo + 1) + (1 if nonpos else 0)
    pad_l, pad_b, pad_t = 48, 40, 18
    plot_w, plot_h = width - pad_l - 8, height - pad_b - pad_t
    bar_w = plot_w / max(slots, 1)
    top = max([*bins.values(), nonpos]) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" width="{width}" height="{height}" '
             f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
             f'<text x="{pad_l}" y="12" class="t">{escape(title)}</text>',
             f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{width - 8}" y2="{pad_t + plot_h}" class="axis"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + plot_h}" class="axis"/>',
             f'<text x="{pad_l - 4}" y="{pad_t + 8}" class="yl">{top}</text>',
             f'<text x="{pad_l - 4}" y="{pad_t + plot_h}" class="yl">0</text>',
             f'<text x="{pad_l + plot_w / 2:.1f}" y="{height - 2}" class="xl al" data-axis="x">{escape(x_label)}</text>',
             f'<text x="10" y="{pad_t + plot_h / 2:.1f}" class="xl al" data-axis="y" '
             f'transform="rotate(-90 10 {pad_t + plot_h / 2:.1f})">{escape(y_label)}</text>']
    slot = 0
    if nonpos:
        h = plot_h * nonpos / top
        parts.append(f'<rect x="{pad_l:.1f}" y="{pad_t + plot_h - h:.1f}" width="{bar_w * 0.9:.1f}" height="{h:.1f}" '
                     f'class="bar neg"><title>≤0 ns: {nonpos}</title></rect>')
        slot = 1
    for b in range(lo, hi + 1):
        c = bins.get(b, 0)
        x = pad_l + (slot + b - lo) * bar_w
        if c:
            h = max(plot_h * c / top, 1.0)
            a, z = 10 ** (b / PER_DECADE), 10 ** ((b + 1) / PER_DECADE)
            parts.append(f'<rect x="{x:.1f}" y="{pad_t + plot_h - h:.1f}" width="{max(bar_w * 0.9, 1):.1f}" '
                         f'height="{h:.1f}" class="bar"><title>{fmt_ns(a)}–{fmt_ns(z)}: {c}</title></rect>')
        # label decades; a narrow range (under a decade) gets its two ends labelled instead
        if b % PER_DECADE == 0 or (hi - lo < PER_DECADE and b in (lo, hi)):
            parts.append(f'<text x="{x:.1f}" y="{height - 24}" class="xl">{fmt_ns(10 ** (b / PER_DECADE))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def verdict_grid(checks: Sequence[str], runs: Sequence[tuple[str, dict[str, str]]], title: str) -> str:
    """One row per check, one column per run (seed order); cell colour = verdict."""
    if not runs or not checks:
        return ""
    label_w, cell = 190, max(3, min(14, 700 // len(runs)))
    width = label_w + cell * len(runs) + 10
    height = 22 + cell * len(checks) + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="grid" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
             f'<text x="0" y="12" class="t">{escape(title)}</text>']
    for i, check in enumerate(checks):
        y = 20 + i * cell
        parts.append(f'<text x="{label_w - 6}" y="{y + cell - 2}" class="cl">{escape(check)}</text>')
        for j, (seed, verdicts) in enumerate(runs):
            v = verdicts.get(check)
            parts.append(f'<rect x="{label_w + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                         f'fill="{COLORS.get(v, COLORS["error"])}"><title>seed {escape(str(seed))} {escape(check)}: '
                         f'{escape(str(v))}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)
