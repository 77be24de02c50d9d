"""Waiting on conditions with deadlines, and running the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.02,
             message: str = "condition") -> T:
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


def run_cli(args: Sequence[str], database_url: str | None, timeout: float = 60.0,
            cwd: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``pgbeat ARGS`` to completion and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "pgbeat", *args], env=cli_env(database_url, **env),
        capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False,
    )


def start_cli(args: Sequence[str], database_url: str | None, cwd: str | None = None,
              **env: str) -> subprocess.Popen[str]:
    """Start ``pgbeat ARGS`` in the background (stdout and stderr to one pipe)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pgbeat", *args], env=cli_env(database_url, **env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
    )


def statuses(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
    return {status: count for status, count in rows}
