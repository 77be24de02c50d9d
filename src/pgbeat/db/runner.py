"""The one runner of plans: a call on a caller's connection, written once as a generator of
statements and driven here by a sync or an async loop, so that the sync and async faces
of a call cannot drift apart.

A plan yields ``(statement, params)`` and is sent each statement's rows; what it returns
is the call's result. ``run_on`` takes any connection the public API takes (psycopg sync
or async, SQLAlchemy, Django) and returns the result, or a coroutine for an async one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from pgbeat.db import frameworks, schema_errors

T = TypeVar("T")
Statement = tuple[LiteralString, dict[str, Any]]
Plan = Generator[Statement, list[tuple[Any, ...]], T]


@schema_errors.translate
def run(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    """Run ``plan``'s statements on ``conn``, in its current transaction.

    On an autocommit connection the first statement commits alone (most calls have only
    one), and the rest in one transaction of their own: a supersede never commits without
    the job that replaces it.
    """
    try:
        statement = plan.send(conn.execute(*next(plan)).fetchall())
    except StopIteration as finished:
        return _returned(finished, plan)
    with own_transaction(conn):
        while True:
            try:
                statement = plan.send(conn.execute(*statement).fetchall())
            except StopIteration as finished:
                return _returned(finished, plan)


@schema_errors.translate
async def run_async(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    """``run`` on an async connection."""
    try:
        cursor = await conn.execute(*next(plan))
        statement = plan.send(await cursor.fetchall())
    except StopIteration as finished:
        return _returned(finished, plan)
    async with own_transaction_async(conn):
        while True:
            try:
                cursor = await conn.execute(*statement)
                statement = plan.send(await cursor.fetchall())
            except StopIteration as finished:
                return _returned(finished, plan)


def _returned(finished: StopIteration, plan: Plan[T]) -> T:
    """What ``plan`` returned: the value of the StopIteration that ended it."""
    value: T = finished.value
    return value


def own_transaction(conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
    """A transaction for statements that must commit together, unless one is open."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    return conn.transaction() if conn.autocommit and idle else nullcontext()


def own_transaction_async(conn: psycopg.AsyncConnection[Any]) -> AbstractAsyncContextManager[Any]:
    """``own_transaction`` for an async connection."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    return conn.transaction() if conn.autocommit and idle else nullcontext()


def run_on(conn: object, plan: Plan[T]) -> T | Awaitable[T]:
    """Run ``plan`` on any connection ``enqueue`` takes; an async one returns a coroutine."""
    sync_conn = frameworks.sync_connection(conn)
    if sync_conn is None:
        return run_on_async(conn, plan)
    return run(sync_conn, plan)


async def run_on_async(conn: object, plan: Plan[T]) -> T:
    """``run_on`` for a caller that knows its connection is async (a coroutine, always)."""
    return await run_async(await frameworks.async_connection(conn), plan)
