"""A drain by several OS processes at once, for the peers' multi-process configurations.

Each process is the peer's own module in a child mode: it connects, sets up its worker
through the peer's public API, prints ``ready`` and waits for ``go`` on stdin; all are
released together. As for `pgbeat worker --processes N` (bench.pgbeat_bench), the clock
starts when the database shows the first job gone from the queue, so interpreter start-up
is not counted, and stops when the database shows no job left. Each child prints how many
jobs its handler ran as its last line of stdout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from bench.measure import URL_ENV

REPO_ROOT = Path(__file__).resolve().parents[1]
READY = "ready"
GO = "go"
TIMEOUT = 300.0


@dataclass(frozen=True)
class Progress:
    """Two queries on the peer's own tables: has the drain started, is it finished."""

    started: LiteralString  # true once fewer than %(jobs)s jobs wait untouched
    finished: LiteralString  # true once no job is waiting or running


@dataclass(frozen=True)
class ProcessDrain:
    """What ``drain`` measured: the seconds, and the jobs each process's handler ran."""

    seconds: float
    handled: list[int]


def drain(url: str, jobs: int, commands: list[list[str]], progress: Progress) -> ProcessDrain:
    """Start one child per command on ``url``, release them together, time the drain."""
    env = {**os.environ, URL_ENV: url, "PYTHONUNBUFFERED": "1"}
    children = [
        subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    try:
        for child in children:
            assert child.stdout is not None
            line = child.stdout.readline().strip()
            if line != READY:
                raise RuntimeError(f"a drain process did not get ready (said {line!r})")
        with psycopg.connect(url, autocommit=True) as conn:
            for child in children:
                assert child.stdin is not None
                child.stdin.write(GO + "\n")
                child.stdin.flush()
            deadline = time.monotonic() + TIMEOUT
            while not _ask(conn, progress.started, jobs):
                if time.monotonic() > deadline or all(c.poll() is not None for c in children):
                    raise RuntimeError("the drain processes never took a job")
                time.sleep(0.002)
            started = time.perf_counter()
            while not _ask(conn, progress.finished, jobs):
                if time.monotonic() > deadline:
                    raise RuntimeError("the drain processes timed out")
                time.sleep(0.005)
            seconds = time.perf_counter() - started
        handled = [_handled(child) for child in children]
        if sum(handled) < jobs:
            raise RuntimeError(f"the drain processes ran {sum(handled)} of {jobs} jobs")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return ProcessDrain(seconds, handled)


def _ask(conn: psycopg.Connection[Any], query: LiteralString, jobs: int) -> bool:
    row = conn.execute(query, {"jobs": jobs}).fetchone()
    return bool(row and row[0])


def _handled(child: subprocess.Popen[str]) -> int:
    """The child's last line (its handler's count), once it has exited cleanly."""
    assert child.stdout is not None
    lines = child.stdout.read().strip().splitlines()
    code = child.wait(60)
    if code != 0 or not lines:
        raise RuntimeError(f"a drain process exited with {code}")
    return int(lines[-1])


def ready_then_wait() -> None:
    """In a child: say ``ready`` and block until the parent says ``go``."""
    sys.stdout.write(READY + "\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != GO:
        raise SystemExit("drain process: no go from the parent")


def report_handled(count: int) -> None:
    """In a child: the last line of stdout, how many jobs this process's handler ran."""
    sys.stdout.write(f"{count}\n")
    sys.stdout.flush()
