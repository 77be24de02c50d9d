"""``apply_migrations`` on a psycopg AsyncConnection: its ``_async`` twin applies every
migration once, and the plain call given an async connection returns the twin's coroutine
(db/runner.py's one way for calls on a caller's connection)."""

from __future__ import annotations

import asyncio
import inspect

import psycopg

import pgbeat
from pgbeat.db.migrate import available_migrations


def test_apply_migrations_has_an_async_twin(empty_database_url: str) -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        async with await psycopg.AsyncConnection.connect(
            empty_database_url, autocommit=True
        ) as aconn:
            first = await pgbeat.apply_migrations_async(aconn)
            pending = pgbeat.apply_migrations(aconn)
            assert inspect.iscoroutine(pending)
            second = await pending
            return [m.version for m in first], [m.version for m in second]

    first, second = asyncio.run(scenario())
    assert first == [m.version for m in available_migrations()]
    assert second == []
    with psycopg.connect(empty_database_url) as conn:
        recorded = conn.execute("SELECT version FROM pgbeat_migrations ORDER BY 1").fetchall()
        assert [r[0] for r in recorded] == first
        assert pgbeat.apply_migrations(conn) == []
