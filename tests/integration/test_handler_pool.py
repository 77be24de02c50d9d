"""db.connections.checked_connection: handlers get a working connection soon after kills."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import psycopg_pool
import pytest

from pgbeat.db.connections import checked_connection, make_pool

TERMINATE = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'pgbeat-handlers-test'"""


def test_terminated_connections_are_replaced_without_a_long_wait(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Every pooled connection killed, three times over: each take still answers quickly.

    The pool's own check would wait 1 + 2 + 4 s between the broken connections it finds.
    """
    pool = make_pool(database_url, max_size=4, name="pgbeat-handlers-test")
    pool.open(wait=True)
    try:
        held = [pool.getconn() for _ in range(4)]  # the pool grows to all four
        for c in held:
            pool.putconn(c)
        for _ in range(3):
            killed = conn.execute(TERMINATE).fetchone()
            assert killed is not None and killed[0] >= 1
            started = time.monotonic()
            with checked_connection(pool, timeout=10) as handler_conn:
                assert handler_conn.execute("SELECT 1").fetchone() == (1,)
            assert time.monotonic() - started < 5
    finally:
        pool.close()


def test_no_working_connection_is_a_pool_timeout(database_url: str) -> None:
    """A pool that cannot connect gives up after the timeout, with one clear line."""
    pool = make_pool("postgresql://nobody@127.0.0.1:1/none", max_size=1, name="pgbeat-x")
    pool.open(wait=False)
    try:
        started = time.monotonic()
        with pytest.raises(psycopg_pool.PoolTimeout), checked_connection(pool, timeout=1):
            pass
        assert time.monotonic() - started < 5
    finally:
        pool.close(timeout=1)
