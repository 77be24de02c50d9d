"""A loop that repeats one step until it is stopped, in a daemon thread or in the caller's.

Every long-running part of pgbeat (the worker's claim loop, the outcome flusher, the
listener, the heartbeat, the scheduler) is a step that says how long to wait before it
runs again. This module owns the rest, once: the thread, the wait, waking it early,
stopping it, and what happens to an error nobody expected.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

log = logging.getLogger("pgbeat")

UNTIL_WOKEN = math.inf  # a step's pause: wait for wake() or stop(), however long


class BackgroundLoop:
    """Calls ``step()`` until stopped, waiting the seconds it returns between calls.

    ``step`` returns a pause in seconds (0: go on at once, ``UNTIL_WOKEN``), or ``None``
    to end the loop. ``wake()`` cuts a pause short; a wake that arrives while the step
    runs is kept, so the next pause ends at once. ``on_exit`` runs when the loop ends,
    however it ends. In a thread (``start``), an unexpected error ends the loop and is
    kept in ``failure`` and handed to ``on_failure`` (logged when there is none).
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], float | None],
        *,
        on_exit: Callable[[], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.name = name
        self._step = step
        self._on_exit = on_exit
        self._on_failure = on_failure
        self._wake = threading.Event()
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Loop in the calling thread until stopped; an error propagates to the caller."""
        try:
            while not self.stopping.is_set():
                self._wake.clear()
                pause = self._step()
                if pause is None:
                    return
                if pause > 0:
                    self._wake.wait(None if pause == UNTIL_WOKEN else pause)
        finally:
            if self._on_exit is not None:
                self._on_exit()

    def start(self) -> None:
        """Loop in a daemon thread of its own."""
        self._thread = threading.Thread(target=self._run_guarded, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """End the current pause now (or the next one, if a step is running)."""
        self._wake.set()

    def pause(self, seconds: float) -> None:
        """Wait outside a step (a shutdown's last waits, say) until woken or ``seconds`` pass."""
        self._wake.wait(seconds)
        self._wake.clear()

    def stop(self) -> None:
        """Ask the loop to end once its current step returns; does not wait (see ``join``)."""
        self.stopping.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the loop's thread to end; True once it has (or it never started)."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run_guarded(self) -> None:
        try:
            self.run()
        except Exception as exc:
            self.failure = exc
            if self._on_failure is None:
                log.exception("%s stopped on an unexpected error", self.name)
            else:
                self._on_failure(exc)
