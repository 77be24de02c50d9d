"""Runs one system's benchmark module in its own process, on a fresh database of its own.

The child prints its results as JSON on stdout; its progress lines on stderr are passed
through as they come, and the last few are kept to explain a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import database
from bench.measure import URL_ENV
from bench.peers_env import REPO_ROOT


@dataclass(frozen=True)
class System:
    """A benchmarked system: the module that measures it and whether it is a peer."""

    key: str
    module: str
    is_peer: bool
    extra_args: tuple[str, ...] = ()


SYSTEMS = (
    System("raw_sql", "bench.raw_sql", is_peer=False),
    System("pgbeat", "bench.pgbeat_bench", is_peer=False),
    System("pgbeat_scheduler", "bench.scheduler_bench", is_peer=False),
    System("pgbeat_workflows", "bench.workflow_rows", is_peer=False),
    System("pgbeat_flow", "bench.flow_rows", is_peer=False),
    System("procrastinate", "bench.peers.procrastinate_bench", is_peer=True),
    System(
        "pgqueuer_asyncpg",
        "bench.peers.pgqueuer_bench",
        is_peer=True,
        extra_args=("--driver", "asyncpg"),
    ),
    System(
        "pgqueuer_psycopg",
        "bench.peers.pgqueuer_bench",
        is_peer=True,
        extra_args=("--driver", "psycopg"),
    ),
)


class SystemFailed(Exception):
    """The system's module exited non-zero, timed out, or printed no results."""


def run_system(
    system: System, python: Path | str, admin: str, args: list[str], timeout: float
) -> list[dict[str, Any]]:
    """Create the system's database, run its module with ``python``, return its results."""
    print(f"bench: {system.key}", file=sys.stderr, flush=True)
    with database.fresh_database(admin, system.key) as url:
        env = {**os.environ, URL_ENV: url, "PYTHONUNBUFFERED": "1"}
        command = [str(python), "-m", system.module, *system.extra_args, *args]
        stdout = _run(command, env, timeout)
    try:
        results: list[dict[str, Any]] = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SystemFailed("printed no results") from None
    return results


def _run(command: list[str], env: dict[str, str], timeout: float) -> str:
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        process.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    tail: deque[str] = deque(maxlen=3)
    try:
        assert process.stderr is not None and process.stdout is not None
        for line in process.stderr:
            sys.stderr.write(line)
            if line.strip():
                tail.append(line.strip())
        stdout = process.stdout.read()
        code = process.wait()
    finally:
        timer.cancel()
    if killed.is_set():
        raise SystemFailed(f"timed out after {timeout:g}s")
    if code != 0:
        raise SystemFailed(f"exited with {code}: {' | '.join(tail)}")
    return stdout
