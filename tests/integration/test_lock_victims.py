"""Statements that lock a worker's running rows beside other statements locking them too.

CI run 62 met a deadlock between a worker's lease renewal and its own outcome writer:
both lock rows by ``id = ANY(...)``, each in the order its plan reads them. The renewal
now never waits for a row lock (it renews the row next round), and an outcome write the
database picks as a deadlock's victim is sent again, never taken for its jobs' fault.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.job import Job
from pgbeat.observe.metrics import Metrics
from pgbeat.worker import operations
from pgbeat.worker.executor import Run
from pgbeat.worker.outcomes import OutcomeBuffer
from tests.helpers import statuses, wait_for

LEASE = timedelta(minutes=5)


def claimed(conn: psycopg.Connection[Any], count: int) -> list[Job]:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", {"i": i}) for i in range(count)])
    jobs = operations.claim_jobs(conn, count, LEASE, None)
    assert len(jobs) == count
    return sorted(jobs, key=lambda job: job.id)


def lease_of(conn: psycopg.Connection[Any], job: Job) -> Any:
    row = conn.execute("SELECT locked_until FROM jobs WHERE id = %s", (job.id,)).fetchone()
    assert row is not None
    return row[0]


def test_a_renewal_skips_a_row_another_statement_holds_and_keeps_its_run(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    first, second = claimed(conn, 2)
    before = lease_of(conn, first), lease_of(conn, second)
    with (
        psycopg.connect(database_url) as holder,
        # A renewal that waited for the lock would fail here (LockNotAvailable), whatever
        # the machine's load: lock_timeout counts only the wait for a lock.
        psycopg.connect(database_url, autocommit=True, options="-c lock_timeout=1s") as renewer,
    ):
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (first.id,))
        answer = operations.renew_leases(renewer, [first, second], LEASE)
        assert answer == {
            first.id: operations.Renewal(stop=False, renewed=False),
            second.id: operations.Renewal(stop=False, renewed=True),
        }
        assert lease_of(conn, first) == before[0]
        assert lease_of(conn, second) > before[1]
        holder.rollback()
        again = operations.renew_leases(renewer, [first, second], LEASE)
    assert all(renewal.renewed for renewal in again.values()) and len(again) == 2
    assert lease_of(conn, first) > before[0]


def test_a_renewal_says_a_held_row_was_asked_to_stop(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    (job,) = claimed(conn, 1)
    conn.execute("UPDATE jobs SET cancel_requested_at = now() WHERE id = %s", (job.id,))
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job.id,))
        answer = operations.renew_leases(conn, [job], LEASE)
    assert answer == {job.id: operations.Renewal(stop=True, renewed=False)}


def test_a_renewal_leaves_out_a_run_that_lost_its_job(conn: psycopg.Connection[Any]) -> None:
    first, second = claimed(conn, 2)
    conn.execute("UPDATE jobs SET attempts = attempts + 1 WHERE id = %s", (first.id,))
    assert operations.renew_leases(conn, [first, second], LEASE) == {
        second.id: operations.Renewal(stop=False, renewed=True)
    }


@pytest.mark.slow  # races for a few seconds
def test_renewals_never_deadlock_with_a_statement_locking_rows_in_the_other_order(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """An adversary locks the rows in descending id order while renewals lock them as
    their plans read them (ascending here): a renewal that waited would close a cycle."""
    jobs = claimed(conn, 300)
    ids = [job.id for job in jobs]
    stop = threading.Event()
    errors: list[BaseException] = []
    rounds = {"renewals": 0, "adversary": 0}

    def adversary() -> None:
        with psycopg.connect(database_url) as other:
            while not stop.is_set():
                try:
                    other.execute(
                        "SELECT id FROM jobs WHERE id = ANY(%s) ORDER BY id DESC FOR UPDATE",
                        (ids,),
                    ).fetchall()
                    other.commit()
                    rounds["adversary"] += 1
                except psycopg.Error as exc:
                    errors.append(exc)
                    other.rollback()

    thread = threading.Thread(target=adversary, daemon=True)
    thread.start()
    try:
        with psycopg.connect(database_url, autocommit=True) as renewer:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                try:
                    held = operations.renew_leases(renewer, jobs, LEASE)
                except psycopg.Error as exc:
                    errors.append(exc)
                    continue
                assert set(held) == set(ids), "a held run was left out"
                rounds["renewals"] += 1
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors[:3]
    assert rounds["renewals"] > 10 and rounds["adversary"] > 10, rounds


def test_an_outcome_write_picked_as_a_deadlock_victim_is_sent_again(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pgbeat.worker")
    first, second = claimed(conn, 2)
    now = time.monotonic()
    buffer = OutcomeBuffer(pgbeat.BackoffPolicy(), random.Random(1), Metrics())
    for job in (first, second):
        buffer.add(Run(job, None, None, now + 60, now, settled=True, finished_at=now))
    flushed: list[Any] = []
    with psycopg.connect(database_url) as other:
        # The other side waits longer before it looks for a deadlock, so the outcome
        # write is the one that finds it and is rolled back.
        other.execute("SET deadlock_timeout = '20s'")
        other.execute("UPDATE jobs SET priority = priority WHERE id = %s", (second.id,))
        with psycopg.connect(database_url, autocommit=True) as writer:
            writer_pid = writer.info.backend_pid
            thread = threading.Thread(target=lambda: flushed.append(buffer.flush(writer)))
            thread.start()
            wait_for(
                lambda: (
                    conn.execute(
                        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                        (writer_pid,),
                    ).fetchone()
                    == (True,)
                ),
                message="the outcome write waits for the other's row",
            )
            # Closes the cycle: the write holds the first row and waits for the second.
            other.execute("UPDATE jobs SET priority = priority WHERE id = %s", (first.id,))
            other.commit()
            thread.join(30)
            assert not thread.is_alive()
    assert len(flushed) == 1 and buffer.waiting() == (0, None)
    assert statuses(conn) == {"done": 2}
    assert "outcomes met DeadlockDetected; sending them again" in caplog.messages
