"""History retention: a small maintenance task of every scheduler replica.

Every ``PURGE_EVERY`` seconds (each replica at its own offset, so that they do not purge at
once) it deletes history rows older than the retention, in batches, and the tombstones of
deleted schedules. It never deletes history a schedule's look-back still reads.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import timedelta
from typing import Any

import psycopg

from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.durations import format_duration
from pgbeat.scheduling.lookback import retention_for

log = logging.getLogger("pgbeat.scheduler")

HISTORY_RETENTION = timedelta(days=30)  # history rows older than this are deleted
PURGE_EVERY = 600.0  # seconds between history purges by one replica
PURGE_BATCH = 10_000
TOMBSTONES_KEPT = timedelta(days=1)  # deleted schedules stay visible to polling replicas


class HistoryPurge:
    """When a replica purges next, and how long it keeps history (lengthened when needed)."""

    def __init__(self, retention: timedelta = HISTORY_RETENTION) -> None:
        self.retention = retention
        self._clamped_to = retention
        self._next = time.monotonic() + PURGE_EVERY * (0.1 + 0.9 * _spread())

    def due(self, clock: float) -> bool:
        """Whether a purge is due at monotonic ``clock`` (then the next one is scheduled)."""
        if clock < self._next:
            return False
        self._next = clock + PURGE_EVERY
        return True

    def run(self, conn: psycopg.Connection[Any], longest_window: timedelta | None) -> int:
        """Delete history older than the retention, and old tombstones; return rows deleted.

        Never history a schedule's look-back still reads: a retention shorter than a
        catch-up window is lengthened to it (logged once), or a restart would find the
        skipped periods of an old pause undecided and enqueue them.
        """
        older_than = retention_for(self.retention, longest_window)
        if older_than != self.retention and older_than != self._clamped_to:
            log.warning(
                "history retention %s is shorter than a schedule's catch-up window: "
                "keeping history for %s",
                format_duration(self.retention),
                format_duration(older_than),
            )
        self._clamped_to = older_than
        return purge_history(conn, older_than)


def purge_history(conn: psycopg.Connection[Any], retention: timedelta) -> int:
    """Delete history older than ``retention``, and old tombstones; return rows deleted."""
    deleted, params = 0, {"older_than": retention, "batch": PURGE_BATCH}
    for _ in range(100):  # at most a million rows per turn
        count = conn.execute(history_sql.HISTORY_PURGE_BATCH, params).rowcount
        deleted += count
        if count < PURGE_BATCH:
            break
    conn.execute(schedule_sql.SCHEDULES_PURGE_TOMBSTONES, {"older_than": TOMBSTONES_KEPT})
    return deleted


def _spread() -> float:
    """A number in [0, 1) of this process, so that replicas do not purge all at once."""
    return (os.getpid() * 2654435761 % 2**32) / 2**32
