"""Wakes idle workers when jobs are inserted, through LISTEN on a dedicated connection.

psycopg's ``notifies()`` holds its connection's lock while it waits, so the listener
never shares its connection. If notifications stop (a pooler that drops them, an
outage), workers still poll: the listener only makes pickup faster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from pgbeat.db import queries
from pgbeat.db.connections import ReconnectBackoff
from pgbeat.db.pooler import connection_options

log = logging.getLogger("pgbeat.listener")


class Listener:
    """A daemon thread that calls ``on_notify`` for each notification of new jobs."""

    def __init__(self, url: str, on_notify: Callable[[], None], check_every: float = 0.5) -> None:
        self._url = url
        self._on_notify = on_notify
        self._check_every = check_every
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._main, name="pgbeat-listener", daemon=True)
        self.connected = threading.Event()
        self._outage = ReconnectBackoff(url, log)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=self._check_every * 4)

    def _main(self) -> None:
        while not self._stopped.is_set():
            try:
                self._listen()
            except psycopg.Error as exc:
                self.connected.clear()
                self._stopped.wait(self._outage.failed(exc))

    def _listen(self) -> None:
        with psycopg.connect(
            self._url,
            autocommit=True,
            connect_timeout=5,
            application_name="pgbeat-listener",
            **connection_options(self._url),  # keepalives: a partition ends in a reconnect
        ) as conn:
            conn.execute(queries.JOBS_LISTEN)
            self._outage.succeeded()
            self.connected.set()
            self._on_notify()  # anything inserted while we were not listening is due now
            while not self._stopped.is_set():
                for _ in conn.notifies(timeout=self._check_every):
                    self._on_notify()
