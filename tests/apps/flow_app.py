"""Handlers for flow-control races (`pgbeat worker tests.apps.flow_app:registry`), and the audit.

Every run of a ``span`` job records its start and end (database clock) in ``spans``, so a
test can check that no two runs of one limit key overlapped, how many of a queue ran at
once, and how many started in any window.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import psycopg_pool

import pgbeat

registry = pgbeat.Registry()

SETUP = """
CREATE TABLE IF NOT EXISTS spans (
    job_id bigint NOT NULL, queue text NOT NULL, limit_key text, pid int NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz
);
"""


_pool: psycopg_pool.ConnectionPool[Any] | None = None
_pool_lock = threading.Lock()


def _connection() -> Any:
    """A connection from this process's own small pool: 4 workers x 50 slots must not
    open 200 connections (a handler's job.connection() pool grows to the slots)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            url = os.environ["DATABASE_URL"]
            _pool = psycopg_pool.ConnectionPool(
                url, min_size=1, max_size=3, kwargs={"autocommit": True}, open=True
            )
    return _pool.connection(timeout=60)


@registry.handler("span")
def span(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    """Record the start, sleep ``payload["sleep"]`` seconds, record the end."""
    with _connection() as conn:
        conn.execute(
            "INSERT INTO spans (job_id, queue, limit_key, pid) VALUES (%s, %s, %s, %s)",
            (job.id, job.queue, job.limit_key, os.getpid()),
        )
    time.sleep(float(payload.get("sleep", 0)))
    with _connection() as conn:
        conn.execute(
            "UPDATE spans SET ended_at = clock_timestamp() "
            "WHERE job_id = %s AND pid = %s AND ended_at IS NULL",
            (job.id, os.getpid()),
        )


@dataclass(frozen=True)
class Span:
    job_id: int
    queue: str
    limit_key: str | None
    pid: int
    started_at: datetime
    ended_at: datetime | None


def spans(conn: psycopg.Connection[Any]) -> list[Span]:
    rows = conn.execute(
        "SELECT job_id, queue, limit_key, pid, started_at, ended_at FROM spans ORDER BY started_at"
    ).fetchall()
    return [Span(*row) for row in rows]


def key_overlaps(found: list[Span], allowed: int = 1) -> int:
    """Moments where more than ``allowed`` runs of one limit key were running at once.

    A run without an end (its process was killed) is left out: its worker is gone.
    """
    by_key: dict[str, list[Span]] = {}
    for s in found:
        if s.limit_key is not None and s.ended_at is not None:
            by_key.setdefault(s.limit_key, []).append(s)
    return sum(max(0, most_at_once(group) - allowed) for group in by_key.values())


def most_at_once(found: list[Span]) -> int:
    """The largest number of these (ended) runs running at one moment."""
    events = sorted(
        [(s.started_at, 1) for s in found if s.ended_at is not None]
        + [(s.ended_at, -1) for s in found if s.ended_at is not None]
    )  # at equal times an end (-1) sorts first: touching runs do not overlap
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def most_starts_in_window(found: list[Span], window: timedelta) -> int:
    """The largest number of starts inside any window of length ``window``."""
    starts = sorted(s.started_at for s in found)
    most = first = 0
    for last, moment in enumerate(starts):
        while moment - starts[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most
