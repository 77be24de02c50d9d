"""The schedule operations of scheduling/state.py on an async connection: each ``_async`` twin
does what its sync call does (the same plan runs under both), and a sync call given an async
connection says which twin to use before any SQL.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling import state

Conn = psycopg.Connection[Any]


def _now(conn: Conn) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    value: datetime = row[0]
    return value


def _job_statuses(conn: Conn, name: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT unique_key LIKE %s, status FROM jobs WHERE kind = %s ORDER BY id",
        (f"{name}@manual:%", name),
    ).fetchall()


def test_each_async_twin_does_what_its_sync_call_does(database_url: str, conn: Conn) -> None:
    for name in ("sync_side", "async_side"):
        pgbeat.upsert_schedule(conn, name, every="1h", kind=name, catch_up="none")
    start = _now(conn).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    end = start + timedelta(hours=3)

    sync_side = (
        state.pause_schedule(conn, "sync_side", by="ops"),
        state.pause_schedule(conn, "sync_side"),
        state.resume_schedule(conn, "sync_side", by="ops"),
        state.resume_schedule(conn, "sync_side"),
        state.preview_backfill(conn, "sync_side", start, end).new,
        state.backfill(conn, "sync_side", start, end, by="ops"),
        state.backfill(conn, "sync_side", start, end),
    )
    sync_now = state.run_schedule_now(conn, "sync_side", by="ops", reason="test")

    async def scenario() -> tuple[Any, ...]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            done = (
                await state.pause_schedule_async(aconn, "async_side", by="ops"),
                await state.pause_schedule_async(aconn, "async_side"),
                await state.resume_schedule_async(aconn, "async_side", by="ops"),
                await state.resume_schedule_async(aconn, "async_side"),
                (await state.preview_backfill_async(aconn, "async_side", start, end)).new,
                await state.backfill_async(aconn, "async_side", start, end, by="ops"),
                await state.backfill_async(aconn, "async_side", start, end),
            )
            job_id = await state.run_schedule_now_async(aconn, "async_side", by="ops")
            listed = await state.list_schedules_async(aconn)
            found = await state.get_schedule_async(aconn, "async_side")
            missing = await state.get_schedule_async(aconn, "no_such")
            history = await state.schedule_history_async(aconn, "async_side", limit=100)
            with pytest.raises(pgbeat.ScheduleNotFound):
                await state.pause_schedule_async(aconn, "no_such")
            with pytest.raises(ValueError, match="limit must be at least 1"):
                await state.schedule_history_async(aconn, "async_side", limit=0)
            return done, job_id, listed, found, missing, history

    async_side, async_now, listed, found, missing, history = asyncio.run(scenario())

    assert sync_side == (True, False, True, False, sync_side[4], 3, 0)
    assert len(sync_side[4]) == 3
    assert async_side == sync_side  # the same periods: both schedules fire on the hour
    assert isinstance(async_now, int) and async_now > sync_now
    assert [s.name for s in listed] == [s.name for s in state.list_schedules(conn)]
    assert found == state.get_schedule(conn, "async_side")
    assert found is not None and not found.paused and found.last is not None
    assert missing is None
    assert [(r.outcome, r.fire_at) for r in history] == [
        (r.outcome, r.fire_at) for r in state.schedule_history(conn, "async_side", limit=100)
    ]
    assert sorted(r.outcome for r in history) == ["backfill"] * 3 + ["manual"]
    assert _job_statuses(conn, "async_side") == [(False, "pending")] * 3 + [(True, "pending")]


def test_a_plain_call_given_an_async_connection_returns_its_twins_coroutine(
    database_url: str, conn: Conn
) -> None:
    """One way across the public API (db/runner.py): the plain call awaited is the twin."""
    pgbeat.upsert_schedule(conn, "beat", every="1h", kind="beat", catch_up="none")

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            assert await state.pause_schedule(aconn, "beat") is True
            assert await state.resume_schedule(aconn, "beat") is True
            with pytest.raises(TypeError, match="needs an async connection"):
                await state.pause_schedule_async(conn, "beat")

    asyncio.run(scenario())
    found = state.get_schedule(conn, "beat")
    assert found is not None and not found.paused
    assert _job_statuses(conn, "beat") == []


def test_an_unreadable_row_lists_by_name_on_an_async_connection(
    database_url: str, conn: Conn
) -> None:
    pgbeat.upsert_schedule(conn, "good", every="1h", kind="good", catch_up="none")
    pgbeat.upsert_schedule(conn, "bad", every="1h", kind="bad", catch_up="none")
    conn.execute("UPDATE pgbeat_schedules SET created_at = 'infinity' WHERE name = 'bad'")

    async def scenario() -> list[state.ScheduleState]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            return await state.list_schedules_async(aconn)

    listed = {s.name: s for s in asyncio.run(scenario())}
    assert listed["good"].schedule is not None and listed["good"].problem is None
    assert listed["bad"].schedule is None and "created_at" in (listed["bad"].problem or "")
