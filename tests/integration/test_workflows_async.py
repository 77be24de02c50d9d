"""``workflow`` and ``cancel_workflow`` on a psycopg AsyncConnection, as every public call on
a caller's connection takes one (db/runner.py): an ``_async`` twin, and the plain call given
an async connection returns the twin's coroutine.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import psycopg
import pytest

import pgbeat


def _flow() -> pgbeat.Workflow:
    flow = pgbeat.Workflow("twins")
    first = flow.add("step", {"name": "a"}, name="a")
    flow.add("step", {"name": "b"}, after=[first], name="b")
    return flow


def test_the_workflow_calls_have_async_twins(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, _flow())
    other = pgbeat.enqueue_workflow(conn, _flow())
    seen = pgbeat.workflow(conn, enqueued.id)
    assert seen is not None

    async def scenario() -> tuple[Any, ...]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            shown = await pgbeat.workflow_async(aconn, enqueued.id)
            pending = pgbeat.workflow(aconn, enqueued.id)  # the twin's coroutine
            assert inspect.iscoroutine(pending)
            via_plain = await pending
            none = await pgbeat.workflow_async(aconn, 2**40)
            cancelled = await pgbeat.cancel_workflow_async(aconn, enqueued.id, reason="test")
            again = await pgbeat.cancel_workflow(aconn, other.id)
            missing = await pgbeat.cancel_workflow_async(aconn, 2**40)
            with pytest.raises(TypeError, match="workflow id must be an int"):
                await pgbeat.workflow_async(aconn, "1")  # type: ignore[arg-type]
            return shown, via_plain, none, cancelled, again, missing

    shown, via_plain, none, cancelled, again, missing = asyncio.run(scenario())
    assert shown == via_plain == seen
    assert none is None and missing is None
    assert cancelled == pgbeat.CancelledWorkflow(enqueued.id, 2, 0)
    assert again == pgbeat.CancelledWorkflow(other.id, 2, 0)
    after = pgbeat.workflow(conn, enqueued.id)
    assert after is not None and {s.status for s in after.steps} == {"cancelled"}


def test_a_twin_given_a_sync_connection_says_so(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(TypeError, match="needs an async connection"):
        asyncio.run(pgbeat.workflow_async(conn, 1))
    with pytest.raises(TypeError, match="needs an async connection"):
        asyncio.run(pgbeat.cancel_workflow_async(conn, 1))
