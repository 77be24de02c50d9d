"""The scheduler's one-statement insert: every column of many schedules, mixed ticks, races."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgbeat.db.literals import text_array
from pgbeat.observe.metrics import Metrics
from pgbeat.scheduling.catchup import due_periods
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler, TickResult
from tests.helpers import lock_waiters, wait_for

T0 = datetime(2026, 3, 1, 12, 0, 20, tzinfo=UTC)  # 20 s past a minute: nothing on the edge
ODD_TEXTS = ["plain", 'say "hi"', "back\\slash", "comma, {brace}", "NULL", " spaced ", "ünï", ""]


class CountingMetrics(Metrics):
    """Sums the periods counted per schedule."""

    def __init__(self) -> None:
        self.counts: dict[str, tuple[int, int]] = {}

    def periods(self, schedule: str, inserted: int, existing: int) -> None:
        before = self.counts.get(schedule, (0, 0))
        self.counts[schedule] = (before[0] + inserted, before[1] + existing)


def varied_schedules() -> list[Schedule]:
    """Schedules in several groups (timing x catch-up) and with many templates each."""
    policies: list[dict[str, Any]] = [
        {"every": "1m", "catch_up": "all", "catch_up_window": "3m"},  # three periods each
        {"every": "1m", "catch_up": "latest"},
        {"cron": "*/2 * * * *", "timezone": "Europe/Berlin", "catch_up": "all"},
        {"every": "1m", "catch_up": "none"},  # nothing due at T0
    ]
    return [
        Schedule(
            name=f"s{index}",
            kind=ODD_TEXTS[index % 5],
            payload={"text": ODD_TEXTS[index % len(ODD_TEXTS)], "n": index % 3},
            max_attempts=[None, 2, 5][index % 3],
            **policies[index % len(policies)],
        )
        for index in range(40)
    ]


# A period's job outlives purges for its schedule's catch-up window, plus the 5 s a period
# may be late and still on time, plus a minute of slack (docs: "kept at least as long as
# the window"); written out here rather than taken from catchup.keep_for.
KEEP_BEYOND_WINDOW = timedelta(seconds=5) + timedelta(minutes=1)


def expected_key(schedule: Schedule, fire: datetime) -> str:
    """'<schedule>@<fire time in UTC, to the second>Z', computed apart from unique_key()."""
    return f"{schedule.name}@{fire.astimezone(UTC).replace(tzinfo=None).isoformat()}Z"


def expected_rows(schedules: list[Schedule]) -> set[tuple[Any, ...]]:
    """The jobs a first tick at T0 must insert: the due periods of the pure catch-up
    function, each column computed here."""
    return {
        (
            s.kind,
            json.dumps(s.payload, sort_keys=True),
            s.max_attempts or 8,
            fire,
            expected_key(s, fire),
            fire + s.catch_up_window + KEEP_BEYOND_WINDOW,
        )
        for s in schedules
        for fire in due_periods(s, None, T0)
    }


def stored_rows(conn: psycopg.Connection[Any]) -> set[tuple[Any, ...]]:
    query = "SELECT kind, payload, max_attempts, run_at, unique_key, keep_until FROM jobs"
    return {
        (kind, json.dumps(payload, sort_keys=True), *rest)
        for kind, payload, *rest in conn.execute(query)
    }


def test_text_arrays_survive_quotes_backslashes_and_braces(
    conn: psycopg.Connection[Any],
) -> None:
    for values in (ODD_TEXTS, [], ["x"] * 3):
        row = conn.execute("SELECT %(values)s::text[]", {"values": text_array(values)}).fetchone()
        assert row == (values,)


def test_every_column_of_every_period_is_written(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    schedules = varied_schedules()
    metrics = CountingMetrics()
    result = Scheduler(database_url, schedules, metrics=metrics, heartbeat=False).tick(conn, T0)
    expected = expected_rows(schedules)
    assert len(expected) > len(schedules)  # catch-up "all" gives some several periods
    assert stored_rows(conn) == expected
    assert result.inserted == sorted(row[4] for row in expected)
    assert result.existing == []
    assert metrics.counts == {
        s.name: (len(due_periods(s, None, T0)), 0) for s in schedules if due_periods(s, None, T0)
    }


def test_a_replica_finds_some_periods_present_and_inserts_the_others(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    schedules = varied_schedules()
    first = Scheduler(database_url, schedules, heartbeat=False).tick(conn, T0)
    removed = first.inserted[::3]
    # periods that no replica has claimed yet: neither their job nor their history row
    conn.execute("DELETE FROM jobs WHERE unique_key = ANY(%s)", (removed,))
    conn.execute("DELETE FROM pgbeat_schedule_history WHERE job_id NOT IN (SELECT id FROM jobs)")
    metrics = CountingMetrics()
    replica = Scheduler(database_url, schedules, metrics=metrics, heartbeat=False)
    caplog.clear()  # the second tick's lines only (an earlier in-process `main` leaves INFO on)
    with caplog.at_level(logging.DEBUG, logger="pgbeat.scheduler"):
        second = replica.tick(conn, T0 + timedelta(seconds=1))
    assert second.inserted == removed
    assert sorted(second.existing) == sorted(set(first.inserted) - set(removed))
    assert stored_rows(conn) == expected_rows(schedules)
    assert sum(new for new, _ in metrics.counts.values()) == len(removed)
    assert sum(old for _, old in metrics.counts.values()) == len(second.existing)
    lines = [
        (r.levelname, r.getMessage(), getattr(r, "unique_key", None))
        for r in caplog.records
        if r.name == "pgbeat.scheduler" and hasattr(r, "unique_key")  # the period lines
    ]
    # A line per period at DEBUG; at INFO one summary line for the tick.
    assert sorted(line for line in lines if line[1].startswith("enqueued ")) == [
        ("DEBUG", f"enqueued {key}", key) for key in removed
    ]
    assert len([line for line in lines if line[1].startswith("already")]) == len(second.existing)
    summaries = [
        r.getMessage()
        for r in caplog.records
        if r.name == "pgbeat.scheduler"
        and r.levelno == logging.INFO
        and r.getMessage().startswith("tick: ")
    ]
    assert len(summaries) == 1 and summaries[0].startswith(f"tick: {len(removed)} enqueued")


def test_a_period_being_inserted_by_another_replica_is_not_inserted_twice(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    schedule = Schedule(name="m", kind="minutely", every=timedelta(minutes=1), catch_up="none")
    fire = T0.replace(second=0)
    key = expected_key(schedule, fire)
    results: list[TickResult] = []
    with (
        psycopg.connect(database_url) as other,
        psycopg.connect(database_url, autocommit=True) as c,
    ):
        # another writer's insert, not yet committed: the tick's insert waits on its key
        other.execute(
            "INSERT INTO jobs (kind, payload, unique_key, run_at) VALUES (%s, '{}', %s, %s)",
            (schedule.kind, key, fire),
        )
        scheduler = Scheduler(database_url, [schedule], heartbeat=False)
        now = fire + timedelta(seconds=3)  # the period is on time
        tick = threading.Thread(target=lambda: results.append(scheduler.tick(c, now)))
        tick.start()
        wait_for(
            lambda: lock_waiters(conn) == 1,
            message="the tick to wait for the other replica's insert",
        )
        other.commit()
        tick.join(timeout=10)
    assert results and results[0].inserted == [] and results[0].existing == [key]
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


def test_a_period_whose_job_exists_without_history_keeps_that_job(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A job inserted for the period by an older pgbeat (no history row): the claim's
    history row is pointed at it, no second job, and the period counts as existing."""
    schedule = Schedule(name="m", kind="minutely", every=timedelta(minutes=1), catch_up="none")
    fire = T0.replace(second=0)
    key = expected_key(schedule, fire)
    row = conn.execute(
        "INSERT INTO jobs (kind, payload, unique_key, run_at) VALUES (%s, '{}', %s, %s)"
        " RETURNING id",
        (schedule.kind, key, fire),
    ).fetchone()
    assert row is not None
    result = Scheduler(database_url, [schedule], heartbeat=False).tick(
        conn, fire + timedelta(seconds=3)
    )
    assert result.inserted == [] and result.existing == [key]
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
    history = conn.execute("SELECT outcome, job_id FROM pgbeat_schedule_history").fetchall()
    assert history == [("enqueued", row[0])]


def test_an_idle_tick_inserts_nothing_and_reports_the_next_fire(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    scheduler = Scheduler(database_url, varied_schedules(), heartbeat=False)
    first = scheduler.tick(conn, T0)
    idle = scheduler.tick(conn, T0 + timedelta(seconds=1))
    assert idle == TickResult([], [], first.next_fire)
    assert first.next_fire == datetime(2026, 3, 1, 12, 1, tzinfo=UTC)
