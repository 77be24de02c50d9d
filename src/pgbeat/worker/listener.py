"""Wakes idle workers when jobs are inserted, through LISTEN on a dedicated connection.

psycopg's ``notifies()`` holds its connection's lock while it waits, so the listener
never shares its connection. If notifications stop (a pooler that drops them, an
outage), workers still poll: the listener only makes pickup faster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from pgbeat.background import BackgroundLoop
from pgbeat.db import queries
from pgbeat.db.connections import Connector, Outage, ReconnectBackoff

log = logging.getLogger("pgbeat.listener")


class Listener:
    """A daemon thread that calls ``on_notify`` for each notification of new jobs."""

    def __init__(self, url: str, on_notify: Callable[[], None], check_every: float = 0.5) -> None:
        self._on_notify = on_notify
        self._check_every = check_every
        self._connector = Connector(url, "pgbeat-listener", backoff=ReconnectBackoff(url, log))
        self._loop = BackgroundLoop("pgbeat-listener", self._step, on_exit=self._connector.close)
        self.connected = threading.Event()

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        self._loop.join(timeout=self._check_every * 4)

    def _step(self) -> float:
        """Listen until stopped or the connection fails; then the pause before trying again."""
        try:
            result = self._connector.run(self._listen)
        except psycopg.Error as exc:  # not an outage; but listening only speeds pickup up
            result = self._connector.failed(exc)
        self.connected.clear()
        return result.pause if isinstance(result, Outage) else 0.0

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(queries.JOBS_LISTEN)
        self._connector.backoff.succeeded()
        self.connected.set()
        self._on_notify()  # anything inserted while we were not listening is due now
        while not self._loop.stopping.is_set():
            for _ in conn.notifies(timeout=self._check_every):
                self._on_notify()
