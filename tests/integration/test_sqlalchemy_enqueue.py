"""``pgbeat.enqueue`` on SQLAlchemy sessions and connections joins their transaction.

Real PostgreSQL through SQLAlchemy's psycopg dialect, sync and async: commit keeps the
business row and the job, rollback (also after the enqueue) keeps neither, and a rolled
back savepoint (``begin_nested``) removes the job enqueued inside it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from tests.helpers import statuses

sqlalchemy = pytest.importorskip("sqlalchemy")
from sqlalchemy import text  # noqa: E402
from sqlalchemy.ext.asyncio import (  # noqa: E402
    AsyncConnection,
    AsyncSession,
    async_scoped_session,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session, scoped_session, sessionmaker  # noqa: E402

INSERT_ORDER = text("INSERT INTO orders (email) VALUES (:email) RETURNING id")


def sqlalchemy_url(database_url: str) -> str:
    return database_url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def engine(database_url: str, conn: psycopg.Connection[Any]) -> Iterator[Any]:
    conn.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, email text NOT NULL)")
    engine = sqlalchemy.create_engine(sqlalchemy_url(database_url))
    yield engine
    engine.dispose()


def counts(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(orders, jobs) as committed."""
    row = conn.execute("SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM jobs)")
    orders, jobs = row.fetchone()  # type: ignore[misc]
    return orders, jobs


def place_order(session: Any, email: str) -> int | None:
    order_id = session.execute(INSERT_ORDER, {"email": email}).scalar_one()
    job_id: int | None = pgbeat.enqueue(session, "order_confirmation", {"order_id": order_id})
    return job_id


# -- sync --------------------------------------------------------------------------------------


def test_session_commit_keeps_both(engine: Any, conn: psycopg.Connection[Any]) -> None:
    with Session(engine) as session, session.begin():
        job_id = place_order(session, "a@example.com")
    assert isinstance(job_id, int)
    assert counts(conn) == (1, 1)
    payload = conn.execute("SELECT payload FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert payload is not None and set(payload[0]) == {"order_id"}


def test_session_rollback_after_enqueue_keeps_neither(
    engine: Any, conn: psycopg.Connection[Any]
) -> None:
    with Session(engine) as session:
        assert place_order(session, "a@example.com") is not None
        session.rollback()
    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        place_order(session, "b@example.com")
        raise RuntimeError("the request failed after the enqueue")
    assert counts(conn) == (0, 0)


def test_rolled_back_savepoint_removes_its_job(engine: Any, conn: psycopg.Connection[Any]) -> None:
    with Session(engine) as session, session.begin():
        place_order(session, "kept@example.com")
        savepoint = session.begin_nested()
        pgbeat.enqueue(session, "inside_savepoint")
        savepoint.rollback()
        pgbeat.enqueue(session, "after_savepoint")
    kinds = [row[0] for row in conn.execute("SELECT kind FROM jobs ORDER BY id")]
    assert kinds == ["order_confirmation", "after_savepoint"]
    assert counts(conn) == (1, 2)


def test_connection_commits_as_it_goes(engine: Any, conn: psycopg.Connection[Any]) -> None:
    """On a Connection outside any begin(), the enqueue begins the transaction that
    ``commit()`` commits, as SQLAlchemy's autobegin does for its own statements."""
    with engine.connect() as connection:
        pgbeat.enqueue(connection, "first")
        connection.commit()
        pgbeat.enqueue(connection, "never_committed")  # closing rolls it back
    with engine.begin() as connection:
        connection.execute(INSERT_ORDER, {"email": "a@example.com"})
        pgbeat.enqueue(connection, "second")
    assert [row[0] for row in conn.execute("SELECT kind FROM jobs ORDER BY id")] == [
        "first",
        "second",
    ]


def test_enqueue_many_and_scoped_session(engine: Any, conn: psycopg.Connection[Any]) -> None:
    """Flask-SQLAlchemy's ``db.session`` is a scoped_session: it works like a Session."""
    scoped = scoped_session(sessionmaker(engine))
    jobs = [pgbeat.NewJob("bulk", {"n": n}) for n in range(3)]
    assert len(pgbeat.enqueue_many(scoped, jobs)) == 3
    scoped.rollback()
    assert len(pgbeat.enqueue_many(scoped, jobs)) == 3
    place_order(scoped, "a@example.com")
    scoped.commit()
    scoped.remove()
    assert counts(conn) == (1, 4)


def test_wrong_objects_are_refused_in_one_line(engine: Any) -> None:
    with pytest.raises(TypeError, match=r"pgbeat needs .*got builtins\.str"):
        pgbeat.enqueue("postgresql://nowhere", "kind")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="async engine"):
        async_engine = create_async_engine(str(engine.url.render_as_string(hide_password=False)))

        def inside_run_sync(sync_connection: Any) -> None:
            pgbeat.enqueue(sync_connection, "kind")

        async def go() -> None:
            try:
                async with async_engine.connect() as connection:
                    await connection.run_sync(inside_run_sync)
            finally:
                await async_engine.dispose()

        asyncio.run(go())


# -- async -------------------------------------------------------------------------------------


async def _place_order_async(session: Any, email: str) -> int | None:
    order_id = (await session.execute(INSERT_ORDER, {"email": email})).scalar_one()
    return await pgbeat.enqueue(session, "order_confirmation", {"order_id": order_id})  # type: ignore[no-any-return]


def test_async_session_commit_rollback_and_savepoint(
    database_url: str, engine: Any, conn: psycopg.Connection[Any]
) -> None:
    async def go() -> None:
        async_engine = create_async_engine(sqlalchemy_url(database_url))
        make_session = async_sessionmaker(async_engine)
        async with make_session() as session, session.begin():
            assert await _place_order_async(session, "kept@example.com") is not None
            async with session.begin_nested() as savepoint:
                await pgbeat.enqueue_async(session, "inside_savepoint")
                await savepoint.rollback()
        async with make_session() as session:
            await _place_order_async(session, "dropped@example.com")
            await session.rollback()
        scoped = async_scoped_session(make_session, scopefunc=asyncio.current_task)
        ids = await pgbeat.enqueue_many_async(scoped, [pgbeat.NewJob("bulk")] * 2)
        assert len(ids) == 2
        await scoped.commit()
        await scoped.remove()
        await async_engine.dispose()

    asyncio.run(go())
    kinds = [row[0] for row in conn.execute("SELECT kind FROM jobs ORDER BY id")]
    assert kinds == ["order_confirmation", "bulk", "bulk"]
    assert counts(conn) == (1, 3)


def test_async_connection_joins_and_rolls_back(
    database_url: str, engine: Any, conn: psycopg.Connection[Any]
) -> None:
    async def go() -> None:
        async_engine = create_async_engine(sqlalchemy_url(database_url))
        async with async_engine.connect() as connection:
            assert isinstance(connection, AsyncConnection)
            await pgbeat.enqueue(connection, "committed")
            await connection.commit()
            await pgbeat.enqueue(connection, "rolled_back")
            await connection.rollback()
            await pgbeat.enqueue_many(connection, [pgbeat.NewJob("bulk")])
            await connection.commit()
        async with AsyncSession(async_engine) as session:
            await pgbeat.enqueue(session, "closed_without_commit")
        await async_engine.dispose()

    asyncio.run(go())
    kinds = [row[0] for row in conn.execute("SELECT kind FROM jobs ORDER BY id")]
    assert kinds == ["committed", "bulk"]


def test_importing_pgbeat_imports_no_framework() -> None:
    code = (
        "import sys, pgbeat, pgbeat.contrib.django;"
        "loaded = [m for m in ('sqlalchemy', 'django') if m in sys.modules];"
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_schedules_and_job_keys_join_the_session(
    database_url: str, engine: Any, conn: psycopg.Connection[Any]
) -> None:
    """upsert_schedule and the job-key calls take a Session too, in its transaction."""
    with Session(engine) as session:
        assert pgbeat.upsert_schedule(session, "nightly", cron="0 2 * * *") == "created"
        session.rollback()
    with Session(engine) as session, session.begin():
        assert pgbeat.upsert_schedule(session, "nightly", cron="0 2 * * *") == "created"
        pgbeat.enqueue(session, "remind", job_key="user-1", delay=timedelta(hours=1))
    with Session(engine) as session, session.begin():
        assert pgbeat.cancel(session, "remind", "user-1")
        session.rollback()  # the cancel goes with it
    names = [row[0] for row in conn.execute("SELECT name FROM pgbeat_schedules")]
    assert names == ["nightly"]
    assert statuses(conn) == {"pending": 1}

    async def go() -> None:
        async_engine = create_async_engine(sqlalchemy_url(database_url))
        async with AsyncSession(async_engine) as session, session.begin():
            assert await pgbeat.delete_schedule(session, "nightly")
        await async_engine.dispose()

    asyncio.run(go())
    live = conn.execute("SELECT count(*) FROM pgbeat_schedules WHERE deleted_at IS NULL")
    assert live.fetchone() == (0,)  # deleted (the row stays, marked, for its history)
