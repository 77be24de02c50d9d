"""The README's enqueueing examples, each as a user's test written with ``pgbeat.testing``.

One database for the module and a rolled-back transaction per test, so each test itself
takes milliseconds (the README promises a first test as cheap as that).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel

import pgbeat
from pgbeat.testing import assert_enqueued, drain, refute_enqueued
from tests.helpers import temporary_database, uncommitted

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Welcome(BaseModel):
    user_id: int


@pytest.fixture(scope="module")
def url(server_url: str, template_name: str) -> Iterator[str]:
    with temporary_database(server_url, template_name) as database:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("CREATE TABLE users (id bigserial PRIMARY KEY, email text NOT NULL)")
            conn.execute("CREATE TABLE emails_sent (user_id bigint PRIMARY KEY)")
        yield database


@pytest.fixture
def conn(url: str) -> Iterator[psycopg.Connection[Any]]:
    with uncommitted(url) as connection:
        yield connection


def sign_up(conn: psycopg.Connection[Any], email: str) -> int:
    """The README's first example, as application code."""
    with conn.transaction():
        row = conn.execute(
            "INSERT INTO users (email) VALUES (%s) RETURNING id", (email,)
        ).fetchone()
        assert row is not None
        user_id = int(row[0])
        pgbeat.enqueue(conn, "welcome_email", {"user_id": user_id})
    return user_id


def make_registry() -> tuple[pgbeat.Registry, list[Any]]:
    """The README's handlers (myapp/jobs.py), recording what they were given."""
    registry = pgbeat.Registry()
    calls: list[Any] = []

    @registry.handler("welcome_email")
    def welcome_email(payload: Welcome, job: pgbeat.JobContext) -> None:
        calls.append(("welcome_email", payload, job.attempt))

    @registry.handler("daily_report")
    async def daily_report(payload: dict[str, Any]) -> None:
        calls.append(("daily_report", payload))

    return registry, calls


def test_the_first_test_of_the_readme(conn: psycopg.Connection[Any]) -> None:
    registry, calls = make_registry()
    user_id = sign_up(conn, "ada@example.com")
    assert_enqueued(conn, "welcome_email", {"user_id": user_id})
    refute_enqueued(conn, "welcome_email", {"user_id": user_id + 1})
    assert drain(conn, registry) == {"done": 1}
    assert calls == [("welcome_email", Welcome(user_id=user_id), 1)]


def test_a_rollback_leaves_no_user_and_no_job(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(ZeroDivisionError), conn.transaction():
        conn.execute("INSERT INTO users (email) VALUES ('bob@example.com')")
        pgbeat.enqueue(conn, "welcome_email", {"user_id": 1})
        _ = 1 / 0
    refute_enqueued(conn, "welcome_email")
    assert conn.execute("SELECT count(*) FROM users").fetchone() == (0,)


def test_enqueue_options_and_a_duplicate_unique_key(conn: psycopg.Connection[Any]) -> None:
    first = pgbeat.enqueue(
        conn, "reminder", Welcome(user_id=42), run_at=T0, unique_key="r42", max_attempts=3
    )
    assert first is not None
    assert pgbeat.enqueue(conn, "reminder", {"user_id": 42}, unique_key="r42") is None
    (job,) = assert_enqueued(conn, "reminder", {"user_id": 42}, unique_key="r42")
    assert (job.id, job.run_at, job.max_attempts) == (first, T0, 3)
    pgbeat.enqueue(conn, "digest", {}, delay=timedelta(hours=24))
    assert drain(conn, pgbeat.Registry()) == {}  # neither is due yet
    assert_enqueued(conn, "digest", status="pending")


def test_enqueue_many(conn: psycopg.Connection[Any]) -> None:
    ids = pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("welcome_email", {"user_id": n}) for n in range(1, 4)]
    )
    assert len(ids) == 3
    assert len(assert_enqueued(conn, "welcome_email")) == 3
    assert [j.id for j in assert_enqueued(conn, "welcome_email", {"user_id": 2})] == [ids[1]]


def test_a_job_key_replaces_the_live_job(conn: psycopg.Connection[Any]) -> None:
    kept = pgbeat.enqueue(conn, "remind", {"n": 1}, job_key="user:42", delay=timedelta(hours=1))
    again = pgbeat.enqueue(
        conn, "remind", {"n": 2}, job_key="user:42", on_conflict="replace", run_at=T0
    )
    assert again == kept
    (job,) = assert_enqueued(conn, "remind", job_key="user:42")
    assert (job.payload, job.run_at) == ({"n": 2}, T0)
    assert pgbeat.reschedule(conn, "remind", "user:42", run_at=T0 + timedelta(days=1)) == kept
    live = pgbeat.find(conn, "remind", "user:42")
    assert live is not None and live.id == kept
    assert pgbeat.cancel(conn, "remind", "user:42") is not None
    assert_enqueued(conn, "remind", status="cancelled")
    refute_enqueued(conn, "remind", status="pending")


def test_the_readme_handlers_run_with_their_payloads(conn: psycopg.Connection[Any]) -> None:
    registry, calls = make_registry()
    pgbeat.enqueue(conn, "welcome_email", {"user_id": 7})
    pgbeat.enqueue(conn, "daily_report", {"day": "2030-01-01"})
    pgbeat.enqueue(conn, "welcome_email", {"user_id": "not a number"})
    assert drain(conn, registry) == {"done": 2, "failed": 1}
    assert sorted(calls, key=str) == [
        ("daily_report", {"day": "2030-01-01"}),
        ("welcome_email", Welcome(user_id=7), 1),
    ]
    (bad,) = assert_enqueued(conn, "welcome_email", status="failed")
    assert bad.attempts == 1 and "user_id" in (bad.last_error or "")


def test_what_a_handler_raises_decides_the_jobs_fate(conn: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()

    @registry.handler("flaky")
    def flaky(payload: dict[str, Any]) -> None:
        raise ConnectionError("smtp down")

    @registry.handler("hopeless")
    def hopeless(payload: dict[str, Any]) -> None:
        raise pgbeat.PermanentError("no such mailbox")

    @registry.handler("later")
    def later(payload: dict[str, Any]) -> None:
        raise pgbeat.Retry(after=timedelta(minutes=5))

    for kind in ("flaky", "hopeless", "later"):
        pgbeat.enqueue(conn, kind, {})
    assert drain(conn, registry, now=T0) == {"pending": 2, "failed": 1}
    assert_enqueued(conn, "hopeless", status="failed", attempts=1)
    assert assert_enqueued(conn, "later")[0].run_at == T0 + timedelta(minutes=5)
    (retry,) = assert_enqueued(conn, "flaky", status="pending", attempts=1)
    assert T0 + timedelta(seconds=1) <= retry.run_at <= T0 + timedelta(seconds=2)


def test_the_idempotent_handler_sends_once(conn: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()
    sent: list[int] = []

    @registry.handler("welcome_email")
    def welcome_email(payload: Welcome, job: pgbeat.JobContext) -> None:
        with job.connection() as db, db.transaction():
            inserted = db.execute(
                "INSERT INTO emails_sent (user_id) VALUES (%s) ON CONFLICT DO NOTHING",
                (payload.user_id,),
            ).rowcount
            if inserted == 0:
                return  # already sent by an earlier run
            sent.append(payload.user_id)

    pgbeat.enqueue(conn, "welcome_email", {"user_id": 9})
    pgbeat.enqueue(conn, "welcome_email", {"user_id": 9})  # a duplicate job
    assert drain(conn, registry) == {"done": 2}
    assert sent == [9]


@pytest.fixture(scope="module")
def engine(url: str) -> Iterator[Any]:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    created = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    from sqlalchemy.orm import Session

    with Session(created) as warm_up:  # connect and load the ORM here, not in the test
        warm_up.execute(sqlalchemy.text("SELECT 1"))
    yield created
    created.dispose()


def test_sqlalchemy_session(engine: Any) -> None:
    from sqlalchemy.orm import Session

    with Session(engine) as session:
        pgbeat.enqueue(session, "welcome_email", {"user_id": 11})
        assert_enqueued(session, "welcome_email", {"user_id": 11})
        registry, calls = make_registry()
        assert drain(session, registry) == {"done": 1}
        assert calls == [("welcome_email", Welcome(user_id=11), 1)]
        session.rollback()
        refute_enqueued(session, "welcome_email", {"user_id": 11})


def test_async_enqueue_then_a_sync_check(url: str) -> None:
    async def enqueue() -> int | None:
        async with await psycopg.AsyncConnection.connect(url) as aconn:
            return await pgbeat.enqueue(aconn, "async_example", {"user_id": 12})

    job_id = asyncio.run(enqueue())
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            assert [j.id for j in assert_enqueued(conn, "async_example")] == [job_id]
        finally:
            conn.execute("DELETE FROM jobs WHERE kind = 'async_example'")
