"""The performance view's figures: windows, sorting, failure rates and the charts of a kind
and of the overview, from the rows the dashboard's statements return.

Pure: rows and ``now`` in, values out. A duration is one run's: a done job's last run
(finished_at - started_at) or an attempt the workers recorded (retries and failures); the
wait is a job's time in the queue before its last run started (started_at - run_at). Jobs
finished before migration 0013 have no start, so they count in neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pgbeat.ui.charts import Chart, Series


@dataclass(frozen=True)
class Window:
    name: str
    span: timedelta
    bucket: timedelta  # the width of one position on the kind's charts


WINDOWS = {
    w.name: w
    for w in (
        Window("1h", timedelta(hours=1), timedelta(minutes=5)),
        Window("24h", timedelta(hours=24), timedelta(hours=1)),
        Window("7d", timedelta(days=7), timedelta(hours=6)),
    )
}
SCAN_CAP = 20_000  # the newest finished jobs of a window the view reads, at most

# (key, column heading, whether larger sorts first by default)
COLUMNS = (
    ("kind", "Kind", False),
    ("finished", "Finished", True),
    ("failure_rate", "Failure rate", True),
    ("retries", "Retries", True),
    ("duration_p50", "Duration p50", True),
    ("duration_p95", "Duration p95", True),
    ("duration_max", "Duration max", True),
    ("wait_p50", "Wait p50", True),
    ("wait_p95", "Wait p95", True),
)
SORT_KEYS = {key for key, _, _ in COLUMNS}


def window_of(value: str | None) -> Window:
    """The window named by the query string (default 24 h); ValueError names the choices."""
    if value is None or value == "":
        return WINDOWS["24h"]
    if value not in WINDOWS:
        raise ValueError("window: 1h, 24h or 7d")
    return WINDOWS[value]


def sort_of(value: str | None, order: str | None) -> tuple[str, bool]:
    """(column, descending) from ``sort`` and ``order`` (``asc``/``desc``); ValueError if bad."""
    key = value or "finished"
    if key not in SORT_KEYS:
        raise ValueError("sort: one of " + ", ".join(k for k, _, _ in COLUMNS))
    if order not in (None, "", "asc", "desc"):
        raise ValueError("order: asc or desc")
    default = next(d for k, _, d in COLUMNS if k == key)
    return key, default if not order else order == "desc"


def failure_rate(row: Mapping[str, Any]) -> float | None:
    """Failed among done and failed (cancelled jobs neither succeeded nor failed)."""
    decided = int(row["done"]) + int(row["failed"])
    return int(row["failed"]) / decided if decided else None


def with_rates(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "failure_rate": failure_rate(row)} for row in rows]


def sorted_rows(rows: list[dict[str, Any]], key: str, descending: bool) -> list[dict[str, Any]]:
    """Rows by ``key``; rows without a value come last either way, ties by kind."""
    known = [r for r in rows if r.get(key) is not None]
    unknown = sorted((r for r in rows if r.get(key) is None), key=lambda r: str(r["kind"]))
    known.sort(key=lambda r: str(r["kind"]))
    known.sort(key=lambda r: r[key], reverse=descending)
    return known + unknown


def percent_text(value: float | None) -> str:
    """``0 %``, ``0.4 %``, ``12 %``; ``-`` when nothing was decided."""
    if value is None:
        return "-"
    percent = value * 100
    if percent == 0 or percent >= 10:
        return f"{percent:.0f} %"
    return f"{percent:.1f} %"


def _label(instant: datetime, step: timedelta) -> str:
    utc = instant.astimezone(UTC)
    return f"{utc:%H:%M}" if step < timedelta(hours=6) else f"{utc:%m-%d %H}h"


def _positions(
    rows: Sequence[Mapping[str, Any]], count: int, key: str
) -> Callable[[str], tuple[float | None, ...]]:
    """A reader of one field per position, oldest first (position ``count - 1`` is newest)."""
    by_age = {int(r[key]): r for r in rows}

    def values(field: str) -> tuple[float | None, ...]:
        out: list[float | None] = []
        for age in range(count - 1, -1, -1):
            value = by_age.get(age, {}).get(field)
            out.append(None if value is None else float(value))
        return tuple(out)

    return values


def _counts(values: tuple[float | None, ...]) -> tuple[float | None, ...]:
    return tuple(v or 0.0 for v in values)


def minute_chart(rows: Sequence[Mapping[str, Any]], now: datetime) -> Chart:
    """Done and failed per minute over the last hour (rows: minutes_ago, done, failed)."""
    values = _positions(rows, 60, "minutes_ago")
    labels = tuple(
        _label(now - timedelta(minutes=m), timedelta(minutes=1)) for m in range(59, -1, -1)
    )
    return Chart(
        key="per-minute",
        title="Jobs finished per minute, last hour",
        unit="jobs per minute",
        x_title="UTC, newest right",
        x_labels=labels,
        series=(
            Series("done", "c-done", _counts(values("done"))),
            Series("failed", "c-failed", _counts(values("failed")), hatched=True),
        ),
        x_every=10,
    )


def hour_chart(rows: Sequence[Mapping[str, Any]], now: datetime) -> Chart:
    """Finished (not failed) and failed per hour over 24 h (rows: hours_ago, finished, failed)."""
    values = _positions(rows, 24, "hours_ago")
    finished, failed = _counts(values("finished")), _counts(values("failed"))
    labels = tuple(_label(now - timedelta(hours=h), timedelta(hours=1)) for h in range(23, -1, -1))
    return Chart(
        key="per-hour",
        title="Jobs finished per hour, last 24 hours",
        unit="jobs per hour",
        x_title="UTC, newest right",
        x_labels=labels,
        series=(
            Series(
                "done or cancelled",
                "c-done",
                tuple((a or 0) - (b or 0) for a, b in zip(finished, failed, strict=True)),
            ),
            Series("failed", "c-failed", failed, hatched=True),
        ),
        x_every=4,
    )


def kind_charts(rows: Sequence[Mapping[str, Any]], window: Window, now: datetime) -> list[Chart]:
    """A kind's outcomes, run durations and queue waits per bucket."""
    count = max(1, int(window.span / window.bucket))
    values = _positions(rows, count, "bucket")
    labels = tuple(_label(now - window.bucket * b, window.bucket) for b in range(count - 1, -1, -1))
    every = max(1, count // 6)
    per = _bucket_words(window.bucket)
    return [
        Chart(
            key="kind-outcomes",
            title=f"Jobs finished per {per}",
            unit=f"jobs per {per}",
            x_title="UTC, newest right",
            x_labels=labels,
            series=(
                Series("done", "c-done", _counts(values("done"))),
                Series("failed", "c-failed", _counts(values("failed")), hatched=True),
            ),
            x_every=every,
        ),
        Chart(
            key="kind-durations",
            title="Run duration",
            unit="duration",
            x_title="UTC, newest right",
            x_labels=labels,
            series=(
                Series("p50", "c-p50", values("duration_p50")),
                Series("p95", "c-p95", values("duration_p95")),
            ),
            style="lines",
            durations=True,
            x_every=every,
        ),
        Chart(
            key="kind-wait",
            title="Queue wait (due to started)",
            unit="duration",
            x_title="UTC, newest right",
            x_labels=labels,
            series=(
                Series("p50", "c-p50", values("wait_p50")),
                Series("p95", "c-p95", values("wait_p95")),
            ),
            style="lines",
            durations=True,
            x_every=every,
        ),
    ]


def _bucket_words(bucket: timedelta) -> str:
    minutes = int(bucket.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} minutes"
    hours = minutes // 60
    return "hour" if hours == 1 else f"{hours} hours"
