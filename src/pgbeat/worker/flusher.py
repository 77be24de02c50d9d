"""Writes finished runs' outcomes in batches, on a connection of its own, beside the claims.

A PostgreSQL backend runs one statement at a time. With claims and outcome writes on one
connection a worker could go no faster than one backend executes both. On a second
connection the server runs them at once, and the claiming loop never waits for a write
(docs/benchmarks.md has the measurements).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from pgbeat.background import UNTIL_WOKEN, BackgroundLoop
from pgbeat.db.connections import Connector, Outage
from pgbeat.worker.outcomes import OutcomeBuffer

log = logging.getLogger("pgbeat.worker")

CLOSING_ATTEMPTS = 5  # tries to write the last outcomes at shutdown before giving up on them
CLOSING_PAUSE = 0.2  # seconds between those tries


class OutcomeFlusher:
    """Flushes ``recorder`` when ``batch`` outcomes wait, the oldest has waited ``window``, or
    the oldest of a watched queue (``recorder.freeing_since``) ``freeing_window``.

    An unexpected error (not a lost connection) is kept in ``failure`` for the worker loop
    to raise: a bug must stop the worker loudly, not leave outcomes unwritten in silence.
    ``on_requeued`` hears of retries and releases written (their jobs are pending again),
    and of workflow steps ended (their dependants may have been released): the claiming
    loop would otherwise learn of them only at a notification or its next poll.
    ``on_freed`` hears of the recorder's watched queues whose jobs left running: a
    limited queue's slot is free once the outcome is committed, not when the handler
    returns, so the claiming loop waits for this, not for the slot.
    """

    def __init__(
        self,
        connector: Connector,
        recorder: OutcomeBuffer,
        *,
        batch: int,
        window: float,
        freeing_window: float | None = None,
        on_failure: Callable[[], None],
        on_requeued: Callable[[], None] | None = None,
        on_freed: Callable[[Mapping[str, float]], None] | None = None,
    ) -> None:
        self._connector = connector
        self._recorder = recorder
        self._batch = batch
        self._window = window
        self._freeing_window = window if freeing_window is None else freeing_window
        self._on_failure = on_failure
        self._on_requeued = on_requeued
        self._on_freed = on_freed
        self._closing = threading.Event()
        self._failed_while_closing = 0
        self._opened = False  # the connection is opened before the first outcome needs it
        self._loop = BackgroundLoop("pgbeat-outcomes", self._step, on_failure=self._failed)

    @property
    def failure(self) -> BaseException | None:
        return self._loop.failure

    def start(self) -> None:
        self._loop.start()

    def poke(self) -> None:
        """Outcomes arrived: look again at whether a write is due."""
        self._loop.wake()

    def close(self) -> int:
        """Write what is left (a few tries if the database is down), stop; return the unwritten."""
        self._closing.set()
        self._loop.wake()
        self._loop.join()
        self._connector.close()
        return self._recorder.waiting()[0]

    def _step(self) -> float | None:
        """Write when a batch is full or its window ended; else say how long to wait."""
        closing = self._closing.is_set()
        if not self._opened:  # the first job's outcome would wait for a connection to open
            self._opened = True  # (20-30 ms, serial before a workflow's next step can start)
            self._connector.run(lambda conn: None)  # an outage now is met again at a write
        count, since = self._recorder.waiting()
        if count == 0 or since is None:
            return None if closing else UNTIL_WOKEN
        wait = since + self._window
        freeing = self._recorder.freeing_since()
        if freeing is not None:  # a limited queue's slot waits for this write
            wait = min(wait, freeing + self._freeing_window)
        wait -= time.monotonic()
        if not closing and count < self._batch and wait > 0:
            return wait
        result = self._connector.run(self._recorder.flush)
        if not isinstance(result, Outage):
            if result.requeued and self._on_requeued is not None:
                self._on_requeued()
            if result.freed and self._on_freed is not None:
                self._on_freed(result.freed)
            return 0.0
        # A backoff that new outcomes could cut short would hammer a database that is down.
        if not closing:
            self._closing.wait(result.pause)
            return 0.0
        self._failed_while_closing += 1
        if self._failed_while_closing >= CLOSING_ATTEMPTS:
            return None
        time.sleep(min(result.pause, CLOSING_PAUSE))
        return 0.0

    def _failed(self, exc: BaseException) -> None:
        log.error("could not record outcomes; stopping the worker", exc_info=exc)
        self._on_failure()
