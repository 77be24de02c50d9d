"""What a failover asks of a scheduler replica, pinned on one server: its claims are durable
when acknowledged, and after a reconnect it looks back for periods the database lacks.

The two-cluster proof is tests/integration/test_failover.py; here the new primary's missing
claims are made by deleting them, and the failover by terminating the replica's backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgbeat
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import wait_for

Conn = psycopg.Connection[Any]


@pytest.fixture
def running(database_url: str) -> Iterator[Scheduler]:
    scheduler = Scheduler(database_url, None, heartbeat=False)
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.stop()
        assert scheduler.join(10)


def _keys(conn: Conn) -> list[str]:
    rows = conn.execute("SELECT unique_key FROM jobs WHERE kind = 'tick' ORDER BY 1")
    return [row[0] for row in rows]


def test_claims_commit_synchronously_whatever_the_database_default(
    conn: Conn, scheduler: Scheduler
) -> None:
    """An acknowledged claim is on the synchronous standby: no lost "enqueued" period."""
    database = sql.Identifier(conn.info.dbname)
    conn.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(database))
    try:
        row = scheduler._connector.get().execute("SHOW synchronous_commit").fetchone()
    finally:
        scheduler._connector.close()
    assert row == ("on",)


@pytest.mark.slow
def test_a_reconnect_looks_back_for_periods_the_database_lacks(
    conn: Conn, running: Scheduler
) -> None:
    pgbeat.upsert_schedule(
        conn, "tick", every="1s", kind="tick", catch_up="all", catch_up_window="1m"
    )
    wait_for(lambda: len(_keys(conn)) >= 3, timeout=15, message="three periods")
    lost = _keys(conn)[-2:]  # acknowledged, then lost with the old primary
    conn.execute("DELETE FROM jobs WHERE unique_key = ANY(%s)", (lost,))
    conn.execute(
        "DELETE FROM pgbeat_schedule_history WHERE schedule = 'tick'"
        " AND fire_at = ANY(SELECT split_part(k, '@', 2)::timestamptz FROM unnest(%s::text[]) k)",
        (lost,),
    )
    assert not set(lost) & set(_keys(conn))
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'pgbeat-scheduler' AND datname = current_database()"
    )
    wait_for(
        lambda: set(lost) <= set(_keys(conn)),
        timeout=15,
        message="the lost periods enqueued again after the reconnect",
    )
    keys = _keys(conn)
    assert len(keys) == len(set(keys))
