"""The one runner of plans: a call on a caller's connection, written once as a generator of
statements and driven here by a sync or an async loop, so that the sync and async faces
of a call cannot drift apart.

A plan yields ``(statement, params)`` and is sent each statement's rows (tuples); what it
returns is the call's result. A plan that reads rows by column name yields
``(statement, params, DICTS)``, or ``GUARDED`` where a stored value may be one Python
cannot hold (db/guarded.py: it loads as ``Unreadable`` instead of ending the read).

One way to take an async connection, the same across the public API: every call on a
caller's connection is ``async_aware`` and has an ``_async`` twin beside it. The plain call
takes any synchronous connection (psycopg, SQLAlchemy, Django: ``frameworks.sync_connection``)
and runs at once; given an async one (psycopg, SQLAlchemy) it returns its twin's coroutine
(``await pgbeat.pause_queue(aconn, "q")`` is ``await pgbeat.pause_queue_async(aconn, "q")``,
arguments checked when it is awaited). A twin takes its connection with ``run_on_async``;
given a synchronous one it raises the one TypeError of ``frameworks.async_connection``. A
missing table is translated to ``NotMigrated`` once, here (``run``, ``run_async``).
"""

from __future__ import annotations

import enum
import functools
import sys
from collections.abc import Callable, Coroutine, Generator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any, Concatenate, Generic, LiteralString, ParamSpec, TypeVar, overload

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from pgbeat.db import frameworks, schema_errors
from pgbeat.db.guarded import guard

T = TypeVar("T")
P = ParamSpec("P")


class Rows(enum.Enum):
    """How a statement's rows reach its plan, when not as tuples."""

    DICTS = "dicts"
    GUARDED = "guarded"  # dicts, a value Python cannot hold loaded as Unreadable


DICTS, GUARDED = Rows.DICTS, Rows.GUARDED
Statement = (
    tuple[LiteralString, Mapping[str, Any]]
    | tuple[LiteralString, Mapping[str, Any], Rows]
    | tuple[bytes, None]  # a migration's script: several statements, no parameters
)
Plan = Generator[Statement, list[Any], T]
# Plans run one after another, each in a transaction of its own, each sent what the one
# before it returned (``run_each``: the migrations).
Transactions = Generator[Plan[Any], Any, T]


@schema_errors.translate
def run(conn: psycopg.Connection[Any], plan: Plan[T], *, together: bool = False) -> T:
    """Run ``plan``'s statements on ``conn``, in its current transaction.

    On an autocommit connection the first statement commits alone (most calls have only
    one), and the rest in one transaction of their own: a supersede never commits without
    the job that replaces it. ``together``: all of them in one (a batch of several kinds).
    """
    if together:
        with own_transaction(conn):
            return run(conn, plan)
    try:
        statement = plan.send(_rows(conn, next(plan)))
    except StopIteration as finished:
        return _returned(finished, plan)
    with own_transaction(conn):
        return _drive(conn, plan, statement)


@schema_errors.translate
async def run_async(
    conn: psycopg.AsyncConnection[Any], plan: Plan[T], *, together: bool = False
) -> T:
    """``run`` on an async connection."""
    if together:
        async with own_transaction_async(conn):
            return await run_async(conn, plan)
    try:
        statement = plan.send(await _rows_async(conn, next(plan)))
    except StopIteration as finished:
        return _returned(finished, plan)
    async with own_transaction_async(conn):
        return await _drive_async(conn, plan, statement)


def run_each(conn: psycopg.Connection[Any], plans: Transactions[T]) -> T:
    """Run each plan ``plans`` yields in a transaction of its own (``conn.transaction()``:
    a savepoint inside the caller's), and send it back what that plan returned. A missing
    table is not ``NotMigrated`` here: the migrations are what creates the tables."""
    try:
        plan = next(plans)
        while True:
            with conn.transaction():
                returned = _drive(conn, plan)
            plan = plans.send(returned)
    except StopIteration as finished:
        return _returned(finished, plans)


async def run_each_async(conn: psycopg.AsyncConnection[Any], plans: Transactions[T]) -> T:
    """``run_each`` on an async connection."""
    try:
        plan = next(plans)
        while True:
            async with conn.transaction():
                returned = await _drive_async(conn, plan)
            plan = plans.send(returned)
    except StopIteration as finished:
        return _returned(finished, plans)


def _drive(conn: psycopg.Connection[Any], plan: Plan[T], statement: Statement | None = None) -> T:
    """Run ``plan`` from ``statement`` (from its start when None) to its end."""
    try:
        statement = next(plan) if statement is None else statement
        while True:
            statement = plan.send(_rows(conn, statement))
    except StopIteration as finished:
        return _returned(finished, plan)


async def _drive_async(
    conn: psycopg.AsyncConnection[Any], plan: Plan[T], statement: Statement | None = None
) -> T:
    """``_drive`` on an async connection."""
    try:
        statement = next(plan) if statement is None else statement
        while True:
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


def _returned(finished: StopIteration, plan: Generator[Any, Any, T]) -> T:
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


async def run_on_async(conn: object, plan: Plan[T], *, together: bool = False) -> T:
    """Run ``plan`` on an async connection (psycopg, or SQLAlchemy's on psycopg): a twin's body."""
    return await run_async(await frameworks.async_connection(conn), plan, together=together)


class AsyncAware(Generic[P, T]):
    """A public call on a caller's connection: a synchronous one (psycopg, SQLAlchemy,
    Django) runs it at once; an async one returns the coroutine of its ``_async`` twin."""

    def __init__(self, call: Callable[Concatenate[Any, P], T], twin: str) -> None:
        functools.update_wrapper(self, call)
        self._call = call
        self._twin = twin

    @property
    def twin(self) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
        """The ``_async`` twin, defined beside the call in its module."""
        found: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]
        found = getattr(sys.modules[self._call.__module__], self._twin)
        return found

    @overload
    def __call__(self, conn: frameworks.SyncCaller, /, *args: P.args, **kwargs: P.kwargs) -> T: ...

    @overload
    def __call__(
        self, conn: frameworks.AsyncCaller, /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, T]: ...

    def __call__(self, conn: object, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        sync_conn = frameworks.sync_connection(conn)
        if sync_conn is None:
            return self.twin(conn, *args, **kwargs)
        return self._call(sync_conn, *args, **kwargs)


def async_aware(
    twin: str,
) -> Callable[[Callable[Concatenate[Any, P], T]], AsyncAware[P, T]]:
    """Make a call on a synchronous connection async-aware: given an async connection it
    returns the coroutine of ``twin`` (the name of its ``_async`` twin in the same module).
    The call itself then always gets a ``psycopg.Connection``."""

    def made(call: Callable[Concatenate[Any, P], T]) -> AsyncAware[P, T]:
        return AsyncAware(call, twin)

    return made
