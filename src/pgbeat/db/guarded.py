"""Reading rows some of whose values Python cannot hold, one bad row apart from the others.

psycopg raises while decoding a ``timestamptz`` of ±infinity or outside years 1-9999, an
``interval`` beyond ``timedelta``, or JSON nested deeper than Python's recursion limit, and
the error ends the whole read without naming the row. On a ``guard``-ed cursor such a value
loads as an ``Unreadable`` marker instead, so the reader skips that row by name and keeps
the rest (pgbeat_schedules rows written with SQL: scheduling/catalog.py, state.py).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import abc
from psycopg.adapt import Buffer, Loader
from psycopg.rows import dict_row

# What decoding one value can raise: psycopg's range checks, json's recursion limit.
DECODE_ERRORS = (psycopg.DataError, ValueError, OverflowError, RecursionError)
# The types whose values can be out of Python's range (the others always decode).
GUARDED_TYPES = ("timestamptz", "timestamp", "date", "interval", "json", "jsonb")


@dataclass(frozen=True)
class Unreadable:
    """A value of a row that could not be decoded, and why (psycopg's one line)."""

    reason: str

    def __str__(self) -> str:
        return self.reason


def guard(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> None:
    """Make ``cursor`` load an undecodable value of ``GUARDED_TYPES`` as ``Unreadable``."""
    adapters = cursor.adapters
    for name in GUARDED_TYPES:
        info = adapters.types.get(name)
        if info is None:
            continue
        for fmt in (psycopg.pq.Format.TEXT, psycopg.pq.Format.BINARY):
            inner = adapters.get_loader(info.oid, fmt)
            if inner is not None:
                adapters.register_loader(info.oid, _guarded(inner))


def unreadable(row: Mapping[str, Any]) -> str | None:
    """``column: reason`` for the first value of ``row`` that could not be decoded, else None."""
    for column, value in row.items():
        if isinstance(value, Unreadable):
            return f"{column} cannot be read: {value.reason}"
    return None


@functools.lru_cache(maxsize=64)  # one class per loader: a class made per read is never freed
def _guarded(inner: type[abc.Loader]) -> type[Loader]:
    class Guarded(Loader):
        format = inner.format

        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._inner = inner(oid, context)

        def load(self, data: Buffer) -> Any:
            try:
                return self._inner.load(data)
            except DECODE_ERRORS as exc:
                return Unreadable(str(exc).strip().partition("\n")[0][:200] or type(exc).__name__)

    return Guarded


def rows(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> list[dict[str, Any]]:
    """All rows of ``query`` as dicts; a value Python cannot hold (a date of infinity, JSON
    nested too deeply) loads as ``Unreadable``, so one row never fails a page or a listing."""
    with conn.cursor(row_factory=dict_row) as cursor:
        guard(cursor)
        return cursor.execute(query, params).fetchall()


def one(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> dict[str, Any] | None:
    """The first row of ``query`` as a dict, or None (values guarded as in ``rows``)."""
    with conn.cursor(row_factory=dict_row) as cursor:
        guard(cursor)
        return cursor.execute(query, params).fetchone()
