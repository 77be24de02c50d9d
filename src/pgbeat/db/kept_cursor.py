"""A cursor kept for a connection's hot statements (the claim, the completion).

``conn.execute`` makes a cursor for every statement, and with it a new map of adapters
that looks up each parameter's dumper and each column's loader again: 24 of the 85 µs
of CPU that one execute of a kept plan with two parameters cost here (one thread, 3,000
in a row). A cursor kept across statements keeps them. One cursor serves one statement
at a time: its rows are read before it runs the next (a pipeline sends it at most once).
"""

from __future__ import annotations

from typing import Any

import psycopg


class KeptCursor:
    """The cursor of the last connection it was asked for (a new one after a reconnect).

    Used by one thread, as the connection it is for.
    """

    __slots__ = ("_cursor",)

    def __init__(self) -> None:
        self._cursor: psycopg.Cursor[Any] | None = None

    def on(self, conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
        cursor = self._cursor
        if cursor is None or cursor.connection is not conn or cursor.closed:
            cursor = self._cursor = conn.cursor()
        return cursor
