"""A schedule the database refuses fails alone; a scheduler that dies stops `pgbeat run`.

Before, one refused period failed the tick's single statement: with an OperationalError
(an index row too large) the scheduler retried it forever as an outage and enqueued
nothing; with any other error the scheduler died, and in `pgbeat run` the worker ran on
without scheduling.
"""

from __future__ import annotations

import logging
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import in_thread, start_cli, wait_for

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
ROOT = str(Path(__file__).resolve().parents[2])
# The jobs table refuses one kind: a period the database rejects for its own values.
REFUSE_KIND = "ALTER TABLE jobs ADD CONSTRAINT refuse_kind CHECK (kind <> 'refused')"
SCHEDULES = """
[schedules.good]
every = "1s"
catch_up = "none"
[schedules.bad]
every = "1s"
kind = "refused"
catch_up = "none"
[schedules.other]
cron = "* * * * *"
catch_up = "none"
"""


def test_a_refused_schedule_does_not_stop_the_others(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    conn.execute(REFUSE_KIND)
    scheduler = Scheduler(database_url, parse_schedules(SCHEDULES), heartbeat=False)
    with caplog.at_level(logging.ERROR, logger="pgbeat.scheduler"):
        result = scheduler.tick(conn, T0)
    assert {"good@2026-03-01T12:00:00Z", "other@2026-03-01T12:00:00Z"} <= set(result.inserted)
    assert {key.partition("@")[0] for key in result.inserted} == {"good", "other"}
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["schedule bad"]
    later = scheduler.tick(conn, T0 + timedelta(seconds=1))
    assert later.inserted == ["good@2026-03-01T12:00:01Z"]


@pytest.mark.slow
def test_a_running_scheduler_keeps_enqueuing_beside_a_refused_schedule(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    conn.execute(REFUSE_KIND)
    scheduler = Scheduler(database_url, parse_schedules(SCHEDULES), heartbeat=False)
    with caplog.at_level(logging.WARNING), in_thread(scheduler, join=15) as thread:
        wait_for(
            lambda: _count(conn, "good") >= 3,
            timeout=15,
            message="three periods of the good schedule",
        )
        assert thread.is_alive()
    assert "database unavailable" not in caplog.text  # a refusal is not an outage
    assert "schedule bad: the database refused its periods" in caplog.text


def _count(conn: psycopg.Connection[Any], kind: str) -> int:
    row = conn.execute("SELECT count(*) FROM jobs WHERE kind = %s", (kind,)).fetchone()
    return int(row[0]) if row else 0


def test_an_error_that_is_no_schedule_s_own_still_stops_the_scheduler(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("DROP TABLE pgbeat_schedule_history")  # every claim fails alike: a bug
    scheduler = Scheduler(database_url, parse_schedules(SCHEDULES), heartbeat=False)
    with pytest.raises(psycopg.errors.UndefinedTable):
        scheduler.tick(conn, T0)


@pytest.mark.slow
def test_pgbeat_run_exits_non_zero_when_its_scheduler_dies(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("DROP TABLE pgbeat_schedule_history")  # the scheduler's first tick fails
    code, output = _run_until_it_exits(database_url)
    assert code == 1, output
    assert "the scheduler stopped on an unexpected error" in output
    assert output.rstrip().splitlines()[-1].startswith("pgbeat: error: the scheduler stopped:")


@pytest.mark.slow
def test_pgbeat_run_exits_non_zero_when_its_worker_dies(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    # Every claim fails with an error no job causes: the worker stops, and so does the run.
    conn.execute("""
        CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'claims refused' USING ERRCODE = '42501'; END $$;
        CREATE TRIGGER refuse_claims BEFORE UPDATE ON jobs
            FOR EACH ROW EXECUTE FUNCTION refuse_claims();
    """)
    code, output = _run_until_it_exits(database_url)
    assert code == 1, output
    assert "claims refused" in output.rstrip().splitlines()[-1]


def _run_until_it_exits(database_url: str) -> tuple[int, str]:
    """``pgbeat run``'s exit status and output, once it exits by itself (60 s at most)."""
    run = start_cli(["run", "--grace", "1s"], database_url, cwd=ROOT)
    try:
        code = run.wait(timeout=60)
    finally:
        output = run.stop(signal.SIGKILL)
    return code, output
