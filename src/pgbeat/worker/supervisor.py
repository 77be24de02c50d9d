"""``pgbeat worker --processes N``: N worker processes under one command.

Python runs one thread of Python at a time; a machine's other cores need other processes.
The supervisor starts the children, forwards SIGTERM/SIGINT to them, restarts one that
crashes, and exits once every child has stopped. Each child is told its supervisor's pid
(``PGBEAT_SUPERVISOR_PID``): it refuses to become a supervisor itself, and it stops (within
its grace period) when the supervisor dies, even by ``kill -9``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

from pgbeat.background import BackgroundLoop
from pgbeat.signals import handling_stop_signals

log = logging.getLogger("pgbeat.supervisor")

RESTART_DELAY = 1.0  # seconds before a crashed child is started again
SUPERVISOR_ENV = "PGBEAT_SUPERVISOR_PID"  # set in each child: the pid of its supervisor
PARENT_CHECK_EVERY = 0.5  # seconds between a child's checks that its supervisor lives

ChildArguments = Callable[[int], Sequence[str]]


def child_command(arguments: Sequence[str]) -> list[str]:
    """``pgbeat ARGS`` in this interpreter, importing the installed pgbeat.

    ``-P``: without it ``python -m`` puts the working directory first on ``sys.path``,
    and a ``pgbeat.py`` (or ``pgserver.py``...) there would be imported instead.
    """
    return [sys.executable, "-P", "-m", "pgbeat", *arguments]


class Supervisor:
    """Keeps ``count`` worker processes running until told to stop.

    ``arguments(i)`` is child ``i``'s command line after ``pgbeat``, built from the parsed
    settings (the CLI's business); the database URL goes through the environment.
    """

    def __init__(self, arguments: ChildArguments, count: int, database_url: str) -> None:
        self._arguments = arguments
        # children get the resolved URL in their environment, not on their command line
        # (where `ps` would show a password), and never start a second embedded server
        self._env = {
            **os.environ,
            "DATABASE_URL": database_url,
            SUPERVISOR_ENV: str(os.getpid()),
        }
        self._count = count
        self._stopping = threading.Event()
        self._children: list[subprocess.Popen[bytes] | None] = [None] * count

    def _start(self, index: int) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(child_command(self._arguments(index)), env=self._env)
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
    arguments: ChildArguments, count: int, database_url: str, install_signals: bool = True
) -> int:
    """Start the supervisor with SIGTERM/SIGINT forwarded to its children."""
    supervisor = Supervisor(arguments, count, database_url)
    if not install_signals:
        return supervisor.run()

    def forward(signum: int) -> None:
        log.info("received %s: stopping %d worker processes", signal.Signals(signum).name, count)
        supervisor.stop(signum)

    with handling_stop_signals(forward):
        return supervisor.run()


def supervisor_pid() -> int | None:
    """The pid of the supervisor that started this process, if one did.

    Read once and removed from the environment: a process this one starts (a handler
    running ``pgbeat`` itself, say) was not started by that supervisor.
    """
    value = os.environ.pop(SUPERVISOR_ENV, "")
    return int(value) if value.isdigit() else None


def watch_supervisor(parent: int, on_gone: Callable[[], None]) -> BackgroundLoop:
    """Call ``on_gone`` once the supervisor ``parent`` has died (checked on a daemon thread).

    A dead parent's children are adopted by another process, so ``os.getppid()`` changes;
    polling it works on every POSIX system, where PR_SET_PDEATHSIG is Linux's alone.
    """

    def check() -> float | None:
        if os.getppid() == parent:
            return PARENT_CHECK_EVERY
        log.warning("the supervisor (pid %d) is gone: stopping", parent)
        on_gone()
        return None

    loop = BackgroundLoop("pgbeat-supervisor-watch", check)
    loop.start()
    return loop
