"""Charts as inline SVG, drawn on the server: axes with a scale and a unit, a legend, and
the same numbers as a table for screen readers.

Pure: a ``Chart`` (labels and series of numbers) in, markup out, so a page needs no
JavaScript and a test can read every coordinate. Colour is never the only cue: failed
bars are hatched and each line has its own marker shape, shown in the legend too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from pgbeat.ui.timefmt import duration_text

WIDTH, HEIGHT = 560.0, 200.0
LEFT, RIGHT, TOP, BOTTOM = 52.0, 22.0, 26.0, 30.0
MARKERS = ("circle", "square", "diamond")


@dataclass(frozen=True)
class Series:
    """One named row of values, one per x label; ``None`` is a gap (no data)."""

    name: str
    css: str  # the CSS class that colours it: c-done, c-failed, c-p50, ...
    values: tuple[float | None, ...]
    hatched: bool = False


@dataclass(frozen=True)
class Chart:
    """Stacked bars (``style="bars"``) or lines, over labelled x positions.

    ``unit`` names the y axis ("jobs per minute"); ``durations`` writes its ticks as
    durations (values in seconds). ``x_every`` labels every n-th position only.
    """

    key: str  # unique on the page: the prefix of the SVG's ids
    title: str
    unit: str
    x_title: str
    x_labels: tuple[str, ...]
    series: tuple[Series, ...]
    style: str = "bars"
    durations: bool = False
    x_every: int = 1

    def __post_init__(self) -> None:
        if self.style not in ("bars", "lines"):
            raise ValueError(f"style: bars or lines, not {self.style!r}")
        for series in self.series:
            if len(series.values) != len(self.x_labels):
                raise ValueError(f"series {series.name!r}: one value per x label")


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to at least ``top``."""
    if not math.isfinite(top) or top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    steps = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) for i in range(steps + 1)]


def tick_text(value: float, durations: bool) -> str:
    """A y tick: ``1,500`` for counts, ``250ms`` / ``1.5s`` / ``2m00s`` for durations."""
    if durations:
        return "0" if value == 0 else duration_text(value)
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:g}"


def stacked_top(chart: Chart) -> float:
    """The largest value the y axis must reach: a stack's total, or a line's peak."""
    if chart.style == "bars":
        totals = [sum(s.values[i] or 0.0 for s in chart.series) for i in range(len(chart.x_labels))]
        return max(totals, default=0.0)
    return max((v for s in chart.series for v in s.values if v is not None), default=0.0)


def summary(chart: Chart) -> str:
    """One sentence for the SVG's accessible name: what it shows and its totals or peaks."""
    parts = []
    for series in chart.series:
        known = [v for v in series.values if v is not None]
        if not known:
            parts.append(f"{series.name}: no data")
        elif chart.style == "bars":
            parts.append(f"{series.name} {tick_text(sum(known), chart.durations)}")
        else:
            parts.append(f"{series.name} peak {tick_text(max(known), chart.durations)}")
    return f"{chart.title} ({chart.unit}): " + ", ".join(parts)


def render(chart: Chart) -> Markup:
    """The chart as an ``<svg>`` element (its values also in ``table_rows``)."""
    ticks = nice_ticks(stacked_top(chart))
    scale = Scale(chart, ticks[-1])
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH:g} {HEIGHT:g}" role="img" '
        f'aria-labelledby="{chart.key}-t">',
        f'<title id="{chart.key}-t">{escape(summary(chart))}</title>',
        _defs(chart),
        *_y_axis(chart, ticks, scale),
        *_x_axis(chart, scale),
        *(_bars(chart, scale) if chart.style == "bars" else _lines(chart, scale)),
        "</svg>",
    ]
    return Markup("".join(parts))


def legend(chart: Chart) -> Markup:
    """The legend as a list of swatches (or marker shapes) with the series' names."""
    items = []
    for index, series in enumerate(chart.series):
        shape = "hatched" if series.hatched else ("bar" if chart.style == "bars" else "line")
        marker = f" m-{MARKERS[index % len(MARKERS)]}" if chart.style == "lines" else ""
        items.append(
            f'<li><span class="swatch {escape(series.css)} sw-{shape}{marker}" '
            f'aria-hidden="true"></span>{escape(series.name)}</li>'
        )
    return Markup(f'<ul class="legend-list">{"".join(items)}</ul>')


def table_rows(chart: Chart) -> list[tuple[str, list[str]]]:
    """(x label, the series' values as text) per position: the chart's table."""
    return [
        (
            label,
            [
                "-" if s.values[i] is None else tick_text(s.values[i] or 0.0, chart.durations)
                for s in chart.series
            ],
        )
        for i, label in enumerate(chart.x_labels)
    ]


@dataclass(frozen=True)
class Scale:
    """Maps positions and values into the plot area."""

    chart: Chart
    top: float

    @property
    def slot(self) -> float:
        return (WIDTH - LEFT - RIGHT) / max(1, len(self.chart.x_labels))

    def x(self, index: int) -> float:
        return LEFT + (index + 0.5) * self.slot

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - value / self.top * (HEIGHT - BOTTOM - TOP)


def _defs(chart: Chart) -> str:
    return (
        f'<defs><pattern id="{chart.key}-hatch" width="4" height="4" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="4" height="4" class="hatch-bg"></rect>'
        '<line x1="0" y1="0" x2="0" y2="4" class="hatch-line"></line></pattern></defs>'
    )


def _y_axis(chart: Chart, ticks: list[float], scale: Scale) -> list[str]:
    parts = []
    for tick in ticks:
        y = round(scale.y(tick), 1)
        parts.append(
            f'<line class="grid" x1="{LEFT:g}" y1="{y:g}" x2="{WIDTH - RIGHT:g}" y2="{y:g}"></line>'
            f'<text class="tick" x="{LEFT - 4:g}" y="{y + 4:g}" text-anchor="end">'
            f"{escape(tick_text(tick, chart.durations))}</text>"
        )
    parts.append(f'<text class="axis-title" x="4" y="12">{escape(chart.unit)}</text>')
    return parts


def _x_axis(chart: Chart, scale: Scale) -> list[str]:
    base = HEIGHT - BOTTOM
    right = WIDTH - RIGHT
    parts = [f'<line class="axis" x1="{LEFT:g}" y1="{base:g}" x2="{right:g}" y2="{base:g}"></line>']
    count = len(chart.x_labels)
    for index, label in enumerate(chart.x_labels):
        if (count - 1 - index) % chart.x_every:
            continue  # label the newest position and every x_every-th before it
        x = round(scale.x(index), 1)
        parts.append(
            f'<line class="axis" x1="{x:g}" y1="{base:g}" x2="{x:g}" y2="{base + 3:g}"></line>'
            f'<text class="tick" x="{x:g}" y="{base + 14:g}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    parts.append(
        f'<text class="axis-title" x="{WIDTH - RIGHT:g}" y="{HEIGHT - 2:g}" text-anchor="end">'
        f"{escape(chart.x_title)}</text>"
    )
    return parts


def _bars(chart: Chart, scale: Scale) -> list[str]:
    parts = []
    width = round(max(1.0, scale.slot * 0.8), 2)
    for index, label in enumerate(chart.x_labels):
        stacked = 0.0
        x = round(scale.x(index) - width / 2, 2)
        values = []
        for series in chart.series:
            value = series.values[index] or 0.0
            values.append(f"{tick_text(value, chart.durations)} {series.name}")
            if value <= 0:
                continue
            top, bottom = scale.y(stacked + value), scale.y(stacked)
            fill = f' fill="url(#{chart.key}-hatch)"' if series.hatched else ""
            css = f"{series.css} hatched" if series.hatched else series.css
            parts.append(
                f'<rect class="{escape(css)}" x="{x:g}" y="{round(top, 2):g}" '
                f'width="{width:g}" height="{round(bottom - top, 2):g}"{fill}></rect>'
            )
            stacked += value
        parts.append(f"<title>{escape(label)}: {escape(', '.join(values))}</title>")
    return [f"<g>{''.join(parts)}</g>"] if parts else []


def _lines(chart: Chart, scale: Scale) -> list[str]:
    parts = []
    for number, series in enumerate(chart.series):
        marker = MARKERS[number % len(MARKERS)]
        segment: list[str] = []
        segments: list[list[str]] = [segment]
        dots = []
        for index, value in enumerate(series.values):
            if value is None:
                segment = []
                segments.append(segment)
                continue
            x, y = round(scale.x(index), 1), round(scale.y(value), 1)
            segment.append(f"{x:g},{y:g}")
            text = f"{chart.x_labels[index]}: {series.name} {tick_text(value, chart.durations)}"
            dots.append(_marker(marker, x, y, series.css, text))
        for points in segments:
            if len(points) > 1:
                parts.append(
                    f'<polyline class="line {escape(series.css)}" points="{" ".join(points)}">'
                    "</polyline>"
                )
        parts.extend(dots)
    return parts


def _marker(shape: str, x: float, y: float, css: str, text: str) -> str:
    title = f"<title>{escape(text)}</title>"
    if shape == "circle":
        return f'<circle class="dot {escape(css)}" cx="{x:g}" cy="{y:g}" r="3">{title}</circle>'
    if shape == "square":
        return (
            f'<rect class="dot {escape(css)}" x="{x - 3:g}" y="{y - 3:g}" width="6" height="6">'
            f"{title}</rect>"
        )
    points = f"{x:g},{y - 4:g} {x + 4:g},{y:g} {x:g},{y + 4:g} {x - 4:g},{y:g}"
    return f'<polygon class="dot {escape(css)}" points="{points}">{title}</polygon>'
