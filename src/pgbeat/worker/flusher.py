"""Writes finished runs' outcomes in batches, on a connection of its own, beside the claims.

A PostgreSQL backend runs one statement at a time. With claims and outcome writes on one
connection a worker could go no faster than one backend executes both (measured: ~20,000
jobs/s on 2 cores, where the raw batched loop on 4 connections does ~37,000). On a second
connection the server runs them at once, and the claiming loop never waits for a write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pgbeat.db.connections import Connector, ReconnectBackoff, is_connection_failure
from pgbeat.worker.outcomes import OutcomeBuffer

log = logging.getLogger("pgbeat.worker")

CLOSING_ATTEMPTS = 5  # tries to write the last outcomes at shutdown before giving up on them
CLOSING_PAUSE = 0.2  # seconds between those tries


class OutcomeFlusher:
    """Flushes ``recorder`` when ``batch`` outcomes wait or the oldest has waited ``window``.

    An unexpected error (not a lost connection) is kept in ``failure`` for the worker loop
    to raise: a bug must stop the worker loudly, not leave outcomes unwritten in silence.
    ``on_requeued`` hears of retries and releases written: their jobs are pending again,
    and the claiming loop would otherwise learn of them only at its next poll.
    """

    def __init__(
        self,
        connector: Connector,
        recorder: OutcomeBuffer,
        outage: ReconnectBackoff,
        *,
        batch: int,
        window: float,
        on_failure: Callable[[], None],
        on_requeued: Callable[[], None] | None = None,
    ) -> None:
        self._connector = connector
        self._recorder = recorder
        self._outage = outage
        self._batch = batch
        self._window = window
        self._on_failure = on_failure
        self._on_requeued = on_requeued
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._main, name="pgbeat-outcomes", daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """Outcomes arrived: look again at whether a write is due."""
        self._wake.set()

    def close(self) -> int:
        """Write what is left (a few tries if the database is down), stop; return the unwritten."""
        self._closing.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self._connector.close()
        return self._recorder.waiting()[0]

    def _main(self) -> None:
        failed_while_closing = 0
        while True:
            self._wake.clear()
            closing = self._closing.is_set()
            count, since = self._recorder.waiting()
            if count == 0 or since is None:
                if closing:
                    return
                self._wake.wait()
                continue
            wait = since + self._window - time.monotonic()
            if not closing and count < self._batch and wait > 0:
                self._wake.wait(wait)
                continue
            pause = self._write()
            if pause is None:
                continue
            if self.failure is not None:
                return
            if closing:
                failed_while_closing += 1
                if failed_while_closing >= CLOSING_ATTEMPTS:
                    return
                time.sleep(min(pause, CLOSING_PAUSE))
            else:
                self._closing.wait(pause)

    def _write(self) -> float | None:
        """Flush once; on failure return how long to pause before the next try."""
        try:
            requeued = self._recorder.flush(self._connector.get())
        except Exception as exc:
            if not is_connection_failure(exc):
                log.exception("could not record outcomes; stopping the worker")
                self.failure = exc
                self._on_failure()
                return 0.0
            self._connector.discard()
            return self._outage.failed(exc)
        self._outage.succeeded()
        if requeued and self._on_requeued is not None:
            self._on_requeued()
        return None
