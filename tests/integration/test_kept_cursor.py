"""The cursor kept for the claim's and the completion's statements: one per connection,
a new one once that connection is gone, and rows that are each statement's own."""

from __future__ import annotations

from typing import Any

import psycopg

from pgbeat.db.kept_cursor import KeptCursor


def test_one_cursor_serves_a_connection_statement_after_statement(
    conn: psycopg.Connection[Any],
) -> None:
    kept = KeptCursor()
    first = kept.on(conn)
    assert first.execute("SELECT 1, 'a'").fetchall() == [(1, "a")]
    again = kept.on(conn)
    assert again is first
    # another statement, other columns and types: its own rows and description
    assert again.execute("SELECT now() > '2000-01-01'::timestamptz").fetchall() == [(True,)]
    assert [column.name for column in again.description or ()] == ["?column?"]
    assert kept.on(conn).execute("SELECT %s::int + 1", (41,)).fetchone() == (42,)


def test_a_new_connection_or_a_closed_cursor_gets_a_new_cursor(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    kept = KeptCursor()
    first = kept.on(conn)
    with psycopg.connect(database_url, autocommit=True) as other:
        second = kept.on(other)  # the connector reconnected: the old cursor is not used
        assert second is not first
        assert second.connection is other
        assert second.execute("SELECT pg_backend_pid()").fetchone() == (other.info.backend_pid,)
    second.close()
    third = kept.on(conn)
    assert third is not first and third.connection is conn
    third.close()
    assert kept.on(conn) is not third  # a closed cursor is replaced
