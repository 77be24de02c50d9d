"""A cancel notification is a hint: PostgreSQL has no privilege on NOTIFY, so any role that
can connect may send ``NOTIFY pgbeat_cancel, '<id>'``. A real worker stops only the runs the
database says were asked to stop (``cancel_requested_at``); a forged id changes nothing, and
a run stopped with no request in the database is released, never failed."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.sql.jobs import outcomes as outcome_sql
from pgbeat.worker import operations
from pgbeat.worker.claiming import Claimer
from pgbeat.worker.listener import CANCEL_CHANNEL
from tests.apps.steer_app import SETUP
from tests.helpers import PROCESS_START, CliProcess, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
APP = "tests.apps.steer_app:registry"

pytestmark = pytest.mark.slow  # a worker process and handlers that sleep seconds


@pytest.fixture
def worker(database_url: str, conn: psycopg.Connection[Any]) -> Iterator[CliProcess]:
    conn.execute(SETUP.encode())
    process = start_cli(
        ["worker", APP, "--concurrency", "4", "--lease", "30s", "--poll", "200ms"],
        database_url,
        cwd=ROOT,
    )
    wait_for(lambda: listening(conn), timeout=PROCESS_START)  # a forged cancel must reach it
    yield process
    process.stop(signal.SIGKILL)


def listening(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'pgbeat-listener' AND query = %s",
        (outcome_sql.JOBS_LISTEN_CANCEL,),  # the listener's last statement
    ).fetchone()
    return row is not None and row[0] == 1


def forge(url: str, job_id: int) -> None:
    """A cancel notification from a connection of its own, with no request behind it."""
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, %s)", (CANCEL_CHANNEL, str(job_id)))


def executions(conn: psycopg.Connection[Any], job_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM executions WHERE job_id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])


def running_sleepy(conn: psycopg.Connection[Any], seconds: int) -> int:
    """A job that sleeps ``seconds`` (unless cancelled), once the worker has started it."""
    job_id = pgbeat.enqueue(conn, "sleepy", {"seconds": seconds})
    assert job_id is not None
    wait_for(lambda: executions(conn, job_id) == 1, timeout=30)
    return job_id


def test_a_forged_cancel_of_a_running_job_does_not_stop_it(
    database_url: str, conn: psycopg.Connection[Any], worker: CliProcess
) -> None:
    job_id = running_sleepy(conn, 3)
    forge(database_url, job_id)
    assert pgbeat.wait(conn, job_id, timeout=60).status == "done"
    row = conn.execute("SELECT how FROM ends WHERE job_id = %s", (job_id,)).fetchall()
    assert row == [("done",)]  # never told to stop: it slept its three seconds


def test_a_forged_cancel_of_a_job_about_to_be_claimed_does_not_stop_it(
    database_url: str, conn: psycopg.Connection[Any], worker: CliProcess
) -> None:
    """The worker remembers cancels heard for 2 s for runs it has not started yet."""
    later = pgbeat.enqueue(conn, "sleepy", {"seconds": 1}, delay=timedelta(seconds=1))
    assert later is not None
    forge(database_url, later)
    assert pgbeat.wait(conn, later, timeout=60).status == "done"


def test_a_real_cancel_still_stops_the_run_at_once(
    database_url: str, conn: psycopg.Connection[Any], worker: CliProcess
) -> None:
    job_id = running_sleepy(conn, 60)
    asked = time.monotonic()
    assert pgbeat.cancel_job(conn, job_id).accepted
    assert pgbeat.wait(conn, job_id, timeout=30).status == "cancelled"
    assert time.monotonic() - asked < 30


def test_a_run_stopped_for_a_cancel_with_no_request_is_released(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The outcome statement itself: a run its worker stopped for a cancel the database does
    not hold goes back to pending, its attempt given back, not to failed."""
    job_id = pgbeat.enqueue(conn, "sleepy", {})
    with psycopg.connect(database_url, autocommit=True) as worker_conn:
        (job,) = Claimer(timedelta(minutes=1), None, None).claim(worker_conn, 1)
        assert operations.stop_jobs(worker_conn, [(job, "CancelRequested: x")]) == set()
    row = conn.execute(
        "SELECT status, attempts, last_error FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ("pending", 0, None)
