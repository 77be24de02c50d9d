"""``pgbeat.testing``: assertions on the caller's uncommitted transaction, and ``drain``,
which runs due jobs in this process on that connection with the worker's own decisions.

One database for the module; each test works inside a transaction that is rolled back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pydantic
import pytest

import pgbeat
from pgbeat.backoff import BackoffPolicy
from pgbeat.testing import EnqueuedJob, assert_enqueued, drain, refute_enqueued
from tests.helpers import temporary_database, uncommitted

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)  # an injected clock, after every created_at


class Signup(pydantic.BaseModel):
    user_id: int


@pytest.fixture(scope="module")
def module_database(server_url: str, template_name: str) -> Iterator[str]:
    with temporary_database(server_url, template_name) as url:
        yield url


@pytest.fixture
def tx(module_database: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection inside a transaction that the test never commits."""
    with uncommitted(module_database) as conn:
        yield conn


def test_assert_enqueued_sees_the_uncommitted_job_and_matches_a_payload_subset(
    tx: psycopg.Connection[Any],
) -> None:
    job_id = pgbeat.enqueue(tx, "welcome_email", {"user_id": 7, "meta": {"lang": "fr", "v": 2}})
    found = assert_enqueued(tx, "welcome_email", {"meta": {"lang": "fr"}})
    assert [job.id for job in found] == [job_id]
    assert isinstance(found[0], EnqueuedJob)
    assert found[0].payload == {"user_id": 7, "meta": {"lang": "fr", "v": 2}}
    assert assert_enqueued(tx, "welcome_email", Signup(user_id=7), status="pending")
    refute_enqueued(tx, "welcome_email", {"user_id": 8})
    refute_enqueued(tx, "welcome_email", {"meta": {"lang": "de"}})
    refute_enqueued(tx, "reminder")


def test_a_failed_assertion_lists_what_was_enqueued(tx: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue(tx, "welcome_email", {"user_id": 7}, unique_key="u7")
    pgbeat.enqueue(tx, "reminder", {"user_id": 7}, delay=timedelta(hours=1))
    with pytest.raises(AssertionError) as failed:
        assert_enqueued(tx, "welcome_email", {"user_id": 8}, max_attempts=8)
    text = str(failed.value)
    assert text.startswith(
        "expected a job of kind 'welcome_email' with payload containing {\"user_id\": 8} "
        "and max_attempts=8; enqueued:\n"
    )
    assert 'welcome_email {"user_id": 7} pending queue=default' in text
    assert "unique_key='u7'" in text
    assert 'reminder {"user_id": 7} pending' in text
    with pytest.raises(AssertionError, match=r"expected no job of kind 'reminder'; found 1:"):
        refute_enqueued(tx, "reminder")


def test_fields_match_columns_and_an_unknown_field_is_a_type_error(
    tx: psycopg.Connection[Any],
) -> None:
    pgbeat.enqueue(tx, "export", {}, max_attempts=3, unique_key="e1")
    assert assert_enqueued(tx, "export", max_attempts=3, unique_key="e1", queue="default")
    refute_enqueued(tx, "export", max_attempts=4)
    with pytest.raises(TypeError, match=r"unknown job field.*colour"):
        assert_enqueued(tx, "export", colour="red")
    with pytest.raises(AssertionError, match="no job was enqueued"):
        tx.execute("DELETE FROM jobs")
        assert_enqueued(tx, "export")


def test_drain_runs_due_jobs_and_counts_final_statuses(tx: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    seen: list[Any] = []

    @registry.handler("welcome_email")
    def welcome(payload: Signup, job: pgbeat.JobContext) -> None:
        seen.append((payload, job.attempt))

    @registry.handler("bad")
    def bad(payload: dict[str, Any]) -> None:
        raise pgbeat.PermanentError("never")

    @registry.handler("later")
    def later(payload: dict[str, Any]) -> None:
        seen.append("later")

    pgbeat.enqueue(tx, "welcome_email", {"user_id": 1})
    pgbeat.enqueue(tx, "bad", {})
    pgbeat.enqueue(tx, "invalid", {})  # no handler: failed at once, as a worker does
    pgbeat.enqueue(tx, "welcome_email", {"user_id": "x"})  # does not validate
    pgbeat.enqueue(tx, "later", {}, run_at=T0 + timedelta(days=1))
    assert drain(tx, registry, now=T0) == {"done": 1, "failed": 3}
    assert seen == [(Signup(user_id=1), 1)]
    assert assert_enqueued(tx, "later", status="pending")
    assert drain(tx, registry, now=T0 + timedelta(days=1)) == {"done": 1}
    assert drain(tx, registry, now=T0 + timedelta(days=1)) == {}


def test_a_retry_waits_for_the_injected_clock(tx: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    attempts: list[int] = []

    @registry.handler("flaky")
    def flaky(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        attempts.append(job.attempt)
        if job.attempt < 3:
            raise RuntimeError("try again")

    policy = BackoffPolicy(base=timedelta(seconds=2), jitter=0.0)
    pgbeat.enqueue(tx, "flaky", {}, max_attempts=5)
    assert drain(tx, registry, now=T0, backoff=policy) == {"pending": 1}
    (job,) = assert_enqueued(tx, "flaky", status="pending", attempts=1)
    assert job.run_at == T0 + timedelta(seconds=2)
    assert "RuntimeError: try again" in (job.last_error or "")
    assert drain(tx, registry, now=T0 + timedelta(seconds=1), backoff=policy) == {}
    assert drain(tx, registry, now=T0 + timedelta(seconds=2), backoff=policy) == {"pending": 1}
    assert drain(tx, registry, now=T0 + timedelta(seconds=6), backoff=policy) == {"done": 1}
    assert attempts == [1, 2, 3]


def test_retry_after_and_spent_attempts_follow_the_worker(tx: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()

    @registry.handler("poll")
    def poll(payload: dict[str, Any]) -> None:
        raise pgbeat.Retry(after=timedelta(minutes=5))

    pgbeat.enqueue(tx, "poll", {}, max_attempts=2)
    assert drain(tx, registry, now=T0) == {"pending": 1}
    assert assert_enqueued(tx, "poll")[0].run_at == T0 + timedelta(minutes=5)
    assert drain(tx, registry, now=T0 + timedelta(minutes=5)) == {"failed": 1}


def test_async_handlers_middleware_and_follow_up_jobs_run_in_one_drain(
    tx: psycopg.Connection[Any],
) -> None:
    order: list[str] = []

    def outer(job: pgbeat.JobContext, call_next: Any) -> Any:
        order.append(f"outer:{job.kind}")
        return call_next()

    registry = pgbeat.Registry(middleware=[outer])

    @registry.handler("signup")
    def signup(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        with job.connection() as conn:  # drain lends the test's own connection
            pgbeat.enqueue(conn, "welcome_email", {"user_id": payload["user_id"]})

    @registry.handler("welcome_email")
    async def welcome(payload: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        order.append(f"sent:{payload['user_id']}")

    pgbeat.enqueue(tx, "signup", {"user_id": 5})
    assert drain(tx, registry) == {"done": 2}
    assert order == ["outer:signup", "outer:welcome_email", "sent:5"]


def test_a_failing_handler_leaves_the_callers_transaction_usable(
    tx: psycopg.Connection[Any],
) -> None:
    registry = pgbeat.Registry()

    @registry.handler("writes_then_fails")
    def writes_then_fails(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        with job.connection() as conn:
            pgbeat.enqueue(conn, "side_effect", {})
            conn.execute("SELECT 1/0")

    pgbeat.enqueue(tx, "writes_then_fails", {}, max_attempts=1)
    assert drain(tx, registry) == {"failed": 1}
    refute_enqueued(tx, "side_effect")  # rolled back with the handler's savepoint
    (job,) = assert_enqueued(tx, "writes_then_fails", status="failed")
    assert "DivisionByZero" in (job.last_error or "")


def test_drain_opens_no_connection_of_its_own(tx: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    backends: list[int] = []

    @registry.handler("count")
    def count(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        with job.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            ).fetchone()
            assert row is not None
            backends.append(int(row[0]))

    before = tx.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    ).fetchone()
    pgbeat.enqueue(tx, "count", {})
    assert drain(tx, registry) == {"done": 1}
    assert before is not None and backends == [int(before[0])]


def test_drain_enqueues_the_schedules_due_periods(tx: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    fired: list[str | None] = []

    @registry.handler("report")
    def report(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        fired.append(job.unique_key)

    pgbeat.upsert_schedule(tx, "nightly", cron="0 3 * * *", kind="report")
    assert drain(tx, registry, now=T0) == {}
    assert drain(tx, registry, now=T0.replace(hour=3, minute=1) + timedelta(days=1)) == {"done": 1}
    assert fired == ["nightly@2030-01-02T03:00:00Z"]


def test_bad_arguments(tx: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        drain(tx, registry, now=datetime(2030, 1, 1))  # noqa: DTZ001
    with pytest.raises(TypeError, match=r"registry must be a pgbeat\.Registry"):
        drain(tx, object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        assert_enqueued(tx, "")


class _RolledBack(Exception):
    pass


def test_the_helpers_on_djangos_connection_inside_atomic(
    django_db: psycopg.Connection[Any],
) -> None:
    from django.db import connection, transaction

    registry = pgbeat.Registry()
    registry.register("order_confirmation", lambda payload: None)
    with pytest.raises(_RolledBack), transaction.atomic():
        pgbeat.enqueue(connection, "order_confirmation", {"order_id": 3})
        assert_enqueued(connection, "order_confirmation", {"order_id": 3})
        assert drain(connection, registry) == {"done": 1}
        raise _RolledBack
    refute_enqueued(django_db, "order_confirmation")


def test_a_drain_past_its_limit_leaves_no_job_running(
    tx: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pgbeat.testing.DRAIN_LIMIT", 5)
    registry = pgbeat.Registry()

    @registry.handler("again")
    def again(payload: dict[str, Any]) -> None:
        pgbeat.enqueue(tx, "again")  # its own kind, due at once: it never ends

    pgbeat.enqueue(tx, "again")
    with pytest.raises(RuntimeError, match="drain ran 5 jobs and more are due"):
        drain(tx, registry, now=T0, schedules=False)
    rows = tx.execute("SELECT status, attempts, count(*) FROM jobs GROUP BY 1, 2").fetchall()
    assert sorted(rows) == [("done", 1, 5), ("pending", 0, 1)]
