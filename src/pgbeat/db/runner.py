"""The one runner of plans: a call on a caller's connection, written once as a generator of
statements and driven here by a sync or an async loop, so that the sync and async faces
of a call cannot drift apart.

A plan yields ``(statement, params)`` and is sent each statement's rows (tuples); what it
returns is the call's result. A plan that reads rows by column name yields
``(statement, params, DICTS)``, or ``GUARDED`` where a stored value may be one Python
cannot hold (db/guarded.py: it loads as ``Unreadable`` instead of ending the read).
``run_on`` takes any connection the public API takes (psycopg sync or async, SQLAlchemy,
Django) and returns the result, or a coroutine for an async one; ``run_on_sync`` is for
calls that have an ``_async`` twin.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Generator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from pgbeat.db import frameworks, schema_errors
from pgbeat.db.guarded import guard

T = TypeVar("T")


class Rows(enum.Enum):
    """How a statement's rows reach its plan, when not as tuples."""

    DICTS = "dicts"
    GUARDED = "guarded"  # dicts, a value Python cannot hold loaded as Unreadable


DICTS, GUARDED = Rows.DICTS, Rows.GUARDED
Statement = tuple[LiteralString, Mapping[str, Any]] | tuple[LiteralString, Mapping[str, Any], Rows]
Plan = Generator[Statement, list[Any], T]


@schema_errors.translate
def run(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    """Run ``plan``'s statements on ``conn``, in its current transaction.

    On an autocommit connection the first statement commits alone (most calls have only
    one), and the rest in one transaction of their own: a supersede never commits without
    the job that replaces it.
    """
    try:
        statement = plan.send(_rows(conn, next(plan)))
    except StopIteration as finished:
        return _returned(finished, plan)
    with own_transaction(conn):
        while True:
            try:
                statement = plan.send(_rows(conn, statement))
            except StopIteration as finished:
                return _returned(finished, plan)


@schema_errors.translate
async def run_async(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    """``run`` on an async connection."""
    try:
        statement = plan.send(await _rows_async(conn, next(plan)))
    except StopIteration as finished:
        return _returned(finished, plan)
    async with own_transaction_async(conn):
        while True:
            try:
                statement = plan.send(await _rows_async(conn, statement))
            except StopIteration as finished:
                return _returned(finished, plan)


def _rows(conn: psycopg.Connection[Any], statement: Statement) -> list[Any]:
    """The rows of one statement, as its plan asked for them ([] when it returns none)."""
    query, params, *shape = statement
    if not shape:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []
    with conn.cursor(row_factory=dict_row) as dicts:
        if shape[0] is Rows.GUARDED:
            guard(dicts)
        dicts.execute(query, params)
        return dicts.fetchall() if dicts.description else []


async def _rows_async(conn: psycopg.AsyncConnection[Any], statement: Statement) -> list[Any]:
    """``_rows`` on an async connection."""
    query, params, *shape = statement
    if not shape:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall() if cursor.description else []
    async with conn.cursor(row_factory=dict_row) as dicts:
        if shape[0] is Rows.GUARDED:
            guard(dicts)
        await dicts.execute(query, params)
        return await dicts.fetchall() if dicts.description else []


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


def run_on_sync(conn: object, plan: Plan[T], twin: str) -> T:
    """Run ``plan`` on a synchronous connection of any kind ``enqueue`` takes; an async one
    is a TypeError that names the call's async twin (``twin``)."""
    sync_conn = frameworks.sync_connection(conn)
    if sync_conn is None:
        plan.close()
        raise TypeError(f"an async connection was given: use {twin} (awaited) with it")
    return run(sync_conn, plan)


async def run_on_async(conn: object, plan: Plan[T]) -> T:
    """``run_on`` for a caller that knows its connection is async (a coroutine, always)."""
    return await run_async(await frameworks.async_connection(conn), plan)
