"""Steering jobs with an in-process worker: results, the 64 KiB limit, snooze, cancel of a
running job (by id and by key), ``wait``, renewed leases, and what handlers see."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pydantic
import pytest

import pgbeat
from pgbeat.errors import JobNotFound
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.worker import operations
from tests.apps.steer_app import SETUP
from tests.apps.steer_app import registry as steer_registry
from tests.helpers import wait_for
from tests.integration.test_schedule_state import SECOND, whole_second_after

FAST = pgbeat.BackoffPolicy(base=timedelta(milliseconds=10), cap=timedelta(milliseconds=50))


class Report(pydantic.BaseModel):
    rows: int
    name: str


@pytest.fixture
def tables(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute(SETUP.encode())
    return conn


@pytest.fixture
def worker(database_url: str, tables: psycopg.Connection[Any]) -> Iterator[pgbeat.Worker]:
    yield from _running(database_url, steer_registry)


def _running(url: str, registry: pgbeat.Registry, **settings: Any) -> Iterator[pgbeat.Worker]:
    settings.setdefault("backoff", FAST)
    settings.setdefault("poll_interval", timedelta(milliseconds=200))
    settings.setdefault("heartbeat", False)
    worker = pgbeat.Worker(url, registry, pgbeat.WorkerSettings(**settings))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield worker
    worker.stop()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the worker did not stop"


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        row = cursor.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def attempts_of(conn: psycopg.Connection[Any], job_id: int) -> list[str]:
    rows = conn.execute(
        "SELECT outcome FROM pgbeat_job_attempts WHERE job_id = %s ORDER BY finished_at",
        (job_id,),
    ).fetchall()
    return [r[0] for r in rows]


def started(conn: psycopg.Connection[Any], job_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM executions WHERE job_id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])


# -- results and wait ------------------------------------------------------------------------


@pytest.mark.slow
def test_return_values_are_stored_and_wait_returns_them(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any]
) -> None:
    values = [{"n": 1, "text": 'é"\\'}, [1, 2], "plain", 3.5, True, None]
    ids = [pgbeat.enqueue(conn, "result", {"value": v}) for v in values]
    for job_id, value in zip(ids, values, strict=True):
        assert job_id is not None
        finished = pgbeat.wait(conn, job_id, timeout=10)
        assert (finished.status, finished.result, finished.last_error) == ("done", value, None)
        assert job_row(conn, job_id)["result"] == value


@pytest.mark.slow
def test_a_pydantic_result_is_stored_as_json(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    registry = pgbeat.Registry()

    @registry.handler("report")
    async def report(payload: dict[str, Any]) -> Report:
        return Report(rows=3, name="daily")

    job_id = pgbeat.enqueue(conn, "report")
    assert job_id is not None
    for _ in _running(database_url, registry):
        assert pgbeat.wait(conn, job_id, timeout=10).result == {"rows": 3, "name": "daily"}


@pytest.mark.slow
def test_a_result_over_64_kib_fails_the_job_and_the_worker_lives(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any]
) -> None:
    too_big = pgbeat.enqueue(conn, "result", {"size": 64 * 1024})  # plus the JSON around it
    fits = pgbeat.enqueue(conn, "result", {"size": 64 * 1024 - 20})
    assert too_big is not None and fits is not None
    failed = pgbeat.wait(conn, too_big, timeout=10)
    assert failed.status == "failed" and failed.result is None
    assert failed.last_error is not None
    assert "more than the 64 KiB a result may take" in failed.last_error
    assert job_row(conn, too_big)["attempts"] == 1  # no retry: it would fail the same way
    assert pgbeat.wait(conn, fits, timeout=10).status == "done"


@pytest.mark.slow
def test_a_result_that_is_not_json_fails_the_job(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    registry = pgbeat.Registry()

    @registry.handler("odd")
    def odd(payload: dict[str, Any]) -> object:
        return {"when": object()}

    job_id = pgbeat.enqueue(conn, "odd")
    assert job_id is not None
    for _ in _running(database_url, registry):
        finished = pgbeat.wait(conn, job_id, timeout=10)
    assert finished.status == "failed"
    assert finished.last_error is not None and "cannot be stored as JSON" in finished.last_error


def test_wait_times_out_and_checks_its_arguments(conn: psycopg.Connection[Any]) -> None:
    job_id = pgbeat.enqueue(conn, "result", {})
    assert job_id is not None
    started_at = time.monotonic()
    with pytest.raises(TimeoutError, match=f"job {job_id} did not finish within 0.2s"):
        pgbeat.wait(conn, job_id, timeout=timedelta(milliseconds=200))
    assert time.monotonic() - started_at < 2
    with pytest.raises(JobNotFound):
        pgbeat.wait(conn, 10**12, timeout=1)
    with pytest.raises(TypeError, match="job_id"):
        pgbeat.wait(conn, "1", timeout=1)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="timeout"):
        pgbeat.wait(conn, job_id, timeout=-1)


@pytest.mark.slow
def test_wait_is_woken_by_notify(worker: pgbeat.Worker, conn: psycopg.Connection[Any]) -> None:
    """The waiter wakes within milliseconds of the completion's commit, not at a poll."""
    lags = []
    for _ in range(15):
        job_id = pgbeat.enqueue(conn, "result", {"value": 1})
        assert job_id is not None
        pgbeat.wait(conn, job_id, timeout=10)
        row = conn.execute(
            "SELECT extract(epoch FROM clock_timestamp() - finished_at) FROM jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
        assert row is not None
        lags.append(float(row[0]))
    assert statistics.median(lags) < 0.1, lags


@pytest.mark.slow
def test_wait_on_an_async_connection(worker: pgbeat.Worker, database_url: str) -> None:
    async def main() -> tuple[pgbeat.JobResult, pgbeat.JobResult]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            job_id = await pgbeat.enqueue_async(aconn, "result", {"value": {"a": 1}})
            assert job_id is not None
            first = await pgbeat.wait_async(aconn, job_id, timeout=10)
            second = await pgbeat.wait(aconn, job_id, timeout=10)
            return first, second

    first, second = asyncio.run(main())
    assert first == second and first.result == {"a": 1} and first.status == "done"


@pytest.mark.slow
def test_wait_inside_a_transaction_polls(worker: pgbeat.Worker, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:  # not autocommit: no LISTEN possible
        job_id = pgbeat.enqueue(conn, "result", {"value": 7})
        conn.commit()
        assert job_id is not None
        assert pgbeat.wait(conn, job_id, timeout=10).result == 7


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
    assert row["max_attempts"] - row["attempts"] == 3 - 1  # the attempts left: as at the start
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
    worker: pgbeat.Worker, database_url: str, conn: psycopg.Connection[Any]
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
    scheduler = Scheduler(database_url, None, heartbeat=False)
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
    for _ in _running(database_url, registry):
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
    for _ in _running(database_url, steer_registry, **settings):
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
    for _ in _running(database_url, registry):
        pgbeat.wait(conn, job_id, timeout=10)
    (job,) = seen
    assert (job.id, job.job_key, job.queue, job.priority, job.limit_key) == (
        job_id,
        "customer-42",
        "default",
        0,
        None,
    )


@pytest.mark.slow
def test_wait_behind_a_pooler_polls(
    worker: pgbeat.Worker, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = pgbeat.enqueue(conn, "result", {"value": "polled"})
    assert job_id is not None
    monkeypatch.setenv("PGBEAT_POOLER", "transaction")  # no LISTEN on the caller's connection
    assert pgbeat.wait(conn, job_id, timeout=10).result == "polled"
    listening = conn.execute("SELECT count(*) FROM pg_listening_channels()").fetchone()
    assert listening == (0,)
