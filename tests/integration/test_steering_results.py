"""Results and ``wait`` with an in-process worker: stored return values, the 64 KiB limit,
results that are not JSON, and waits by notification, by polling and on async connections."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.errors import JobNotFound
from tests.integration.steering_support import (  # noqa: F401 (the two fixtures)
    Report,
    job_row,
    running_worker,
    tables_fixture,
    worker_fixture,
)

# -- results and wait ------------------------------------------------------------------------

# Handlers whose results are not plain JSON, for their own worker (``odd_worker``).
ODD_RESULTS = pgbeat.Registry()


@ODD_RESULTS.handler("report")
async def report(payload: dict[str, Any]) -> Report:
    return Report(rows=3, name="daily")


@ODD_RESULTS.handler("odd")
def odd(payload: dict[str, Any]) -> object:
    return {"when": object()}


@pytest.fixture
def odd_worker(database_url: str) -> Iterator[pgbeat.Worker]:
    with running_worker(database_url, ODD_RESULTS) as worker:
        yield worker


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
def test_a_pydantic_result_is_stored_as_json_and_one_not_json_fails_its_job(
    odd_worker: pgbeat.Worker, conn: psycopg.Connection[Any]
) -> None:
    report, odd = pgbeat.enqueue_many(conn, [pgbeat.NewJob("report"), pgbeat.NewJob("odd")])
    assert pgbeat.wait(conn, report, timeout=10).result == {"rows": 3, "name": "daily"}
    finished = pgbeat.wait(conn, odd, timeout=10)
    assert finished.status == "failed"
    assert finished.last_error is not None and "cannot be stored as JSON" in finished.last_error


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
