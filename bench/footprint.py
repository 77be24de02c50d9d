"""What a queue leaves behind per job: WAL bytes, dead tuples, growth of tables and indexes.

Each system's module calls ``measure`` with its own enqueue (in bulk) and drain. WAL is
read as ``pg_current_wal_lsn()`` deltas, which count every database of the server: run it
on a server of its own (see docs/benchmarks.md). Autovacuum is turned off on the system's
tables for the measurement, so the dead tuples counted are those the drain left, not what
a vacuum happened to clear. Standard library and psycopg only: the peers import it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from bench.measure import DEAD, SIZE, WAL, Result

STATS_SETTLE = 1.5  # seconds for ended backends' statistics to reach pg_stat_user_tables

# The tables of the current schema (the system's), with their heap and index sizes.
TABLES = """
SELECT c.oid::regclass::text, pg_table_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class AS c
WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
ORDER BY 1"""


def tables(conn: psycopg.Connection[Any]) -> list[tuple[str, int, int]]:
    return [(str(n), int(h), int(i)) for n, h, i in conn.execute(TABLES).fetchall()]


def autovacuum_off(conn: psycopg.Connection[Any]) -> None:
    for name, _, _ in tables(conn):
        conn.execute(
            sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(sql.Identifier(name))
        )


def wal_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def dead_tuples(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    """Dead tuples in the system's tables: exact with pgstattuple, else the statistics."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    except psycopg.Error:
        time.sleep(STATS_SETTLE)
        row = conn.execute(
            "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
            " WHERE schemaname = current_schema()"
        ).fetchone()
        return (int(row[0]) if row else 0), "pg_stat_user_tables.n_dead_tup"
    total = 0
    for name, _, _ in tables(conn):
        row = conn.execute("SELECT dead_tuple_count FROM pgstattuple(%s)", (name,)).fetchone()
        total += int(row[0]) if row else 0
    return total, "pgstattuple"


def measure(
    system: str,
    url: str,
    jobs: int,
    config: str,
    enqueue: Callable[[], None],
    drain: Callable[[], None],
    variant: str = "default",
) -> list[Result]:
    """Enqueue ``jobs`` and drain them on empty tables; three results per system.

    One CHECKPOINT before the enqueue, none after: every system then pays full-page
    images only for the pages that existed before it began (almost none).
    """
    with psycopg.connect(url, autocommit=True) as conn:
        autovacuum_off(conn)
        conn.execute("VACUUM")
        conn.execute("CHECKPOINT")
        empty = tables(conn)
        start = wal_lsn(conn)
        enqueue()
        enqueued = wal_lsn(conn)
        size_enqueued = tables(conn)
        drain()
        drained = wal_lsn(conn)
        size_drained = tables(conn)
        dead, counted_by = dead_tuples(conn)
    per_million = 1_000_000 / jobs
    # growth from the empty tables: their fixed few pages are not a cost per job
    heap = sum(h for _, h, _ in size_drained) - sum(h for _, h, _ in empty)
    index = sum(i for _, _, i in size_drained) - sum(i for _, _, i in empty)
    grown = sum(h + i for _, h, i in size_enqueued) - sum(h + i for _, h, i in empty)
    enqueue_wal, drain_wal = enqueued - start, drained - enqueued
    common = {"jobs": jobs, "how": config}
    return [
        Result(
            system,
            WAL,
            variant,
            round((drained - start) / jobs, 1),
            "B/job",
            config,
            {
                **common,
                "enqueue_bytes_per_job": round(enqueue_wal / jobs, 1),
                "drain_bytes_per_job": round(drain_wal / jobs, 1),
                "wal_bytes": drained - start,
            },
        ),
        Result(
            system,
            DEAD,
            variant,
            round(dead / jobs, 3),
            "dead/job",
            config,
            {**common, "dead_tuples": dead, "counted_by": counted_by},
        ),
        Result(
            system,
            SIZE,
            variant,
            round((heap + index) * per_million / 2**20, 1),
            "MB",
            config,
            {
                **common,
                "heap_mb_per_million": round(heap * per_million / 2**20, 1),
                "index_mb_per_million": round(index * per_million / 2**20, 1),
                "after_enqueue_mb_per_million": round(grown * per_million / 2**20, 1),
                "tables": {name: {"heap": h, "index": i} for name, h, i in size_drained},
            },
        ),
    ]
