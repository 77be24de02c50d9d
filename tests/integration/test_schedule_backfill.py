"""Backfill: past periods enqueued on request, once each, read in the schedule's own zone."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling import state
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import run_cli_here
from tests.integration.test_schedule_state import database_now

HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)


def jobs(conn: psycopg.Connection[Any]) -> list[tuple[str, datetime]]:
    rows = conn.execute("SELECT unique_key, run_at FROM jobs ORDER BY run_at, id").fetchall()
    return [(key, run_at) for key, run_at in rows]


def test_a_backfill_enqueues_each_past_period_once(conn: psycopg.Connection[Any]) -> None:
    pgbeat.upsert_schedule(conn, "report", every="10m", queue="reports", priority=3)
    end = database_now(conn).replace(minute=0, second=0, microsecond=0)
    start = end - HOUR
    assert state.backfill(conn, "report", start, end, by="test:alice") == 6
    assert state.backfill(conn, "report", start, end, by="test:alice") == 0  # idempotent
    assert state.backfill(conn, "report", start - HOUR, end, by="test:bob") == 6
    rows = conn.execute(
        "SELECT count(*), count(DISTINCT unique_key), min(queue), max(priority) FROM jobs"
    ).fetchone()
    assert rows == (12, 12, "reports", 3)
    records = state.schedule_history(conn, "report", limit=100)
    assert {r.outcome for r in records} == {"backfill"}
    assert {r.inserted_by for r in records} == {"test:alice", "test:bob"}
    assert all(r.job_id is not None for r in records)
    first = jobs(conn)[0]
    assert first == (f"report@{start - HOUR:%Y-%m-%dT%H:%M:%SZ}", start - HOUR)


def test_a_backfill_leaves_alone_the_periods_the_scheduler_decided(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "beat", every="1s", catch_up="none")
    now = database_now(conn)
    fire = now.replace(microsecond=0) + timedelta(seconds=1)
    # Created inside fire's second, so the tick decides fire alone: created before the
    # previous second's period (the upsert and the clock read straddling a second, as under
    # load), the tick would also record that period as missed.
    conn.execute(
        "UPDATE pgbeat_schedules SET created_at = %s WHERE name = 'beat'",
        (fire - timedelta(milliseconds=500),),
    )
    Scheduler(database_url, None, heartbeat=False).tick(conn, fire)
    conn.execute("UPDATE pgbeat_schedule_history SET fire_at = fire_at - interval '10 s'")
    conn.execute("UPDATE jobs SET run_at = run_at - interval '10 s'")
    decided = fire - timedelta(seconds=10)
    plan = state.preview_backfill(conn, "beat", decided - timedelta(seconds=2), decided + SECOND)
    assert plan.periods == [decided - 2 * SECOND, decided - SECOND, decided]
    assert plan.new == [decided - 2 * SECOND, decided - SECOND]
    assert state.backfill(conn, "beat", decided - 2 * SECOND, decided + SECOND) == 2


def test_a_backfill_across_a_fall_back_night_runs_what_debian_cron_would(
    conn: psycopg.Connection[Any],
) -> None:
    """Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:00-02:59 happens twice. An
    hourly job runs in both; one at the fixed time 02:30 runs once, at the first."""
    pgbeat.upsert_schedule(conn, "hourly", cron="0 * * * *", timezone="Europe/Berlin")
    pgbeat.upsert_schedule(conn, "nightly", cron="30 2 * * *", timezone="Europe/Berlin")
    start = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)  # 00:00 CEST
    end = datetime(2026, 10, 25, 4, 0, tzinfo=UTC)  # 05:00 CET
    assert state.backfill(conn, "hourly", start, end) == 6
    assert state.backfill(conn, "nightly", start, end) == 1
    runs = [(key.partition("@")[0], run_at.astimezone(UTC)) for key, run_at in jobs(conn)]
    assert runs == [
        ("hourly", datetime(2026, 10, 24, 22, 0, tzinfo=UTC)),  # 00:00 CEST
        ("hourly", datetime(2026, 10, 24, 23, 0, tzinfo=UTC)),  # 01:00 CEST
        ("hourly", datetime(2026, 10, 25, 0, 0, tzinfo=UTC)),  # 02:00 CEST
        ("nightly", datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),  # 02:30 CEST, once
        ("hourly", datetime(2026, 10, 25, 1, 0, tzinfo=UTC)),  # 02:00 CET, again
        ("hourly", datetime(2026, 10, 25, 2, 0, tzinfo=UTC)),  # 03:00 CET
        ("hourly", datetime(2026, 10, 25, 3, 0, tzinfo=UTC)),  # 04:00 CET
    ]


def test_bad_ranges_are_refused_before_anything_is_written(
    conn: psycopg.Connection[Any],
) -> None:
    pgbeat.upsert_schedule(conn, "beat", every="1s")
    now = database_now(conn)
    with pytest.raises(ValueError, match="after start"):
        state.backfill(conn, "beat", now - HOUR, now - 2 * HOUR)
    with pytest.raises(ValueError, match="in the future"):
        state.backfill(conn, "beat", now - HOUR, now + HOUR)
    with pytest.raises(ValueError, match="more than 10,000 periods"):
        state.backfill(conn, "beat", now - 4 * HOUR, now - HOUR)
    with pytest.raises(ValueError, match="timezone-aware"):
        state.backfill(conn, "beat", datetime(2026, 1, 1), now)  # noqa: DTZ001
    with pytest.raises(TypeError, match="start"):
        state.backfill(conn, "beat", "yesterday", now)  # type: ignore[call-overload]
    with pytest.raises(pgbeat.errors.ScheduleNotFound):
        state.backfill(conn, "nope", now - HOUR, now)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def run_cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_here(["schedules", *args], database_url)


def test_the_cli_backfills_and_dry_runs(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pgbeat.upsert_schedule(conn, "report", every="15m")
    end = database_now(conn).replace(minute=0, second=0, microsecond=0)
    span = ["--from", (end - HOUR).isoformat(), "--to", end.isoformat()]
    dry = run_cli(database_url, "backfill", "report", *span, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == "would enqueue 4 periods of report (0 already decided)"
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    done = run_cli(database_url, "backfill", "report", *span)
    assert done.returncode == 0 and done.stdout == "enqueued 4 periods of report\n"
    again = run_cli(database_url, "backfill", "report", *span)
    assert again.stdout == "enqueued 0 periods of report\n"
    by = conn.execute("SELECT DISTINCT inserted_by FROM pgbeat_schedule_history").fetchall()
    assert len(by) == 1 and by[0][0].startswith("cli:")
    reversed_ = run_cli(database_url, "backfill", "report", "--from", span[3], "--to", span[1])
    assert reversed_.returncode == 1
    assert len(reversed_.stderr.strip().splitlines()) == 1 and "after start" in reversed_.stderr


@pytest.mark.slow  # a subprocess per CLI call
def test_the_cli_refuses_a_range_past_the_cap_and_lists_the_dry_runs_periods(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "often", every="1m")
    end = database_now(conn).replace(second=0, microsecond=0)
    too_long = ["--from", (end - timedelta(days=7)).isoformat(), "--to", end.isoformat()]
    refused = run_cli(database_url, "backfill", "often", *too_long)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "more than 10,000 periods" in lines[0] and "'often'" in lines[0]
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM pgbeat_schedule_history").fetchone() == (0,)
    span = ["--from", (end - timedelta(minutes=3)).isoformat(), "--to", end.isoformat()]
    dry = run_cli(database_url, "backfill", "often", *span, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    expected = [f"{end - timedelta(minutes=n):%Y-%m-%d %H:%M:%S}Z" for n in (3, 2, 1)]
    assert dry.stdout.splitlines()[0] == "would enqueue 3 periods of often (0 already decided)"
    assert [line.strip() for line in dry.stdout.splitlines()[1:]] == expected


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_a_range_from_the_year_1_is_refused_in_one_line(
    conn: psycopg.Connection[Any], zone: str
) -> None:
    """The hostile-input test found it: a start at 0001-01-01 went one microsecond (or, west
    of UTC, some hours) before what a datetime holds, and the backfill died of
    OverflowError. It is refused as bad input, before anything is written."""
    pgbeat.upsert_schedule(conn, "beat", every="1h", timezone=zone)
    end = database_now(conn).replace(minute=0, second=0, microsecond=0)
    start = datetime(1, 1, 1, tzinfo=UTC)
    for call in (state.preview_backfill, state.backfill):
        with pytest.raises(ValueError, match=r"backfill of 'beat': .* before the year 1") as err:
            call(conn, "beat", start, end)
        assert "\n" not in str(err.value)
    assert conn.execute("SELECT count(*) FROM pgbeat_schedule_history").fetchone() == (0,)
