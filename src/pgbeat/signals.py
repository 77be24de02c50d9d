"""SIGTERM and SIGINT (stop) and SIGHUP (reload), handled for a ``with`` block, then restored.

The one place a process installs signal handlers: the CLI's long-running commands and the
``--processes`` supervisor both go through it, so every handler is put back on the way out.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def handling_stop_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """Call ``handler(signum)`` on SIGTERM/SIGINT inside the block (main thread only).

    Signal handlers can only be installed from the main thread; elsewhere (a test running a
    command in a thread) the block runs with the process's handlers unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: Any) -> None:
        handler(signum)

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def handling_reload_signal(handler: Callable[[], None]) -> Iterator[None]:
    """Call ``handler()`` on SIGHUP inside the block (main thread only), as daemons reload.

    The handler must only set a flag: the reload itself happens in the loop that sees it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(_signum: int, _frame: Any) -> None:
        handler()

    previous = signal.signal(signal.SIGHUP, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)
