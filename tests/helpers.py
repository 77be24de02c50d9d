"""Waiting on conditions with deadlines, and running the real CLI in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def cli_env(database_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def run_cli(
    args: Sequence[str],
    database_url: str | None,
    timeout: float = 60.0,
    cwd: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run ``pgbeat ARGS`` to completion and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "pgbeat", *args],
        env=cli_env(database_url, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


class CliProcess:
    """A background ``pgbeat`` process whose output is collected as it comes."""

    def __init__(self, command: Sequence[str], env: dict[str, str], cwd: str | None) -> None:
        self.popen = subprocess.Popen(
            list(command),
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        with self.popen.stdout:
            for line in self.popen.stdout:
                self._lines.append(line)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def output(self) -> str:
        return "".join(self._lines)

    def send_signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.popen.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> str:
        """Signal the process (if alive), wait for it, return everything it printed."""
        self.send_signal(sig)
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait(10)
        return self.output()


def start_cli(
    args: Sequence[str], database_url: str | None, cwd: str | None = None, **env: str
) -> CliProcess:
    """Start ``pgbeat ARGS`` in the background (stdout and stderr collected together)."""
    return CliProcess([sys.executable, "-m", "pgbeat", *args], cli_env(database_url, **env), cwd)


def statuses(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
    return {status: count for status, count in rows}


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan, the given one first."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def sorts_backlog(plan: str) -> bool:
    """Whether a Sort reads pending jobs straight from the table or a claim index (sorts
    of the running rows, or of the backlog's bounded head, are no sort of the backlog)."""
    lines = plan.splitlines()
    return "Seq Scan on jobs" in plan or any(
        "Sort" in line
        and any(("jobs_claim" in b or "jobs_ready" in b) for b in lines[i + 1 : i + 3])
        for i, line in enumerate(lines)
    )
