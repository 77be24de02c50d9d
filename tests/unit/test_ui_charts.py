"""The dashboard's charts and performance figures: SVG geometry, ticks, legends, tables,
windows, sorting, failure rates, and the times it prints with seconds when they have some.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pgbeat.ui import charts, performance, timefmt
from pgbeat.ui.charts import Chart, Series

NOW = datetime(2026, 12, 1, 18, 30, 0, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"


def parse(markup: str) -> ElementTree.Element:
    return ElementTree.fromstring(
        str(markup).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    )


def bars(done: tuple[float | None, ...], failed: tuple[float | None, ...]) -> Chart:
    return Chart(
        key="k",
        title="Jobs <per> minute",
        unit="jobs per minute",
        x_title="UTC",
        x_labels=tuple(f"t{i}" for i in range(len(done))),
        series=(Series("done", "c-done", done), Series("failed", "c-failed", failed, hatched=True)),
    )


@pytest.mark.parametrize(
    ("top", "ticks"),
    [
        (0, [0.0, 1.0]),
        (-3, [0.0, 1.0]),
        (float("nan"), [0.0, 1.0]),
        (1, [0.0, 0.5, 1.0]),
        (3, [0.0, 1.0, 2.0, 3.0]),
        (4, [0.0, 1.0, 2.0, 3.0, 4.0]),
        (7, [0.0, 2.0, 4.0, 6.0, 8.0]),
        (10, [0.0, 5.0, 10.0]),
        (95, [0.0, 50.0, 100.0]),
        (1234, [0.0, 500.0, 1000.0, 1500.0]),
        (0.03, [0.0, 0.01, 0.02, 0.03]),
    ],
)
def test_nice_ticks_are_round_steps_up_to_at_least_the_top(top: float, ticks: list[float]) -> None:
    assert charts.nice_ticks(top) == ticks


@pytest.mark.parametrize(
    ("value", "durations", "text"),
    [
        (0, False, "0"),
        (1500, False, "1,500"),
        (0.5, False, "0.5"),
        (0, True, "0"),
        (0.25, True, "250ms"),
        (1.5, True, "1.5s"),
        (120, True, "2m00s"),
    ],
)
def test_tick_text(value: float, durations: bool, text: str) -> None:
    assert charts.tick_text(value, durations) == text


def test_stacked_bars_reach_the_top_tick_and_sit_on_the_axis() -> None:
    chart = bars((1, 3, 0, None), (1, 0, 0, 2))
    svg = parse(charts.render(chart))
    rects = svg.findall(f"{SVG}g/{SVG}rect")
    # 1+1 at t0, 3 at t1, nothing at t2, 2 at t3: four rectangles; the top tick is 3.
    assert [r.get("class") for r in rects] == ["c-done", "c-failed hatched"] * 2
    base = charts.HEIGHT - charts.BOTTOM
    plot = base - charts.TOP
    heights = [float(r.get("height") or 0) for r in rects]
    assert heights == pytest.approx([plot / 3, plot / 3, plot, plot * 2 / 3], abs=0.02)
    first_done, first_failed = rects[0], rects[1]
    assert float(first_done.get("y") or 0) + heights[0] == pytest.approx(base, abs=0.02)
    assert float(first_failed.get("y") or 0) + heights[1] == pytest.approx(
        float(first_done.get("y") or 0), abs=0.02
    )
    assert first_failed.get("fill") == "url(#k-hatch)"  # colour is not the only cue
    ticks = [t.text for t in svg.findall(f"{SVG}text") if t.get("class") == "tick"]
    assert ticks[:4] == ["0", "1", "2", "3"]
    assert "jobs per minute" in [t.text for t in svg.findall(f"{SVG}text")]


def test_the_accessible_name_and_the_bar_titles_carry_the_numbers_escaped() -> None:
    markup = charts.render(bars((1, 3), (1, 0)))
    svg = parse(markup)
    title = svg.find(f"{SVG}title")
    assert title is not None and title.text == (
        "Jobs <per> minute (jobs per minute): done 4, failed 1"
    )
    assert svg.get("aria-labelledby") == title.get("id") == "k-t"
    assert "&lt;per&gt;" in markup and "<per>" not in markup
    titles = [t.text for t in svg.findall(f"{SVG}g/{SVG}title")]
    assert titles == ["t0: 1 done, 1 failed", "t1: 3 done, 0 failed"]


def test_x_labels_every_nth_counted_from_the_newest() -> None:
    labels = tuple(str(i) for i in range(7))
    chart = Chart("k", "t", "u", "UTC", labels, (Series("a", "c-done", (0,) * 7),), x_every=3)
    texts = parse(charts.render(chart)).findall(f"{SVG}text")
    assert [t.text for t in texts if t.get("text-anchor") == "middle"] == ["0", "3", "6"]


def test_lines_break_at_gaps_and_mark_each_point_with_its_series_shape() -> None:
    chart = Chart(
        key="d",
        title="Duration",
        unit="duration",
        x_title="UTC",
        x_labels=("a", "b", "c", "d", "e"),
        series=(
            Series("p50", "c-p50", (1.0, 2.0, None, 1.0, 1.5)),
            Series("p95", "c-p95", (None, None, None, 4.0, None)),
        ),
        style="lines",
        durations=True,
    )
    svg = parse(charts.render(chart))
    polylines = svg.findall(f"{SVG}polyline")
    assert [len((p.get("points") or "").split()) for p in polylines] == [2, 2]  # a-b, d-e
    assert len(svg.findall(f"{SVG}circle")) == 4  # p50's points
    squares = [r for r in svg.findall(f"{SVG}rect") if "dot" in (r.get("class") or "")]
    assert len(squares) == 1  # p95's one point, a square
    title = svg.find(f"{SVG}title")
    assert title is not None and title.text == "Duration (duration): p50 peak 2.0s, p95 peak 4.0s"
    legend = charts.legend(chart)
    assert "m-circle" in legend and "m-square" in legend and ">p95</li>" in legend


def test_the_table_has_one_row_per_position_and_a_dash_for_no_data() -> None:
    chart = bars((1, None), (0, 2))
    assert charts.table_rows(chart) == [("t0", ["1", "0"]), ("t1", ["-", "2"])]
    empty = Chart("e", "Empty", "u", "x", ("a",), (Series("s", "c", (None,)),), style="lines")
    assert charts.summary(empty) == "Empty (u): s: no data"
    assert parse(charts.render(empty)).findall(f"{SVG}polyline") == []


def test_a_chart_refuses_a_series_of_the_wrong_length_and_an_unknown_style() -> None:
    with pytest.raises(ValueError, match="series 'a'"):
        Chart("k", "t", "u", "x", ("1", "2"), (Series("a", "c", (1.0,)),))
    with pytest.raises(ValueError, match="style"):
        Chart("k", "t", "u", "x", ("1",), (Series("a", "c", (1.0,)),), style="pie")


# -- performance ----------------------------------------------------------------------------


def test_windows_and_sorting_from_the_query_string() -> None:
    assert performance.window_of(None).name == "24h"
    assert performance.window_of("").name == "24h"
    assert performance.window_of("7d").bucket == timedelta(hours=6)
    with pytest.raises(ValueError, match="window: 1h, 24h or 7d"):
        performance.window_of("2d")
    assert performance.sort_of(None, None) == ("finished", True)
    assert performance.sort_of("kind", None) == ("kind", False)
    assert performance.sort_of("duration_p95", "asc") == ("duration_p95", False)
    with pytest.raises(ValueError, match="sort: one of kind, finished"):
        performance.sort_of("id; drop", None)
    with pytest.raises(ValueError, match="order: asc or desc"):
        performance.sort_of("kind", "up")


def row(kind: str, done: int, failed: int, p95: float | None = None) -> dict[str, object]:
    return {"kind": kind, "done": done, "failed": failed, "duration_p95": p95}


def test_failure_rate_counts_failed_among_done_and_failed() -> None:
    rated = performance.with_rates([row("a", 3, 1), row("b", 0, 0), row("c", 0, 2)])
    assert [r["failure_rate"] for r in rated] == [0.25, None, 1.0]
    assert [performance.percent_text(r["failure_rate"]) for r in rated] == ["25 %", "-", "100 %"]
    assert performance.percent_text(0.004) == "0.4 %"
    assert performance.percent_text(0.0) == "0 %"


def test_sorting_puts_rows_without_a_value_last_either_way_and_breaks_ties_by_kind() -> None:
    rows = [row("b", 1, 0, 2.0), row("a", 1, 0, 2.0), row("c", 1, 0, None), row("d", 1, 0, 5.0)]
    down = performance.sorted_rows(list(rows), "duration_p95", True)
    assert [r["kind"] for r in down] == ["d", "a", "b", "c"]
    up = performance.sorted_rows(list(rows), "duration_p95", False)
    assert [r["kind"] for r in up] == ["a", "b", "d", "c"]


def test_the_table_has_duration_and_wait_columns_and_sorts_by_the_wait() -> None:
    assert [label for _, label, _ in performance.COLUMNS][4:] == [
        "Duration p50", "Duration p95", "Duration max", "Wait p50", "Wait p95",
    ]  # fmt: skip
    assert performance.sort_of("wait_p95", None) == ("wait_p95", True)
    rows: list[dict[str, object]] = [
        {"kind": "a", "wait_p95": 0.5},
        {"kind": "b", "wait_p95": None},  # finished before migration 0013: no start
        {"kind": "c", "wait_p95": 60.0},
    ]
    assert [r["kind"] for r in performance.sorted_rows(rows, "wait_p95", True)] == ["c", "a", "b"]
    with pytest.raises(ValueError, match="sort: one of"):
        performance.sort_of("latency_p50", None)


def test_the_minute_chart_puts_the_newest_minute_right_with_clock_labels() -> None:
    chart = performance.minute_chart([{"minutes_ago": 0, "done": 5, "failed": 1}], NOW)
    assert len(chart.x_labels) == 60
    assert chart.x_labels[-1] == "18:30" and chart.x_labels[0] == "17:31"
    assert chart.series[0].values[-1] == 5 and chart.series[1].values[-1] == 1
    assert chart.series[0].values[0] == 0  # minutes without a row are zero, not gaps


def test_the_hour_chart_splits_finished_into_failed_and_the_rest() -> None:
    chart = performance.hour_chart([{"hours_ago": 23, "finished": 10, "failed": 4}], NOW)
    assert chart.x_labels[0] == "19:30" and chart.series[0].values[0] == 6
    assert chart.series[1].values[0] == 4 and chart.series[1].hatched


def test_a_kinds_charts_have_one_position_per_bucket_and_gaps_without_timings() -> None:
    window = performance.WINDOWS["7d"]
    found = [
        {"bucket": 0, "done": 2, "failed": 1, "duration_p50": 0.5, "duration_p95": 0.9,
         "wait_p50": 3.0, "wait_p95": 7.0},
    ]  # fmt: skip
    outcomes, durations, wait = performance.kind_charts(found, window, NOW)
    assert len(outcomes.x_labels) == 28 and outcomes.x_labels[-1] == "12-01 18h"
    assert outcomes.title == "Jobs finished per 6 hours"
    assert durations.title == "Run duration" and durations.durations
    assert durations.series[0].values[-1] == 0.5 and durations.series[0].values[0] is None
    assert wait.title == "Queue wait (due to started)" and wait.durations
    assert [s.name for s in wait.series] == ["p50", "p95"]
    assert wait.series[0].values[-1] == 3.0 and wait.series[1].values[-1] == 7.0
    assert wait.series[1].values[0] is None
    hour = performance.kind_charts([], performance.WINDOWS["1h"], NOW)[0]
    assert hour.title == "Jobs finished per 5 minutes" and hour.x_labels[-1] == "18:30"


# -- times with seconds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instant", "short", "local"),
    [
        (NOW, "12-01 18:30Z", "Tue 2026-12-01 13:30 EST (UTC\u221205:00)"),
        (
            NOW.replace(second=30),
            "12-01 18:30:30Z",
            "Tue 2026-12-01 13:30:30 EST (UTC\u221205:00)",
        ),
    ],
)
def test_times_off_the_minute_show_their_seconds(instant: datetime, short: str, local: str) -> None:
    assert timefmt.utc_short(instant) == short
    assert timefmt.local_text(instant, ZoneInfo("America/New_York")) == local


def test_svg_has_no_script_or_event_attributes() -> None:
    markup = charts.render(bars((1,), (0,)))
    assert not re.search(r"<script|\son\w+=", markup)
