"""Steering jobs with an in-process worker: snooze, cancel of a running job (by id and by
key, and by a schedule's next period), renewed leases, and what handlers see. Results and
``wait`` are in test_steering_results.py."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.errors import JobNotFound
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.worker import operations
from tests.apps.steer_app import registry as steer_registry
from tests.helpers import wait_for
from tests.integration.steering_support import (  # noqa: F401 (the two fixtures)
    attempts_of,
    job_row,
    running_worker,
    started,
    tables_fixture,
    worker_fixture,
)
from tests.integration.test_schedule_state import SECOND, whole_second_after

# -- snooze ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_snoozes_never_exhaust_the_attempts(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any]
) -> None:
    job_id = pgbeat.enqueue(conn, "snoozer", {"times": 12}, max_attempts=3)
    assert job_id is not None
    finished = pgbeat.wait(conn, job_id, timeout=30)
    assert (finished.status, finished.result) == ("done", {"runs": 12})
    row = job_row(conn, job_id)
    # Snooze, exactly: the snoozed runs gave their attempts back, and are counted apart.
    assert (row["attempts"], row["max_attempts"], row["snoozes"]) == (1, 3, 11)
    wait_for(lambda: attempts_of(conn, job_id) == ["snoozed"] * 11, message="11 snoozes")


def test_snooze_rejects_what_is_not_a_time() -> None:
    with pytest.raises(TypeError):
        pgbeat.Snooze("soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timezone-aware"):
        pgbeat.Snooze(datetime(2030, 1, 1))  # noqa: DTZ001 (the naive datetime is the point)
    assert pgbeat.Snooze(5).after == timedelta(seconds=5)


# -- cancel ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sleepy", "async_sleepy"])
def test_cancel_job_stops_a_running_handler(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any], kind: str
) -> None:
    job_id = pgbeat.enqueue(conn, kind, {"seconds": 30}, job_key="k1")
    assert job_id is not None
    wait_for(lambda: started(conn, job_id) == 1, message="the handler started")
    asked = time.monotonic()
    assert pgbeat.cancel_job(conn, job_id, reason="no longer needed") == pgbeat.CancelResult(
        job_id, "running"
    )
    finished = pgbeat.wait(conn, job_id, timeout=10)
    took = time.monotonic() - asked
    assert finished.status == "cancelled"
    assert finished.last_error is not None
    assert finished.last_error.startswith("cancelled: no longer needed")
    assert took < 1.0, took
    wait_for(
        lambda: conn.execute("SELECT how FROM ends WHERE job_id = %s", (job_id,)).fetchone(),
        message="the handler heard of the cancel",
    )
    assert conn.execute("SELECT how FROM ends WHERE job_id = %s", (job_id,)).fetchall() == [
        ("stopped",)
    ]
    wait_for(lambda: attempts_of(conn, job_id) == ["cancelled"], message="a cancelled attempt")
    assert pgbeat.find(conn, kind, "k1") is None  # the key is free
    assert pgbeat.cancel_job(conn, job_id) == pgbeat.CancelResult(job_id, "cancelled")


@pytest.mark.slow
def test_cancel_by_key_stops_a_running_handler(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any]
) -> None:
    job_id = pgbeat.enqueue(conn, "async_sleepy", {"seconds": 30}, job_key="u1")
    assert job_id is not None
    wait_for(lambda: started(conn, job_id) == 1, message="the handler started")
    assert pgbeat.cancel(conn, "async_sleepy", "u1") == pgbeat.Cancelled(job_id, was_running=True)
    assert pgbeat.wait(conn, job_id, timeout=5).status == "cancelled"
    assert started(conn, job_id) == 1


@pytest.mark.slow
def test_cancel_other_stops_the_running_handler_of_the_period_it_replaces(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    """overlap = "cancel_other" end to end: the new period's job cancels the run of the one
    before it, in a running worker, as pgbeat.cancel_job does."""
    pgbeat.upsert_schedule(
        conn,
        "newest",
        every="1s",
        kind="sleepy",
        payload={"seconds": 30},
        catch_up="none",
        overlap="cancel_other",
    )
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    first = conn.execute("SELECT max(id) FROM jobs").fetchone()
    assert first is not None and first[0] is not None
    wait_for(lambda: started(conn, first[0]) == 1, message="the first period's handler started")
    asked = time.monotonic()
    replaced = scheduler.tick(conn, t0 + SECOND)
    assert len(replaced.inserted) == 1
    finished = pgbeat.wait(conn, first[0], timeout=10)
    assert finished.status == "cancelled", finished
    assert finished.last_error is not None and "cancel_other" in finished.last_error
    assert time.monotonic() - asked < 5
    wait_for(
        lambda: (
            conn.execute("SELECT how FROM ends WHERE job_id = %s", (first[0],)).fetchall()
            == [("stopped",)]
        ),
        message="the handler heard of the cancel",
    )
    second = conn.execute("SELECT max(id) FROM jobs").fetchone()
    assert second is not None and second[0] != first[0]
    pgbeat.cancel_job(conn, second[0])  # not left running for 30 s past the test
    assert pgbeat.wait(conn, second[0], timeout=10).status == "cancelled"


def test_cancel_job_of_pending_finished_and_missing_jobs(conn: psycopg.Connection[Any]) -> None:
    pending = pgbeat.enqueue(conn, "result", {}, delay=timedelta(hours=1))
    assert pending is not None
    assert pgbeat.cancel_job(conn, pending).accepted
    assert job_row(conn, pending)["status"] == "cancelled"
    done = pgbeat.enqueue(conn, "result", {})
    assert done is not None
    (claimed,) = operations.claim_jobs(conn, 1, timedelta(minutes=1), None)
    operations.complete_jobs(conn, [claimed])
    result = pgbeat.cancel_job(conn, done)
    assert (result.previous_status, result.accepted) == ("done", False)
    with pytest.raises(JobNotFound):
        pgbeat.cancel_job(conn, 10**12)
    with pytest.raises(TypeError, match="job_id"):
        pgbeat.cancel_job(conn, True)


def test_a_cancelled_run_that_completes_ends_cancelled(conn: psycopg.Connection[Any]) -> None:
    """The cancel committed first: whatever the run returns, the job never ends done."""
    job_id = pgbeat.enqueue(conn, "result", {})
    (run,) = operations.claim_jobs(conn, 1, timedelta(minutes=1), None)
    pgbeat.cancel_job(conn, run.id)
    assert operations.complete_jobs(conn, [run], ['{"late": true}']) == {job_id}
    assert job_row(conn, run.id)["status"] == "cancelled"


@pytest.mark.slow
def test_a_superseded_run_that_retries_is_recorded_as_cancelled(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    registry = pgbeat.Registry()
    release = threading.Event()

    @registry.handler("remind")
    def remind(payload: dict[str, Any]) -> None:
        if payload["v"] == 1:
            release.wait(10)
            raise RuntimeError("boom")

    first = pgbeat.enqueue(conn, "remind", {"v": 1}, job_key="r")
    assert first is not None
    with running_worker(database_url, registry):
        wait_for(lambda: job_row(conn, first)["status"] == "running")
        pgbeat.enqueue(conn, "remind", {"v": 2}, job_key="r", on_conflict="replace")
        release.set()
        assert pgbeat.wait(conn, first, timeout=10).status == "cancelled"
        wait_for(lambda: attempts_of(conn, first), message="the attempt recorded")
    assert attempts_of(conn, first) == ["cancelled"]


# -- renewal and what a handler sees -----------------------------------------------------------


@pytest.mark.slow
def test_a_job_longer_than_its_lease_runs_once(
    database_url: str, tables: psycopg.Connection[Any]
) -> None:
    conn = tables
    ids = [pgbeat.enqueue(conn, "sleepy", {"seconds": 3}) for _ in range(3)]
    settings = {"lease": timedelta(seconds=1), "timeout": timedelta(seconds=20)}
    with running_worker(database_url, steer_registry, **settings):
        for job_id in ids:
            assert job_id is not None
            assert pgbeat.wait(conn, job_id, timeout=20).status == "done"
    row = conn.execute("SELECT count(*), count(DISTINCT job_id) FROM executions").fetchone()
    assert row == (3, 3)  # never reaped while its worker renewed it


@pytest.mark.slow
def test_a_handler_sees_its_job_fields(database_url: str, conn: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    seen: list[pgbeat.JobContext] = []

    @registry.handler("look")
    def look(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        seen.append(job)

    job_id = pgbeat.enqueue(conn, "look", {}, job_key="customer-42")
    assert job_id is not None
    with running_worker(database_url, registry):
        pgbeat.wait(conn, job_id, timeout=10)
    (job,) = seen
    assert (job.id, job.job_key, job.queue, job.priority, job.limit_key) == (
        job_id,
        "customer-42",
        "default",
        0,
        None,
    )
