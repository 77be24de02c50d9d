"""Wakes idle workers when jobs are inserted, and tells them of cancels of running jobs,
through LISTEN on a dedicated connection.

psycopg's ``notifies()`` holds its connection's lock while it waits, so the listener
never shares its connection. If notifications stop (a pooler that drops them, an
outage), workers still poll, and learn of cancels from their lease renewals: the listener
only makes pickup and cancels faster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from pgbeat.background import BackgroundLoop
from pgbeat.db.connections import Connector, Outage, ReconnectBackoff
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import outcomes as outcome_sql

log = logging.getLogger("pgbeat.listener")


# NOTIFY pgbeat_cancel, '<job id>': stop that running job. The channel's name is the
# schema's (pgbeat_listen returns it): pgbeat_cancel itself in public.
CANCEL_CHANNEL = "pgbeat_cancel"
QUEUES_PAYLOAD = "queues"  # NOTIFY pgbeat_jobs, 'queues': a queue's settings changed (0019)
READY_PAYLOAD = "ready"  # NOTIFY pgbeat_jobs, 'ready': a fan-out's children wait in place (0032)


class Listener:
    """A daemon thread that calls ``on_notify`` for each notification of new jobs, and
    ``on_cancel`` with the ids of cancelled running jobs (an empty set when it (re)connects:
    a cancel sent while it was not listening may have been missed)."""

    def __init__(
        self,
        url: str,
        on_notify: Callable[[], None],
        check_every: float = 0.5,
        on_cancel: Callable[[set[int]], None] | None = None,
        on_queues: Callable[[], None] | None = None,
    ) -> None:
        self._on_notify = on_notify
        self._on_queues = on_queues or on_notify
        self._on_cancel = on_cancel
        self._check_every = check_every
        self._connector = Connector(url, "pgbeat-listener", backoff=ReconnectBackoff(url, log))
        self._loop = BackgroundLoop("pgbeat-listener", self._step, on_exit=self._connector.close)
        self.connected = threading.Event()
        self._ready = threading.Event()

    def ready_heard(self) -> bool:
        """Whether a large fan-out's children were announced ready since the last call (its
        children wait to be claimed where they are: worker/claiming.py)."""
        if not self._ready.is_set():
            return False
        self._ready.clear()
        return True

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
        conn.execute(claim_sql.JOBS_LISTEN)
        cancel_channel = None
        if self._on_cancel is not None:
            row = conn.execute(outcome_sql.JOBS_LISTEN_CANCEL).fetchone()
            cancel_channel = row[0] if row else CANCEL_CHANNEL
        self._connector.backoff.succeeded()
        self.connected.set()
        self._on_queues()  # settings changed while we were not listening are read again
        self._on_notify()  # anything inserted while we were not listening is due now
        if self._on_cancel is not None:
            self._on_cancel(set())
        while not self._loop.stopping.is_set():
            cancelled: set[int] = set()
            woken = changed = False
            for notify in conn.notifies(timeout=self._check_every, stop_after=1):
                if notify.channel == cancel_channel:
                    cancelled.add(_job_id(notify.payload))
                elif notify.payload == QUEUES_PAYLOAD:
                    changed = True
                else:
                    if notify.payload == READY_PAYLOAD:
                        self._ready.set()
                    woken = True
            cancelled.discard(0)
            if changed:
                self._on_queues()
            if woken:
                self._on_notify()
            if cancelled and self._on_cancel is not None:
                self._on_cancel(cancelled)


def _job_id(payload: str) -> int:
    """The job id a cancel notification carries; 0 for a payload that is not one."""
    text = payload.strip()
    return int(text) if text.isdigit() and len(text) <= 18 else 0
