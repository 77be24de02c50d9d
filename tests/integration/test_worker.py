"""The worker against a real database, in-process: claims, outcomes, retries, timeouts, reaper."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pydantic
import pytest

import pgbeat
from pgbeat.jobs import actions
from pgbeat.worker import operations
from tests.helpers import running_worker as running
from tests.helpers import statuses, until_cancelled, wait_for


class Welcome(pydantic.BaseModel):
    user_id: int


class Model(pydantic.BaseModel):
    user_id: int


def job_row(conn: psycopg.Connection[Any], job_id: int | None) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT status, attempts, last_error, locked_until FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return tuple(row)


def database_time(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def status_is(conn: psycopg.Connection[Any], job_id: int | None, status: str) -> bool:
    return bool(job_row(conn, job_id)[0] == status)


@pytest.fixture
def registry() -> pgbeat.Registry:
    return pgbeat.Registry()


def test_two_connections_claim_disjoint_jobs(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", {"i": i}) for i in range(10)])
    with psycopg.connect(database_url) as a, psycopg.connect(database_url) as b:
        claimed_a = operations.claim_jobs(
            a, 6, timedelta(seconds=30), None
        )  # a's transaction stays open
        claimed_b = operations.claim_jobs(b, 6, timedelta(seconds=30), None)
        a.commit()
        b.commit()
    ids_a, ids_b = {j.id for j in claimed_a}, {j.id for j in claimed_b}
    assert len(ids_a) == 6 and len(ids_b) == 4
    assert ids_a.isdisjoint(ids_b)
    assert statuses(conn) == {"running": 10}


def test_claim_respects_run_at_and_kinds(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue(conn, "later", {}, delay=timedelta(hours=1))
    wanted = pgbeat.enqueue(conn, "wanted", {})
    pgbeat.enqueue(conn, "other", {})
    claimed = operations.claim_jobs(conn, 10, timedelta(seconds=30), ["wanted", "later"])
    assert [j.id for j in claimed] == [wanted]
    assert claimed[0].attempt == 1


def test_runs_sync_and_async_handlers_with_context(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    seen: dict[str, Any] = {}

    @registry.handler("sync")
    def sync(payload: Welcome, job: pgbeat.JobContext) -> None:
        seen["sync"] = (payload, job.id, job.kind, job.attempt, job.max_attempts, job.unique_key)

    @registry.handler("async")
    async def run_async(payload: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        seen["async"] = payload

    sync_id = pgbeat.enqueue(conn, "sync", {"user_id": "5"}, unique_key="u5", max_attempts=4)
    async_id = pgbeat.enqueue(conn, "async", {"a": 1})
    with running(database_url, registry):
        wait_for(lambda: statuses(conn) == {"done": 2}, message="both jobs done")
    assert seen["sync"] == (Welcome(user_id=5), sync_id, "sync", 1, 4, "u5")
    assert seen["async"] == {"a": 1}
    assert job_row(conn, async_id)[3] is None  # the lease is cleared


def test_retries_end_in_failed_with_all_attempts_spent(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    calls: list[int] = []

    @registry.handler("flaky")
    def flaky(payload: Any, job: pgbeat.JobContext) -> None:
        calls.append(job.attempt)
        raise ConnectionError(f"provider 503 on attempt {job.attempt}")

    job_id = pgbeat.enqueue(conn, "flaky", {}, max_attempts=4)
    with running(database_url, registry):
        wait_for(lambda: status_is(conn, job_id, "failed"), message="job failed")
    status, attempts, last_error, locked_until = job_row(conn, job_id)
    assert (status, attempts, locked_until) == ("failed", 4, None)
    assert last_error.startswith("ConnectionError: provider 503 on attempt 4")
    assert calls == [1, 2, 3, 4]


@pytest.mark.slow
def test_an_error_with_a_nul_character_is_recorded(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    """PostgreSQL text cannot hold NUL: writing such an error once stopped the worker."""

    @registry.handler("binary")
    def binary(payload: Any) -> None:
        raise ValueError("bad byte \x00 in input")

    registry.register("fine", lambda payload: None)
    bad = pgbeat.enqueue(conn, "binary", {}, max_attempts=2)
    with running(database_url, registry):
        wait_for(lambda: status_is(conn, bad, "failed"), message="job failed")
        fine = pgbeat.enqueue(conn, "fine", {})
        wait_for(lambda: status_is(conn, fine, "done"), message="the worker still runs jobs")
    assert job_row(conn, bad)[2].startswith("ValueError: bad byte \\x00 in input")


class Unprintable(Exception):
    """An exception whose own ``__str__`` raises, as a buggy library's may."""

    def __str__(self) -> str:
        raise RuntimeError("no message for you")


def test_an_error_whose_str_raises_fails_its_job_and_the_worker_goes_on(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    """Formatting such an error once stopped the worker and stranded its batch running."""

    @registry.handler("unprintable")
    def unprintable(payload: Any) -> None:
        raise Unprintable

    registry.register("fine", lambda payload: None)
    bad = pgbeat.enqueue(conn, "unprintable", {}, max_attempts=2)
    with running(database_url, registry):
        wait_for(lambda: status_is(conn, bad, "failed"), message="job failed")
        fine = pgbeat.enqueue(conn, "fine", {})
        wait_for(lambda: status_is(conn, fine, "done"), message="the worker still runs jobs")
    status, attempts, last_error, _ = job_row(conn, bad)
    assert (status, attempts) == ("failed", 2)
    assert last_error.startswith("Unprintable: <str() of this exception raised RuntimeError>")


def test_success_after_retries_is_done(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    @registry.handler("eventually")
    def eventually(payload: Any, job: pgbeat.JobContext) -> None:
        if job.attempt < 3:
            raise RuntimeError("not yet")

    job_id = pgbeat.enqueue(conn, "eventually", {})
    with running(database_url, registry):
        wait_for(lambda: status_is(conn, job_id, "done"), message="job done")
    assert job_row(conn, job_id)[1] == 3


@pytest.mark.slow
def test_a_retry_runs_when_due_not_at_the_next_poll(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    """Retries are written on the outcome connection; the claiming loop must hear of them."""

    @registry.handler("twice")
    def twice(payload: Any, job: pgbeat.JobContext) -> None:
        if job.attempt == 1:
            raise pgbeat.Retry(after=timedelta(milliseconds=100))

    with running(database_url, registry, poll_interval=timedelta(seconds=30)):
        job_id = pgbeat.enqueue(conn, "twice", {})
        # a deadline well inside the 30 s poll: only the retry's wake-up can meet it
        wait_for(lambda: status_is(conn, job_id, "done"), timeout=10, message="retry done")
    assert job_row(conn, job_id)[1] == 2


@pytest.mark.slow
@pytest.mark.parametrize("action", ["retry", "run_now", "reap"])
def test_jobs_put_back_by_an_update_wake_an_idle_worker(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry, action: str
) -> None:
    """An operator's retry or run-now, and a reap of a dead worker's lease, are UPDATEs (no
    insert trigger): they announce the jobs themselves, or idle workers (and a limited queue
    resting dry) would wait for their poll."""
    ran: list[int] = []
    registry.register("back", lambda payload: ran.append(1))
    if action == "retry":
        job_id = pgbeat.enqueue(conn, "back", {})
        conn.execute(
            "UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = %s", (job_id,)
        )
    elif action == "run_now":
        job_id = pgbeat.enqueue(conn, "back", {}, delay=timedelta(hours=1))
    else:  # the job of a worker that died: running, its lease expiring
        job_id = pgbeat.enqueue(conn, "back", {})
        conn.execute(
            "UPDATE jobs SET status = 'running', attempts = 1, started_at = now(),"
            " locked_until = now() + interval '1 second' WHERE id = %s",
            (job_id,),
        )
    with running(database_url, registry, poll_interval=timedelta(seconds=30)) as worker:
        assert worker._listener is not None and worker._listener.connected.wait(10)
        wait_for(lambda: worker._claimer.limited is not None, message="a first claim")
        if action == "reap":  # another worker's reaper (this one's reaps every 7.5 s)
            wait_for(lambda: operations.reap_expired(conn), timeout=10, message="lease expired")
        else:
            getattr(actions, action)(conn, [job_id])
        # a deadline well inside the 30 s poll: only the announcement can meet it
        wait_for(lambda: status_is(conn, job_id, "done"), timeout=10, message="job run")
    assert ran == [1]


@pytest.mark.slow
def test_backoff_schedules_the_retry_by_the_database_clock(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    registry.register("fails", lambda payload: 1 / 0)
    job_id = pgbeat.enqueue(conn, "fails", {})
    policy = pgbeat.BackoffPolicy(base=timedelta(minutes=10), cap=timedelta(hours=1), jitter=0.5)
    before = database_time(conn)
    with running(database_url, registry, backoff=policy):
        wait_for(
            lambda: job_row(conn, job_id)[1] == 1 and status_is(conn, job_id, "pending"),
            message="first retry scheduled",
        )
    after = database_time(conn)
    row = conn.execute("SELECT run_at FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    # The retry was written at a database time between `before` and `after`, with a delay
    # of 10 minutes less up to 50 % jitter: 5 to 10 minutes.
    assert before + timedelta(minutes=5) <= row[0] <= after + timedelta(minutes=10)


@pytest.mark.parametrize("kind", ["permanent", "typed", "unknown_kind"])
@pytest.mark.slow
def test_permanent_failures_use_one_attempt(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry, kind: str
) -> None:
    @registry.handler("permanent")
    def permanent(payload: Any) -> None:
        raise pgbeat.PermanentError("the account was deleted")

    @registry.handler("typed")
    def typed(payload: Model) -> None: ...

    job_id = pgbeat.enqueue(conn, kind, {"user_id": "not a number"})
    # A worker claims only its registry's kinds unless --kinds names others.
    kinds = {"kinds": (kind,)} if kind == "unknown_kind" else {}
    with running(database_url, registry, **kinds):
        wait_for(lambda: status_is(conn, job_id, "failed"), message="job failed")
    _, attempts, last_error, _ = job_row(conn, job_id)
    assert attempts == 1
    expected = {
        "permanent": "PermanentError: the account was deleted",
        "typed": "PayloadError: payload does not match Model: user_id",
        "unknown_kind": "UnknownKind: no handler registered for kind 'unknown_kind'",
    }[kind]
    assert last_error.startswith(expected)


@pytest.mark.slow
def test_retry_exception_chooses_the_time(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    at = datetime(2031, 1, 1, tzinfo=UTC)

    @registry.handler("snooze")
    def snooze(payload: Any) -> None:
        raise pgbeat.Retry(after=at, reason="rate limited until 2031")

    job_id = pgbeat.enqueue(conn, "snooze", {})
    with running(database_url, registry):
        wait_for(
            lambda: job_row(conn, job_id)[1] == 1 and status_is(conn, job_id, "pending"),
            message="retry scheduled",
        )
    row = conn.execute("SELECT run_at, last_error FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (at, "Retry: rate limited until 2031")


@pytest.mark.slow
def test_sync_timeout_counts_as_a_failed_attempt(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    cancelled_seen = threading.Event()

    @registry.handler("slow")
    def slow(payload: Any, job: pgbeat.JobContext) -> None:
        if job.cancelled.wait(5):
            cancelled_seen.set()

    job_id = pgbeat.enqueue(conn, "slow", {}, max_attempts=1)
    with running(
        database_url, registry, timeout=timedelta(milliseconds=300), lease=timedelta(seconds=5)
    ):
        wait_for(lambda: status_is(conn, job_id, "failed"), message="timed out job failed")
        assert cancelled_seen.wait(5), "the handler's cancelled event was not set"
    assert job_row(conn, job_id)[2] == "TimedOut: timed out after 0.3s"


@pytest.mark.slow
def test_async_timeout_cancels_the_handler(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    was_cancelled = threading.Event()
    registry.register("slow_async", until_cancelled(was_cancelled, 30))

    job_id = pgbeat.enqueue(conn, "slow_async", {}, max_attempts=2)
    with running(
        database_url, registry, timeout=timedelta(milliseconds=200), lease=timedelta(seconds=5)
    ) as worker:
        wait_for(lambda: status_is(conn, job_id, "failed"), message="job failed after 2 timeouts")
        assert was_cancelled.wait(5)
        wait_for(lambda: worker._executor.busy() == 0, message="slots freed")
    assert job_row(conn, job_id)[1] == 2


@pytest.mark.slow
def test_never_runs_more_than_concurrency_jobs(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    lock = threading.Lock()
    active = [0]
    peak = [0]

    @registry.handler("busy")
    def busy(payload: Any) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1

    pgbeat.enqueue_many(conn, [pgbeat.NewJob("busy") for _ in range(60)])
    with running(database_url, registry, concurrency=3):
        wait_for(lambda: statuses(conn) == {"done": 60}, timeout=20, message="all done")
    assert peak[0] == 3


@pytest.mark.slow
def test_kinds_filter(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    registry.register("a", lambda p: None)
    registry.register("b", lambda p: None)
    a_id = pgbeat.enqueue(conn, "a", {})
    b_id = pgbeat.enqueue(conn, "b", {})
    with running(database_url, registry, kinds=("a",)):
        wait_for(lambda: status_is(conn, a_id, "done"), message="a done")
        # A claim after b was due: b, older, would have come first without the filter.
        later_a = pgbeat.enqueue(conn, "a", {})
        wait_for(lambda: status_is(conn, later_a, "done"), message="the later a done")
    assert status_is(conn, b_id, "pending")


@pytest.mark.slow
def test_delayed_job_runs_when_due(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    due_when_run: list[bool] = []

    @registry.handler("later")
    def later(payload: Any, job: pgbeat.JobContext) -> None:
        with job.connection() as own:  # by the database clock, the one that decides
            row = own.execute("SELECT now() >= run_at FROM jobs WHERE id = %s", (job.id,))
            due_when_run.append(bool(row.fetchone()[0]))  # type: ignore[index]

    with running(database_url, registry, poll_interval=timedelta(seconds=30)) as worker:
        assert worker._listener is not None and worker._listener.connected.wait(10)
        pgbeat.enqueue(conn, "later", {}, delay=timedelta(milliseconds=700))
        # a deadline well inside the 30 s poll: the worker woke when the job fell due
        wait_for(lambda: due_when_run, timeout=10, message="delayed job ran")
    assert due_when_run == [True]  # not before its run_at


def test_reaper_returns_expired_leases(conn: psycopg.Connection[Any]) -> None:
    pending_id = pgbeat.enqueue(conn, "k", {})
    spent_id = pgbeat.enqueue(conn, "k", {}, max_attempts=1)
    claimed = operations.claim_jobs(conn, 10, timedelta(milliseconds=1), None)
    assert {j.id for j in claimed} == {pending_id, spent_id}
    wait_for(
        lambda: (
            conn.execute("SELECT bool_and(locked_until < now()) FROM jobs").fetchone() == (True,)
        ),
        message="leases expired",
    )
    reaped = {job_id: status for job_id, _, status in operations.reap_expired(conn)}
    assert reaped == {pending_id: "pending", spent_id: "failed"}
    assert job_row(conn, spent_id)[2].startswith("lease expired during attempt 1")
    assert operations.reap_expired(conn) == []


def test_stale_completion_is_fenced_by_the_attempt(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue(conn, "k", {})
    (first,) = operations.claim_jobs(conn, 1, timedelta(milliseconds=1), None)
    wait_for(lambda: operations.reap_expired(conn), message="reaped")
    (second,) = operations.claim_jobs(conn, 1, timedelta(seconds=30), None)
    assert second.attempt == 2
    operations.complete_jobs(conn, [first])  # the first run finishes late: must not touch the row
    assert job_row(conn, first.id)[0] == "running"
    operations.complete_jobs(conn, [second])
    assert job_row(conn, first.id)[0] == "done"


def test_graceful_stop_releases_unfinished_jobs(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry
) -> None:
    started = threading.Event()

    @registry.handler("long")
    def long(payload: Any, job: pgbeat.JobContext) -> None:
        started.set()
        job.cancelled.wait(10)

    job_id = pgbeat.enqueue(conn, "long", {})
    runner = running(database_url, registry, grace=timedelta(milliseconds=200))
    with runner:
        assert started.wait(10)
    status, attempts, _, locked_until = job_row(conn, job_id)
    assert (status, attempts, locked_until) == ("pending", 0, None)


@pytest.mark.slow
def test_idle_pickup_latency(
    database_url: str,
    conn: psycopg.Connection[Any],
    registry: pgbeat.Registry,
    record_property: Any,
) -> None:
    started = threading.Event()
    stamp = [0.0]

    def mark(payload: Any) -> None:
        stamp[0] = time.perf_counter()
        started.set()

    registry.register("ping", mark)
    latencies = []
    with running(database_url, registry, poll_interval=timedelta(seconds=30)) as worker:
        assert worker._listener is not None
        assert worker._listener.connected.wait(10)
        for n in range(30):
            started.clear()
            sent = time.perf_counter()
            pgbeat.enqueue(conn, "ping", {})
            # a deadline far inside the 30 s poll: only the notification can meet it
            assert started.wait(5), "job not picked up"
            latencies.append((stamp[0] - sent) * 1000)

            # idle again before the next one: the job written done, the slot free
            def written_done(done: int = n + 1) -> bool:
                return statuses(conn) == {"done": done}

            wait_for(written_done, message="ping done")
            wait_for(lambda: worker._executor.busy() == 0, message="worker idle")
    median = statistics.median(latencies)
    record_property("pickup_latency_median_ms", round(median, 2))
    print(f"idle pickup latency: median {median:.2f} ms, max {max(latencies):.2f} ms")


@pytest.fixture
def many_jobs(conn: psycopg.Connection[Any]) -> Iterator[int]:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(2000)])
    yield 2000


@pytest.mark.slow
def test_drains_a_backlog(
    database_url: str, conn: psycopg.Connection[Any], registry: pgbeat.Registry, many_jobs: int
) -> None:
    registry.register("noop", lambda p: None)
    started = time.perf_counter()
    with running(database_url, registry, concurrency=10):
        wait_for(
            lambda: statuses(conn) == {"done": many_jobs},
            timeout=60,
            interval=0.05,
            message="backlog drained",
        )
    rate = many_jobs / (time.perf_counter() - started)
    print(f"drained {many_jobs} no-op jobs at {rate:.0f} jobs/s")
