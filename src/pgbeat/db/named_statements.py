"""Statements kept by name on a connection (SQL ``PREPARE``), run together by ``EXECUTE`` in
one simple query: what a limited claim sends instead of a pipeline.

A limited claim is two statements in one implicit transaction, the queue's row lock and
then the claim, each with a snapshot of its own (worker/locked_claim.py says why). Sent in
a pipeline they cost the claim loop 221 µs of CPU for a claim of an empty budget (the
pipeline's entry, two queued executes, its sync and its results' generator loop); one
simple query of ``EXECUTE lock(...); EXECUTE claim(...)`` is one execute, 124 µs
(``python -m bench.named_claims``; docs/benchmarks.md, "Round four, sixteenth session").
The simple protocol runs the statements of one query as one implicit transaction
(committed at its end, rolled back if one fails), each under READ COMMITTED with a new
snapshot, as a pipeline does. For one statement alone psycopg's prepared execute costs
less (its values bound, not quoted into the query): the plain claims stay so.

Each statement is prepared once per connection, in a statement of its own, its parameters
typed by PARAMETER_TYPES; its values go into the ``EXECUTE`` as literals quoted by psycopg
(``sql.Literal``: the driver's own escaping). Not for a connection behind a transaction
pooler (``prepare_threshold`` None: a prepared statement belongs to a server session the
next transaction may not have) nor inside a pipeline (no simple query there): ``usable``
says so, and the caller sends its pipeline instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg import errors, sql
from psycopg.pq import PipelineStatus

from pgbeat.db.sql import session as session_sql

# The type of each parameter a named statement may take, by name (the limited claims' and
# QUEUES_LOCK's); a statement naming another is refused when it is first named.
PARAMETER_TYPES: dict[str, str] = {
    "queue": "text",
    "limit": "int",
    "lease": "interval",
    "kinds": "text[]",
    "scan": "int",
    "keys": "int",
    "after": "text",
    "steps": "int",
    "after_priority": "smallint",
    "after_run_at": "timestamptz",
    "after_id": "bigint",
}
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@dataclass(frozen=True)
class Named:
    """One statement as a named one: its name, its parameters in ``$n`` order, the
    ``PREPARE`` that keeps it and the head of the ``EXECUTE`` that runs it."""

    name: str
    parameters: tuple[str, ...]
    prepare: bytes
    execute: bytes


_NAMED: dict[str, Named] = {}  # by statement text


def named(statement: LiteralString) -> Named:
    """``statement`` (psycopg's ``%(name)s`` placeholders) as a named statement, its name
    drawn from its text: the same in every thread and process, and a name already
    prepared on a session (by another NamedStatements) is the same statement."""
    found = _NAMED.get(statement)
    if found is not None:
        return found
    parameters: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"  # psycopg's escaped percent sign
        if name not in PARAMETER_TYPES:
            raise ValueError(f"no type known for the parameter {name!r} of a named statement")
        if name not in parameters:
            parameters.append(name)
        return f"${parameters.index(name) + 1}"

    text = _PLACEHOLDER.sub(number, statement)
    types = ", ".join(PARAMETER_TYPES[p] for p in parameters)
    types = f" ({types})" if types else ""
    name = "pgbeat_" + hashlib.blake2b(f"{types} {text}".encode(), digest_size=10).hexdigest()
    prepare = session_sql.SESSION_PREPARE.format(name=name, types=types, text=text)
    execute = session_sql.SESSION_EXECUTE.format(name=name)
    found = _NAMED[statement] = Named(name, tuple(parameters), prepare.encode(), execute.encode())
    return found


class NamedStatements:
    """The statements prepared on the last connection this ran on (a new set after a
    reconnect). Used by one thread, as the connection it is for."""

    __slots__ = ("_conn", "_ready")

    def __init__(self) -> None:
        self._conn: psycopg.Connection[Any] | None = None
        self._ready: set[str] = set()

    @staticmethod
    def usable(conn: psycopg.Connection[Any]) -> bool:
        """Whether ``conn`` may keep named statements and run a simple query now."""
        return (
            conn.prepare_threshold is not None and conn.pgconn.pipeline_status == PipelineStatus.OFF
        )

    def run(
        self,
        conn: psycopg.Connection[Any],
        cursor: psycopg.Cursor[Any],
        steps: Sequence[tuple[LiteralString, Mapping[str, Any]]],
    ) -> psycopg.Cursor[Any]:
        """Run ``steps`` (statement, parameters) in one simple query on ``cursor`` (of
        ``conn``, in autocommit), each statement prepared first where it is not yet;
        returns ``cursor`` on the last statement's rows. A statement found gone (a
        ``DEALLOCATE`` or ``DISCARD`` by someone else) is prepared again, once."""
        if conn is not self._conn:
            self._conn, self._ready = conn, set()
        statements = [(named(statement), params) for statement, params in steps]
        for attempt in (1, 2):
            for one, _ in statements:
                if one.name not in self._ready:
                    self._prepare(conn, one)
            query = b";\n".join(self._execute(conn, one, params) for one, params in statements)
            try:
                cursor.execute(query, prepare=False)
                break
            except errors.InvalidSqlStatementName:
                if attempt == 2:
                    raise
                self._ready.clear()
        while cursor.nextset():
            pass
        return cursor

    def _prepare(self, conn: psycopg.Connection[Any], one: Named) -> None:
        # prepared already on this session (its name is its text's): the same statement
        with contextlib.suppress(errors.DuplicatePreparedStatement):
            conn.execute(one.prepare, prepare=False)
        self._ready.add(one.name)

    @staticmethod
    def _execute(conn: psycopg.Connection[Any], one: Named, params: Mapping[str, Any]) -> bytes:
        if not one.parameters:
            return one.execute
        values = b", ".join(sql.Literal(params[p]).as_bytes(conn) for p in one.parameters)
        return one.execute + b"(" + values + b")"
