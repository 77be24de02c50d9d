"""db/guarded.py: a guarded read makes no new class per read (a replica guards every refresh,
once a second: a class per call grew the scheduler by 0.5 MB a minute in the hour soak)."""

from __future__ import annotations

from typing import Any

import psycopg

from pgbeat.db.guarded import GUARDED_TYPES, Unreadable, guard


def _loaders(cursor: psycopg.Cursor[Any]) -> list[type[Any]]:
    found = []
    for name in GUARDED_TYPES:
        info = cursor.adapters.types.get(name)
        assert info is not None
        for fmt in (psycopg.pq.Format.TEXT, psycopg.pq.Format.BINARY):
            loader = cursor.adapters.get_loader(info.oid, fmt)
            if loader is not None:
                found.append(loader)
    return found


def test_every_guarded_cursor_shares_the_same_loader_classes(
    conn: psycopg.Connection[Any],
) -> None:
    seen = []
    for _ in range(3):
        with conn.cursor() as cursor:
            guard(cursor)
            seen.append(_loaders(cursor))
            row = cursor.execute("SELECT 'infinity'::timestamptz, now()").fetchone()
            assert row is not None and isinstance(row[0], Unreadable) and row[1] is not None
    assert seen[0] == seen[1] == seen[2]
    assert all(loader.__name__ == "Guarded" for loader in seen[0])
