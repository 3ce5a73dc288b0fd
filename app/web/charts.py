"""The per-configuration ratio chart of the run page, as inline SVG: one bar per
configuration (port/baseline device time), a line at parity and one at the
limit. Colours say the verdict of each bar."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from schemas.verdicts import PERF_RATIO_LIMIT

FASTER = "#2e9e4f"
WITHIN_LIMIT = "#e0a526"
SLOWER = "#c62828"
BAR_HEIGHT = 22
GAP = 8
LABEL_WIDTH = 200
PLOT_WIDTH = 420
VALUE_WIDTH = 70


@dataclass(frozen=True)
class RatioBar:
    label: str
    ratio: float


def bar_colour(ratio: float) -> str:
    if ratio <= 1.0:
        return FASTER
    return WITHIN_LIMIT if ratio <= PERF_RATIO_LIMIT else SLOWER


def ratio_chart(bars: list[RatioBar]) -> str:
    """An SVG document fragment; empty when there is nothing to draw."""
    if not bars:
        return ""
    scale_max = max(1.2, PERF_RATIO_LIMIT * 1.1, *(bar.ratio * 1.05 for bar in bars))
    height = len(bars) * (BAR_HEIGHT + GAP) + GAP + 20
    width = LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH

    def x_of(ratio: float) -> float:
        return LABEL_WIDTH + PLOT_WIDTH * ratio / scale_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="ratio-chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="port/baseline device time per configuration">'
    ]
    for index, bar in enumerate(bars):
        y = GAP + index * (BAR_HEIGHT + GAP)
        parts.append(
            f'<text x="{LABEL_WIDTH - 6}" y="{y + BAR_HEIGHT * 0.7:.1f}" '
            f'text-anchor="end" class="chart-label">{escape(bar.label)}</text>'
            f'<rect x="{LABEL_WIDTH}" y="{y}" width="{x_of(bar.ratio) - LABEL_WIDTH:.1f}" '
            f'height="{BAR_HEIGHT}" fill="{bar_colour(bar.ratio)}"><title>{escape(bar.label)}: '
            f"{bar.ratio:.4f}</title></rect>"
            f'<text x="{x_of(bar.ratio) + 4:.1f}" y="{y + BAR_HEIGHT * 0.7:.1f}" '
            f'class="chart-value">{bar.ratio:.3f}</text>'
        )
    bottom = height - 18
    # Parity's label sits left of its line and the limit's right, so they never overlap.
    for ratio, name, anchor, shift in (
        (1.0, "parity", "end", -3),
        (PERF_RATIO_LIMIT, "limit", "start", 3),
    ):
        parts.append(
            f'<line x1="{x_of(ratio):.1f}" y1="0" x2="{x_of(ratio):.1f}" y2="{bottom}" '
            f'class="chart-{name}" stroke="#333" stroke-dasharray="4 3"/>'
            f'<text x="{x_of(ratio) + shift:.1f}" y="{height - 4}" text-anchor="{anchor}" '
            f'class="chart-axis">{name} {ratio:.2f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
