"""Each scheduler and worker registers itself in ``pgbeat_processes`` and beats every few seconds.

``pgbeat status`` and ``pgbeat health`` read that table; rows of processes that died without
a clean exit go stale and are pruned by the next beat of any live process.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgbeat.db.connections import is_connection_failure
from pgbeat.db.sql import processes as process_sql
from pgbeat.observe.liveness import BEAT_EVERY, STALE_AFTER

log = logging.getLogger("pgbeat.heartbeat")


class Heartbeat:
    """Registers this process under ``role`` and refreshes its row every few seconds.

    It beats on its loop's own connection (``beat_if_due``), which saves the process a
    connection and lets a stuck loop go stale, as it should.
    """

    def __init__(
        self,
        url: str,
        role: str,
        *,
        schedules_hash: str | None = None,
        details: dict[str, Any] | None = None,
        every: timedelta = BEAT_EVERY,
    ) -> None:
        from pgbeat.version import __version__

        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._url = url
        self._details = dict(details or {})
        self._row = {
            "id": self.id,
            "role": role,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": __version__,
            "schedules_hash": schedules_hash,
            "details": Jsonb(self._details),
        }
        self._every = every.total_seconds()
        self.next_beat = 0.0  # monotonic time of the next beat_if_due beat

    def stop(self) -> None:
        """Remove this process's row (best effort)."""
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=3) as conn:
                conn.execute(process_sql.PROCESSES_DELETE, {"id": self.id})
        except psycopg.Error:
            pass  # the row goes stale and is pruned by another process

    def beat_if_due(self, conn: psycopg.Connection[Any], now: float) -> None:
        """Beat on ``conn`` when one is due at ``now`` (monotonic seconds)."""
        if now < self.next_beat:
            return
        try:
            self.beat(conn)
        except Exception as exc:
            if is_connection_failure(exc, conn):
                raise  # the loop's outage: still due, it beats once reconnected
            log.exception("heartbeat failed")  # a heartbeat never stops its process's work
        self.next_beat = now + self._every

    def beat_now(self, conn: psycopg.Connection[Any]) -> None:
        """Beat on ``conn`` at once, as ``beat_if_due`` would: what follows relies on it."""
        self.next_beat = 0.0
        self.beat_if_due(conn, time.monotonic())

    def update_details(self, **fields: Any) -> None:
        """Change some of the details sent with the next beat (a worker's running count)."""
        self._details = {**self._details, **fields}
        self._row["details"] = Jsonb(self._details)

    def set_schedules_hash(self, value: str | None) -> None:
        """The fingerprint of the schedules file after a reload, sent with the next beat."""
        self._row["schedules_hash"] = value

    def beat(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(process_sql.PROCESSES_UPSERT, self._row)
        conn.execute(process_sql.PROCESSES_PRUNE, {"stale_after": STALE_AFTER})
