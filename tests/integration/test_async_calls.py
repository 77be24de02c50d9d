"""One way to take an async connection across the public API (db/runner.py): every call on
a caller's connection has an ``_async`` twin, the plain call given an async connection
returns the twin's coroutine, and a twin given a synchronous connection raises one
TypeError, the same for every call."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.runner import AsyncAware
from pgbeat.scheduling import state


def _async_aware_calls() -> list[tuple[str, AsyncAware[Any, Any]]]:
    found = []
    for info in pkgutil.walk_packages(pgbeat.__path__, "pgbeat."):
        skipped = ("pgbeat.contrib", "pgbeat.ui", "pgbeat.demo", "pgbeat.cli", "pgbeat.__main__")
        if info.name.startswith(skipped):
            continue
        module = importlib.import_module(info.name)
        found += [
            (f"{info.name}.{name}", value)
            for name, value in vars(module).items()
            if isinstance(value, AsyncAware) and value.__module__ == info.name
        ]
    return found


def test_every_public_call_with_a_twin_is_async_aware() -> None:
    """The one convention: no public call dispatches on its connection by hand."""
    twinned = [name for name in pgbeat.__all__ if f"{name}_async" in pgbeat.__all__]
    assert len(twinned) >= 16
    for name in twinned:
        assert isinstance(getattr(pgbeat, name), AsyncAware), name


def test_every_async_aware_call_has_its_twin() -> None:
    calls = _async_aware_calls()
    assert len(calls) >= 25  # the public API (16), state (6), backfill (2), deadlines (1)
    for name, call in calls:
        assert call.twin.__name__ == f"{getattr(call, '__name__', '')}_async", name
        assert asyncio.iscoroutinefunction(call.twin), name


def test_plain_calls_on_an_async_connection_are_their_twins(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "beat", every="1h")

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            paused = await pgbeat.pause_queue(aconn, "q")
            assert paused.paused is True
            assert (await pgbeat.resume_queue_async(aconn, "q")).paused is False
            limited = await pgbeat.configure_queue(aconn, "q", concurrency=2)
            assert limited.concurrency == 2
            assert (await pgbeat.configure_queue_async(aconn, "q", rate="5/1s")).rate == "5/1s"
            assert [s.name for s in await state.list_schedules(aconn)] == ["beat"]
            assert await pgbeat.enqueue(aconn, "k") is not None

    asyncio.run(scenario())
    assert pgbeat.pause_queue(conn, "q").paused is True


@pytest.mark.parametrize(
    "call",
    [
        lambda conn: pgbeat.pause_queue_async(conn, "q"),
        lambda conn: pgbeat.configure_queue_async(conn, "q", concurrency=1),
        lambda conn: state.pause_schedule_async(conn, "beat"),
        lambda conn: state.list_schedules_async(conn),
        lambda conn: pgbeat.enqueue_async(conn, "k"),
        lambda conn: pgbeat.cancel_job_async(conn, 1),
        lambda conn: pgbeat.wait_async(conn, 1, timeout=1),
        lambda conn: pgbeat.find_async(conn, "k", "j"),
        lambda conn: pgbeat.delete_schedule_async(conn, "beat"),
        lambda conn: pgbeat.apply_migrations_async(conn),
    ],
)
def test_a_twin_given_a_sync_connection_raises_one_type_error(
    call: Any, conn: psycopg.Connection[Any]
) -> None:
    with pytest.raises(TypeError, match="pgbeat needs an async connection"):
        asyncio.run(call(conn))


def test_a_plain_call_given_an_async_connection_checks_its_arguments_when_awaited(
    database_url: str,
) -> None:
    """The plain call is its twin: the same coroutine, so the same errors, at the same time."""

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            calls = [
                pgbeat.cancel_job(aconn, -1),
                pgbeat.wait(aconn, 0, timeout=1),
                pgbeat.enqueue_workflow(aconn, pgbeat.Workflow(), key=""),
                pgbeat.configure_queue(aconn, "q"),
            ]
            for call in calls:
                with pytest.raises(ValueError):
                    await call

    asyncio.run(scenario())


def test_wait_before_migrate_says_to_migrate(empty_database_url: str) -> None:
    """``wait`` is not a plan of the runner, yet says "not migrated" as the runner does."""
    with (
        psycopg.connect(empty_database_url, autocommit=True) as conn,
        pytest.raises(pgbeat.NotMigrated, match="run `pgbeat migrate`"),
    ):
        pgbeat.wait(conn, 1, timeout=1)

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(
            empty_database_url, autocommit=True
        ) as aconn:
            with pytest.raises(pgbeat.NotMigrated, match="run `pgbeat migrate`"):
                await pgbeat.wait(aconn, 1, timeout=1)

    asyncio.run(scenario())
