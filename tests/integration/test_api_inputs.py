"""Bad input to the Python API raises a TypeError or ValueError naming the argument before
any SQL: the caller's transaction goes on, nothing is written, and no row is left that a
reader cannot decode (a BC run_at, a year past 9999)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

import pgbeat

PLUS_14 = timezone(timedelta(hours=14))
MINUS_14 = timezone(timedelta(hours=-14))

BAD_CALLS: dict[str, tuple[type[Exception], str, Callable[[psycopg.Connection[Any]], object]]] = {
    "a delay into the years BC": (
        ValueError, "delay", lambda c: pgbeat.enqueue(c, "k", delay=timedelta(days=-800_000))
    ),
    "a delay past the year 9999": (
        ValueError, "delay", lambda c: pgbeat.enqueue(c, "k", delay=timedelta(days=3_000_000))
    ),
    "run_at on 1 January of year 1, +14:00": (
        ValueError, "run_at",
        lambda c: pgbeat.enqueue(c, "k", run_at=datetime(1, 1, 1, tzinfo=PLUS_14)),
    ),
    "run_at at the very end of year 9999, -14:00": (
        ValueError, "run_at",
        lambda c: pgbeat.enqueue(c, "k", run_at=datetime(9999, 12, 31, 23, tzinfo=MINUS_14)),
    ),
    "run_at as a string": (
        TypeError, "run_at", lambda c: pgbeat.enqueue(c, "k", run_at="2026-01-01")  # type: ignore[call-overload]
    ),
    "delay as an int": (
        TypeError, "delay", lambda c: pgbeat.enqueue(c, "k", delay=3600)  # type: ignore[call-overload]
    ),
    "max_wait of a thousand millennia": (
        ValueError, "max_wait",
        lambda c: pgbeat.enqueue(
            c, "k", job_key="j", on_conflict="replace", max_wait=timedelta(days=999_999)
        ),
    ),
    "NaN in the payload": (ValueError, "NaN", lambda c: pgbeat.enqueue(c, "k", {"x": math.nan})),
    "Infinity in the payload": (
        ValueError, "Infinity", lambda c: pgbeat.enqueue(c, "k", {"x": [math.inf]})
    ),
    "a NUL character in the payload": (
        ValueError, "NUL", lambda c: pgbeat.enqueue(c, "k", {"note": "a\x00b"})
    ),
    "a NUL character in a payload's key": (
        ValueError, "NUL", lambda c: pgbeat.enqueue(c, "k", {"a\x00": 1})
    ),
    "a lone surrogate in the payload": (
        ValueError, "surrogate", lambda c: pgbeat.enqueue(c, "k", {"note": "\ud800"})
    ),
    "a NaN in enqueue_many": (
        ValueError, "NaN",
        lambda c: pgbeat.enqueue_many(c, [pgbeat.NewJob("k"), pgbeat.NewJob("k", {"x": math.nan})]),
    ),
    "a BC delay in enqueue_many": (
        ValueError, "delay",
        lambda c: pgbeat.enqueue_many(c, [pgbeat.NewJob("k", delay=timedelta(days=-800_000))]),
    ),
    "a keyed job with a run_at past 9999": (
        ValueError, "run_at",
        lambda c: pgbeat.enqueue(
            c, "k", job_key="j", run_at=datetime(9999, 12, 31, 23, tzinfo=MINUS_14)
        ),
    ),
    "reschedule into the years BC": (
        ValueError, "delay",
        lambda c: pgbeat.reschedule(c, "k", "live", delay=timedelta(days=-800_000)),
    ),
    "reschedule to year 1, +14:00": (
        ValueError, "run_at",
        lambda c: pgbeat.reschedule(c, "k", "live", run_at=datetime(1, 1, 1, tzinfo=PLUS_14)),
    ),
    "reschedule with an int delay": (
        TypeError, "delay", lambda c: pgbeat.reschedule(c, "k", "live", delay=60)  # type: ignore[call-overload]
    ),
    "reschedule with a job_key that is not text": (
        TypeError, "job_key", lambda c: pgbeat.reschedule(c, "k", 7, delay=timedelta(1))  # type: ignore[call-overload]
    ),
    "find with a kind that is not text": (
        TypeError, "kind", lambda c: pgbeat.find(c, None, "live")  # type: ignore[call-overload]
    ),
}  # fmt: skip


def _jobs(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT id, run_at FROM jobs ORDER BY id").fetchall()


@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_input_is_refused_before_any_sql(name: str, database_url: str) -> None:
    error, word, call = BAD_CALLS[name]
    with psycopg.connect(database_url, autocommit=True) as setup:
        live = pgbeat.enqueue(setup, "k", {}, job_key="live", delay=timedelta(hours=1))
        before = _jobs(setup)
    with psycopg.connect(database_url) as conn:
        with pytest.raises(error, match=word):
            call(conn)
        # the caller's transaction is intact: no statement of pgbeat's ran and failed in it
        assert conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.commit()
        assert _jobs(conn) == before  # nothing written, nothing moved
        assert before[0][0] == live


def test_reschedule_with_a_bad_time_leaves_the_job_where_it_was(
    conn: psycopg.Connection[Any],
) -> None:
    """On an autocommit connection the UPDATE would commit and then fail to decode."""
    job_id = pgbeat.enqueue(conn, "k", {}, job_key="live", delay=timedelta(hours=1))
    before = _jobs(conn)
    with pytest.raises(ValueError, match="delay"):
        pgbeat.reschedule(conn, "k", "live", delay=timedelta(days=-800_000))
    assert _jobs(conn) == before
    assert pgbeat.reschedule(conn, "k", "live", delay=timedelta(minutes=5)) == job_id


def test_the_extreme_times_that_are_allowed_read_back(conn: psycopg.Connection[Any]) -> None:
    """The edges of the range decode in any session time zone."""
    early = pgbeat.enqueue(conn, "k", run_at=datetime(1, 1, 3, tzinfo=UTC))
    late = pgbeat.enqueue(conn, "k", run_at=datetime(9999, 12, 29, tzinfo=UTC))
    far = pgbeat.enqueue(conn, "k", delay=timedelta(days=365_000))
    for zone in ("Pacific/Kiritimati", "Etc/GMT+12"):
        conn.execute("SELECT set_config('TimeZone', %s, false)", (zone,))
        rows = conn.execute(
            "SELECT run_at FROM jobs WHERE id = ANY(%s)", ([early, late, far],)
        ).fetchall()
        assert len(rows) == 3


def test_async_calls_check_too(database_url: str) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(database_url) as aconn:
            with pytest.raises(ValueError, match="delay"):
                await pgbeat.enqueue_async(aconn, "k", delay=timedelta(days=3_000_000))
            with pytest.raises(ValueError, match="NaN"):
                await pgbeat.enqueue_many_async(aconn, [pgbeat.NewJob("k", {"x": math.nan})])
            with pytest.raises(ValueError, match="run_at"):
                await pgbeat.reschedule_async(
                    aconn, "k", "j", run_at=datetime(1, 1, 1, tzinfo=PLUS_14)
                )
            assert await (await aconn.execute("SELECT 1")).fetchone() == (1,)

    asyncio.run(main())


def test_an_enqueue_before_migrate_says_to_migrate(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        for call in (
            lambda: pgbeat.enqueue(conn, "k", {}),
            lambda: pgbeat.enqueue_many(conn, [pgbeat.NewJob("k")]),
            lambda: pgbeat.enqueue(conn, "k", {}, job_key="j"),
            lambda: pgbeat.find(conn, "k", "j"),
        ):
            with pytest.raises(pgbeat.NotMigrated, match="pgbeat migrate"):
                call()

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(
            empty_database_url, autocommit=True
        ) as aconn:
            with pytest.raises(pgbeat.NotMigrated, match="pgbeat migrate"):
                await pgbeat.enqueue_async(aconn, "k", {})
            with pytest.raises(pgbeat.NotMigrated, match="pgbeat migrate"):
                await pgbeat.cancel_async(aconn, "k", "j")

    asyncio.run(main())
