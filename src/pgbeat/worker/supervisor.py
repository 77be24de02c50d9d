"""``pgbeat worker --processes N``: N worker processes under one command.

Python runs one thread of Python at a time; a machine's other cores need other processes.
The supervisor starts the children, forwards SIGTERM/SIGINT to them, restarts one that
crashes, and exits once every child has stopped.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from pgbeat.signals import handling_stop_signals

log = logging.getLogger("pgbeat.supervisor")

RESTART_DELAY = 1.0  # seconds before a crashed child is started again


def child_arguments(argv: Sequence[str], index: int) -> list[str]:
    """The parent's arguments without --processes; --metrics-port shifted by ``index``."""
    result: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        name, _, inline = item.partition("=")
        if name in ("--processes", "--database-url"):
            i += 1 if inline else 2
            continue
        if name == "--metrics-port":
            port = int(inline) if inline else int(items[i + 1])
            result += ["--metrics-port", str(port + index)]
            i += 1 if inline else 2
            continue
        result.append(item)
        i += 1
    return result


class Supervisor:
    """Keeps ``count`` copies of ``pgbeat ARGS`` running until told to stop."""

    def __init__(self, argv: Sequence[str], count: int, database_url: str) -> None:
        self._argv = list(argv)
        # children get the resolved URL in their environment, not on their command line
        # (where `ps` would show a password), and never start a second embedded server
        self._env = {**os.environ, "DATABASE_URL": database_url}
        self._count = count
        self._stopping = threading.Event()
        self._children: list[subprocess.Popen[bytes] | None] = [None] * count

    def _start(self, index: int) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "pgbeat", *child_arguments(self._argv, index)]
        child = subprocess.Popen(args, env=self._env)
        log.info("started worker process %d (pid %d)", index, child.pid)
        return child

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Forward ``signum`` to every child (a second call forwards it again)."""
        self._stopping.set()
        for child in self._children:
            if child is not None and child.poll() is None:
                child.send_signal(signum)

    def run(self) -> int:
        """Run until stopped; 0 when every child stopped cleanly."""
        self._children = [self._start(i) for i in range(self._count)]
        codes: dict[int, int] = {}
        while len(codes) < self._count:
            for index, child in enumerate(self._children):
                if child is None or index in codes:
                    continue
                code = child.poll()
                if code is None:
                    continue
                if self._stopping.is_set():
                    codes[index] = code
                else:
                    log.error("worker process %d exited with %d; restarting it", index, code)
                    self._stopping.wait(RESTART_DELAY)
                    if self._stopping.is_set():
                        codes[index] = 0  # its crash was reported; shutdown is not its failure
                    else:
                        self._children[index] = self._start(index)
            if not self._stopping.is_set() or len(codes) < self._count:
                time.sleep(0.1)
        return 0 if all(code == 0 for code in codes.values()) else 1


def run_supervised(
    argv: Sequence[str], count: int, database_url: str, install_signals: bool = True
) -> int:
    """Start the supervisor with SIGTERM/SIGINT forwarded to its children."""
    supervisor = Supervisor(argv, count, database_url)
    if not install_signals:
        return supervisor.run()

    def forward(signum: int) -> None:
        log.info("received %s: stopping %d worker processes", signal.Signals(signum).name, count)
        supervisor.stop(signum)

    with handling_stop_signals(forward):
        return supervisor.run()
