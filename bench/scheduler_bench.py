"""pgbeat's scheduler: how long one ``Scheduler.tick`` takes for 1,000 and 10,000 schedules.

Three ticks per size, all at a pinned database time: ``new`` (first tick, every period
inserted), ``existing`` (a second replica's first tick: every period already there, all
conflicts) and ``idle`` (the first replica again a second later: nothing due).
"""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from bench import database
from bench.measure import (
    TICK,
    Result,
    Stopwatch,
    emit,
    log,
    parse_system_arguments,
    system_arguments,
)
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler

SYSTEM = "pgbeat"
REPEATS = 3


def build_schedules(count: int) -> list[Schedule]:
    """``count`` distinct ``every = "1m"`` schedules of one kind."""
    every = timedelta(minutes=1)
    return [Schedule(name=f"heartbeat_{i}", kind="heartbeat", every=every) for i in range(count)]


def pinned_now(conn: psycopg.Connection[Any]) -> datetime:
    """The database's time, moved to 20 s past a minute so no period is on the edge."""
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now.replace(second=20, microsecond=0)


def tick_times(url: str, count: int) -> list[Result]:
    """Median milliseconds of the three kinds of tick for ``count`` schedules."""
    schedules = build_schedules(count)
    timings: dict[str, list[float]] = {"new": [], "existing": [], "idle": []}
    with psycopg.connect(url, autocommit=True) as conn:
        now = pinned_now(conn)
        for _ in range(REPEATS):
            database.truncate(url, "jobs", "pgbeat_schedule_history")
            first, second = Scheduler(url, schedules), Scheduler(url, schedules)
            timings["new"].append(_timed(first, conn, now, count, inserted=True))
            timings["existing"].append(_timed(second, conn, now, count, inserted=False))
            later = now + timedelta(seconds=1)
            timings["idle"].append(_timed(first, conn, later, 0, inserted=True))
    return [_result(count, kind, values) for kind, values in timings.items()]


def _timed(
    scheduler: Scheduler,
    conn: psycopg.Connection[Any],
    now: datetime,
    expected: int,
    *,
    inserted: bool,
) -> float:
    """Milliseconds of one tick; checks it inserted (or found) ``expected`` periods."""
    with Stopwatch() as watch:
        result = scheduler.tick(conn, now)
    got = len(result.inserted if inserted else result.existing)
    if got != expected:
        raise RuntimeError(f"a tick gave {got} periods, expected {expected}")
    return watch.seconds * 1000


def _result(count: int, kind: str, millis: list[float]) -> Result:
    meaning = {
        "new": "first tick, every period inserted",
        "existing": "another replica's first tick, every period already enqueued",
        "idle": "next tick a second later, nothing due",
    }[kind]
    return Result(
        SYSTEM,
        TICK,
        f"{count}-{kind}",
        round(statistics.median(millis), 2),
        "ms",
        f"{count} every=1m schedules: {meaning} (median of {len(millis)})",
        {"schedules": count, "rows": kind, "runs_ms": [round(m, 2) for m in millis]},
    )


def main() -> None:
    parser = system_arguments(__doc__ or "")
    parser.add_argument("--schedules", default="1000,10000", help="comma-separated counts")
    args = parse_system_arguments(parser)
    with psycopg.connect(args.url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
    results = []
    for count in (int(c) for c in args.schedules.split(",")):
        log(f"pgbeat: scheduler ticks with {count} schedules")
        results.extend(tick_times(args.url, count))
    emit(results)


if __name__ == "__main__":
    main()
