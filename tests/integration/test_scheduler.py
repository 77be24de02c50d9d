"""The scheduler against a real database: one job per period, catch-up, replicas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.scheduler import Scheduler

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def schedules(text: str) -> Any:
    return parse_schedules(text, source="test.toml")


def jobs(conn: psycopg.Connection[Any]) -> list[tuple[str, str, datetime]]:
    return [
        tuple(row)
        for row in conn.execute("SELECT kind, unique_key, run_at FROM jobs ORDER BY run_at, kind")
    ]


def test_a_tick_inserts_each_due_period_once(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    loaded = schedules(
        """
        [schedules.minutely]
        every = "1m"
        catch_up = "none"
        payload = { n = 1 }
        max_attempts = 2
        [schedules.report]
        cron = "0 12 * * *"
        kind = "daily_report"
        catch_up = "none"
        """
    )
    replica_a, replica_b = Scheduler(database_url, loaded), Scheduler(database_url, loaded)
    first = replica_a.tick(conn, T0)
    second = replica_b.tick(conn, T0 + timedelta(milliseconds=300))
    assert first.inserted == ["minutely@2026-03-01T12:00:00Z", "report@2026-03-01T12:00:00Z"]
    assert second.inserted == []
    assert sorted(second.existing) == first.inserted
    assert first.next_fire == T0 + timedelta(minutes=1)
    row = conn.execute(
        "SELECT kind, payload, max_attempts, run_at, keep_until > run_at FROM jobs "
        "WHERE unique_key LIKE 'minutely@%'"
    ).fetchone()
    assert row == ("minutely", {"n": 1}, 2, T0, True)
    assert jobs(conn)[0][0] == "daily_report"


def test_nothing_is_enqueued_early(database_url: str, conn: psycopg.Connection[Any]) -> None:
    loaded = schedules('[schedules.m]\nevery = "1m"\ncatch_up = "none"\n')
    scheduler = Scheduler(database_url, loaded)
    scheduler.tick(conn, T0 + timedelta(seconds=30))
    assert jobs(conn) == []
    scheduler.tick(conn, T0 + timedelta(seconds=59, microseconds=999_999))
    assert jobs(conn) == []
    scheduler.tick(conn, T0 + timedelta(minutes=1))
    assert [key for _, key, _ in jobs(conn)] == ["m@2026-03-01T12:01:00Z"]


@pytest.mark.parametrize(
    ("policy", "expected_minutes"),
    [
        ("none", [0]),  # 12:01..12:10 were missed: skipped
        ("latest", [0, 10]),  # only the most recent missed period
        ("all", list(range(11))),  # every missed period inside the window
    ],
)
def test_catch_up_after_an_outage(
    database_url: str, conn: psycopg.Connection[Any], policy: str, expected_minutes: list[int]
) -> None:
    loaded = schedules(
        f'[schedules.m]\nevery = "1m"\ncatch_up = "{policy}"\ncatch_up_window = "1h"\n'
    )
    scheduler = Scheduler(database_url, loaded)
    scheduler.tick(conn, T0)  # enqueues 12:00 (and, with "all", the hour before)
    conn.execute("DELETE FROM jobs WHERE run_at < %s", (T0,))
    # every replica was down from 12:00:30 to 12:10:30 (the 12:10 period is 30 s late)
    scheduler.tick(conn, T0 + timedelta(minutes=10, seconds=30))
    minutes = [int((run_at - T0).total_seconds() // 60) for _, _, run_at in jobs(conn)]
    assert minutes == expected_minutes


def test_latest_catches_up_the_most_recent_missed_period(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    loaded = schedules(
        '[schedules.daily]\ncron = "0 2 * * *"\ntimezone = "Europe/Berlin"\n'
        'catch_up = "latest"\ncatch_up_window = "1d"\n'
    )
    # the fleet comes back at 09:00 Berlin time: 02:00 was missed, 7 hours ago
    Scheduler(database_url, loaded).tick(conn, datetime(2026, 6, 10, 7, 0, tzinfo=UTC))
    assert [key for _, key, _ in jobs(conn)] == ["daily@2026-06-10T00:00:00Z"]


def test_catch_up_never_reaches_beyond_the_window(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    loaded = schedules('[schedules.m]\nevery = "1m"\ncatch_up = "all"\ncatch_up_window = "5m"\n')
    Scheduler(database_url, loaded).tick(conn, T0)
    assert [int((r - T0).total_seconds() // 60) for _, _, r in jobs(conn)] == [-4, -3, -2, -1, 0]


def test_a_restart_does_not_enqueue_a_finished_period_again(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    loaded = schedules('[schedules.m]\nevery = "1m"\ncatch_up = "all"\ncatch_up_window = "3m"\n')
    Scheduler(database_url, loaded).tick(conn, T0)
    conn.execute("UPDATE jobs SET status = 'done'")
    restarted = Scheduler(database_url, loaded).tick(conn, T0 + timedelta(seconds=20))
    assert restarted.inserted == []
    assert len(jobs(conn)) == 3  # 11:58, 11:59, 12:00: the window's start is excluded


def test_disabled_schedules_are_ignored(database_url: str, conn: psycopg.Connection[Any]) -> None:
    loaded = schedules('[schedules.m]\nevery = "1m"\nenabled = false\n')
    assert Scheduler(database_url, loaded).tick(conn, T0).inserted == []
