"""Outcomes the database would refuse: each is made writable, or fails its own job alone.

Before, one such outcome failed the whole batch write; the worker took it for a bug and
exited, the batch's other outcomes waited for their leases to expire, and the job then
killed the next worker the same way.
"""

from __future__ import annotations

import os
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.observe.metrics import Metrics
from pgbeat.worker import operations
from pgbeat.worker.executor import Run
from pgbeat.worker.outcomes import OutcomeBuffer
from tests.helpers import in_thread, statuses, wait_for

# Refuses to mark a job done when its payload says so: an outcome write that fails for a
# reason of its own job, not the connection's (as a constraint or an extension might).
REFUSE_POISON = """
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'done' AND NEW.payload ? 'poison' THEN
        RAISE EXCEPTION 'refused by a trigger' USING ERRCODE = '22023';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_poison();
"""


# Handlers whose outcomes the database would refuse as they come, and one that is fine.
UNWRITABLE = pgbeat.Registry()
UNWRITABLE.register("ok", lambda payload: None)


@UNWRITABLE.handler("bad_name")
def bad_name(payload: dict[str, Any]) -> None:
    raise OSError(os.fsdecode(b"\xff.csv"))  # a lone surrogate: not encodable as UTF-8


@UNWRITABLE.handler("far")
def far(payload: dict[str, Any]) -> None:
    raise pgbeat.Retry(after=timedelta(days=2 * 10**8))  # beyond timestamptz's range


@pytest.mark.slow
def test_a_worker_records_unencodable_errors_and_huge_retry_delays(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    bad_id = pgbeat.enqueue(conn, "bad_name", max_attempts=1)
    far_id = pgbeat.enqueue(conn, "far")
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("ok") for _ in range(20)])
    worker = pgbeat.Worker(database_url, UNWRITABLE, pgbeat.WorkerSettings(concurrency=4))
    with in_thread(worker) as thread:
        wait_for(
            lambda: statuses(conn) == {"done": 20, "failed": 1, "pending": 1},
            timeout=15,
            message="every outcome recorded",
        )
        assert thread.is_alive(), "the worker died on an outcome it could not write"
        later = pgbeat.enqueue(conn, "ok")
        wait_for(lambda: job_status(conn, later) == "done", message="the worker still works")
    error = conn.execute("SELECT last_error FROM jobs WHERE id = %s", (bad_id,)).fetchone()
    assert error is not None and error[0].startswith("OSError: \\udcff.csv")
    row = conn.execute("SELECT run_at, status FROM jobs WHERE id = %s", (far_id,)).fetchone()
    assert row is not None and row[1] == "pending"
    assert row[0] > datetime.now(UTC) + timedelta(days=365 * 50)  # clamped, still far away
    # and the job stays claimable: its run_at is one Python can read back
    assert operations.seconds_to_next_job(conn, ["far"]) is not None


def job_status(conn: psycopg.Connection[Any], job_id: int | None) -> str:
    row = conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


def finished(conn: psycopg.Connection[Any], payloads: list[dict[str, Any]]) -> list[Run]:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", p) for p in payloads])
    jobs = operations.claim_jobs(conn, len(payloads), timedelta(minutes=5), None)
    now = time.monotonic()
    return [Run(job, None, None, now + 60, now, settled=True, finished_at=now) for job in jobs]


def buffer_with(runs: list[Run]) -> OutcomeBuffer:
    buffer = OutcomeBuffer(pgbeat.BackoffPolicy(), random.Random(1), Metrics())
    for run in runs:
        buffer.add(run)
    return buffer


def test_an_outcome_the_database_refuses_fails_its_job_alone(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(REFUSE_POISON)
    runs = finished(conn, [{"i": 1}, {"poison": True}, {"i": 2}, {"i": 3}])
    buffer = buffer_with(runs)
    with psycopg.connect(database_url, autocommit=True) as writer:
        buffer.flush(writer)
    assert buffer.waiting() == (0, None)
    assert statuses(conn) == {"done": 3, "failed": 1}
    row = conn.execute("SELECT last_error FROM jobs WHERE payload ? 'poison'").fetchone()
    assert row is not None
    assert "could not record" in row[0] and "refused by a trigger" in row[0]


def test_a_write_no_outcome_survives_is_a_bug_and_keeps_every_outcome(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    runs = finished(conn, [{"i": 1}, {"i": 2}])
    conn.execute("REVOKE UPDATE ON jobs FROM PUBLIC")
    conn.execute("CREATE ROLE pgbeat_reader_test")
    try:
        conn.execute("GRANT SELECT ON jobs TO pgbeat_reader_test")
        buffer = buffer_with(runs)
        with psycopg.connect(database_url, autocommit=True) as writer:
            writer.execute("SET ROLE pgbeat_reader_test")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                buffer.flush(writer)
        assert buffer.waiting()[0] == 2  # nothing dropped: a bug stops the worker loudly
        assert statuses(conn) == {"running": 2}
    finally:
        conn.execute("DROP OWNED BY pgbeat_reader_test")
        conn.execute("DROP ROLE pgbeat_reader_test")
