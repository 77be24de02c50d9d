"""When a worker looks at a limited queue again (Claimer.seconds_to_next): known from the
claim where the limits held jobs back, looked up in the database only for a queue that ran
out of due jobs, and then once until jobs arrive. (Asking the database after every short
claim cost 17 ms a claim at 20,000 pending jobs and held an unlimited queue beside a
rate-limited one to a sixth of its speed.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

import pgbeat
from pgbeat.worker.claiming import LIMITED_RECHECK, Claimer

LEASE = timedelta(minutes=5)


def _enqueue(conn: psycopg.Connection[Any], count: int, **fields: Any) -> None:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", **fields) for _ in range(count)])


def test_a_queue_out_of_due_jobs_is_looked_at_when_its_next_job_falls_due(
    conn: psycopg.Connection[Any],
) -> None:
    """And the next due job is looked up once, until jobs arrive."""
    pgbeat.configure_queue(conn, "api", concurrency=5)
    pgbeat.enqueue(conn, "noop", {}, queue="api", delay=timedelta(seconds=30))
    claimer = Claimer(LEASE)
    assert claimer.claim(conn, 10) == []
    assert claimer.limited_short
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and 20 < wait <= 30, wait
    conn.execute("DELETE FROM jobs")  # unannounced: the worker keeps what it looked up
    assert claimer.claim(conn, 10) == []
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and 20 < wait <= 30, wait
    claimer.jobs_arrived()  # a NOTIFY: look again
    assert claimer.claim(conn, 10) == []
    assert claimer.seconds_to_next(conn, fast=False) is None


def test_a_spent_rate_is_waited_out(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", rate="2/10s")
    _enqueue(conn, 5, queue="api")
    claimer = Claimer(LEASE)
    assert len(claimer.claim(conn, 10)) == 2
    assert claimer.claim(conn, 10) == []  # the window's two starts are spent
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and 5 < wait <= 10, wait


def test_a_queue_at_its_concurrency_is_asked_again_soon(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", concurrency=1)
    _enqueue(conn, 3, queue="api")
    claimer = Claimer(LEASE)
    assert len(claimer.claim(conn, 10)) == 1
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and 0 < wait <= LIMITED_RECHECK, wait  # a completion frees a slot


def test_saturated_keys_are_asked_again_soon(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", key_concurrency=1)
    _enqueue(conn, 3, queue="api", limit_key="customer:1")
    claimer = Claimer(LEASE)
    assert len(claimer.claim(conn, 10)) == 1
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and 0 < wait <= LIMITED_RECHECK, wait
