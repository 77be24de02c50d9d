"""When a worker looks at a limited queue again (Claimer.seconds_to_next): known from the
claim where the limits held jobs back, looked up in the database only for a queue that ran
out of due jobs, and then once until jobs arrive. (Asking the database after every short
claim cost 17 ms a claim at 20,000 pending jobs and held an unlimited queue beside a
rate-limited one to a sixth of its speed.)"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.job import Job
from pgbeat.worker import claiming, limited_claims, rests
from pgbeat.worker.claiming import Claimer
from pgbeat.worker.outcomes import OutcomeBuffer, Written
from pgbeat.worker.rests import LIMITED_RECHECK
from pgbeat.worker.worker import Worker
from tests.helpers import running_worker, statuses, wait_for

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
    # a completion frees a slot: asked again within LIMITED_RECHECK of the claim (a loaded
    # machine may take longer than that between the claim and this question: then <= 0)
    assert wait is not None and wait <= LIMITED_RECHECK, wait


def test_saturated_keys_are_asked_again_soon(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", key_concurrency=1)
    _enqueue(conn, 3, queue="api", limit_key="customer:1")
    claimer = Claimer(LEASE)
    assert len(claimer.claim(conn, 10)) == 1
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and wait <= LIMITED_RECHECK, wait  # as above


def _finish(conn: psycopg.Connection[Any], queue: str) -> None:
    """The queue's running jobs done, as a worker's outcome writer would."""
    conn.execute(
        "UPDATE jobs SET status = 'done', finished_at = now(), locked_until = NULL"
        " WHERE status = 'running' AND queue = %s",
        (queue,),
    )


def test_a_full_queue_rests_until_a_job_of_it_leaves_running_or_jobs_arrive(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its slots full, a queue is not asked again at once; the worker's own written outcome
    of one of its jobs (slots_freed), or a notification of jobs, ends the rest at once, so
    a fair queue's new key does not wait out LIMITED_RECHECK (made an hour here)."""
    monkeypatch.setattr(claiming, "LIMITED_RECHECK", 3600.0)
    monkeypatch.setattr(limited_claims, "LIMITED_RECHECK", 3600.0)
    monkeypatch.setattr(rests, "LIMITED_RECHECK", 3600.0)
    pgbeat.configure_queue(conn, "api", concurrency=1, fair=True)
    _enqueue(conn, 4, queue="api", limit_key="A")
    claimer = Claimer(LEASE)
    assert claimer.watched == frozenset() and len(claimer.claim(conn, 10)) == 1
    assert claimer.watched == {"api"}  # the worker reports its written outcomes of these
    assert claimer.claim(conn, 10) == []  # full: rests
    _finish(conn, "api")
    assert claimer.claim(conn, 10) == []  # still resting: nothing said a slot is free
    claimer.slots_freed({"default": 0.0})
    assert claimer.claim(conn, 10) == []  # another queue's outcome frees nothing here
    claimer.slots_freed({"api": 0.0})
    assert len(claimer.claim(conn, 10)) == 1
    assert claimer.claim(conn, 10) == []
    _finish(conn, "api")
    claimer.jobs_arrived()  # a notification: maybe another worker's slot is free too
    assert len(claimer.claim(conn, 10)) == 1


def test_a_spent_rate_rest_is_not_ended_by_a_freed_slot(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", rate="1/1h")
    _enqueue(conn, 3, queue="api")
    claimer = Claimer(LEASE)
    assert len(claimer.claim(conn, 10)) == 1
    assert claimer.claim(conn, 10) == []  # the rate is spent: rests for the window
    claimer.slots_freed({"api": 0.0})
    claimer.jobs_arrived()
    wait = claimer.seconds_to_next(conn, fast=False)
    assert wait is not None and wait > 3000, wait  # only time frees a rate


@pytest.mark.slow  # a real worker
def test_a_worker_claims_a_full_queue_again_when_its_own_job_finishes(
    database_url: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the recheck made an hour, a queue of concurrency 1 drains only because each
    written outcome of its jobs wakes the worker's next claim."""
    monkeypatch.setattr(claiming, "LIMITED_RECHECK", 3600.0)
    monkeypatch.setattr(limited_claims, "LIMITED_RECHECK", 3600.0)
    monkeypatch.setattr(rests, "LIMITED_RECHECK", 3600.0)
    pgbeat.configure_queue(conn, "api", concurrency=1)
    _enqueue(conn, 20, queue="api")
    registry = pgbeat.Registry()
    registry.handler("noop")(lambda payload: None)
    with running_worker(database_url, registry, concurrency=5):
        wait_for(lambda: statuses(conn).get("done") == 20, timeout=30)


@pytest.mark.slow  # a real worker
def test_the_first_claims_outcomes_wake_the_next_claim_even_before_the_loop_looks_again(
    database_url: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker learns of its limited queues at its first claim; the outcomes of that
    claim's jobs, written before the loop's next step, must still wake the claim of the
    queue's next job (CI run of 2026-12-07 19:59: the first outcome named no queue, and a
    queue of concurrency 1 waited for its recheck). No notification or poll helps here."""
    monkeypatch.setattr(claiming, "LIMITED_RECHECK", 3600.0)
    monkeypatch.setattr(limited_claims, "LIMITED_RECHECK", 3600.0)
    monkeypatch.setattr(rests, "LIMITED_RECHECK", 3600.0)
    written = threading.Event()
    flush, start = OutcomeBuffer.flush, Worker._start

    def flush_and_tell(self: OutcomeBuffer, c: psycopg.Connection[Any]) -> Written:
        done = flush(self, c)
        written.set()
        return done

    def start_and_hold(self: Worker, jobs: list[Job], claim_sent: float, traces: Any) -> None:
        start(self, jobs, claim_sent, traces)
        if jobs and not written.is_set():  # the first claim's: the loop stays in its step
            written.wait(5)  # until their outcomes are written

    monkeypatch.setattr(OutcomeBuffer, "flush", flush_and_tell)
    monkeypatch.setattr(Worker, "_start", start_and_hold)
    pgbeat.configure_queue(conn, "api", concurrency=1)
    _enqueue(conn, 3, queue="api")
    registry = pgbeat.Registry()
    registry.handler("noop")(lambda payload: None)
    quiet = {"poll_interval": timedelta(seconds=60), "listen": False}
    with running_worker(database_url, registry, concurrency=5, **quiet):
        wait_for(lambda: statuses(conn).get("done") == 3, timeout=10)
    assert written.is_set()
