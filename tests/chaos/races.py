"""What the process races share (flow_race.py, workflow_race.py): a fleet of ``pgbeat
worker`` processes of a test app, one drain that may kill -9 a worker mid-run, and the
command line that runs full-size races on fresh databases, one JSON line a run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers import CliProcess, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])


@contextmanager
def workers(url: str, app: str, count: int, flags: list[str]) -> Iterator[list[CliProcess]]:
    """``count`` worker processes of ``app`` (module:registry), stopped on the way out."""
    started = [start_cli(["worker", app, *flags], url, cwd=ROOT) for _ in range(count)]
    try:
        yield started
    finally:
        for process in started:
            if process.returncode is None:
                process.stop(timeout=60)


@dataclass(frozen=True)
class Drain:
    """A drain by ``processes`` workers of ``slots`` each; with ``kill``, a worker is
    killed -9 once ``midway(its pid)`` holds (mid-run, inside a handler)."""

    app: str
    processes: int
    slots: int
    kill: bool
    timeout: float
    lease: str = "3s"  # the workers' lease (a killed worker's jobs are reaped after it)


def drain(
    url: str,
    race: Drain,
    midway: Callable[[int], bool],
    finished: Callable[[], bool],
    what: str,
) -> tuple[int, float]:
    """Run the fleet until ``finished()``; returns (workers killed, seconds taken)."""
    flags = ["--concurrency", str(race.slots), "--lease", race.lease, "--timeout", "2s"]
    started = time.monotonic()
    killed = 0
    with workers(url, race.app, race.processes, flags) as fleet:
        if race.kill:
            kill_one_midway(fleet, midway, race.timeout, what)
            killed = 1
        wait_for(finished, timeout=race.timeout, interval=0.1, message=f"every {what} finished")
    return killed, time.monotonic() - started


def kill_one_midway(
    fleet: list[CliProcess], midway: Callable[[int], bool], timeout: float, what: str
) -> None:
    """Kill -9 the first worker of ``fleet`` seen ``midway``. Whichever worker it is: a
    worker chosen in advance may start after the others took every job (a loaded machine
    starts processes seconds apart), and would then never be midway."""
    victim = wait_for(
        lambda: next((process for process in fleet if midway(process.pid)), None),
        timeout=timeout,
        interval=0.005,
        message=f"a worker running {what}",
    )
    assert victim is not None  # wait_for returns a truthy value
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(10)


def parser(prog: str, slots: int) -> argparse.ArgumentParser:
    """The options every full-size race takes; the race adds its sizes."""
    found = argparse.ArgumentParser(prog=prog)
    found.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    found.add_argument("--runs", type=int, default=10)
    found.add_argument("--processes", type=int, default=4)
    found.add_argument("--slots", type=int, default=slots)
    return found


def run_races(
    options: argparse.ArgumentParser,
    argv: list[str] | None,
    one_run: Callable[[str, argparse.Namespace, bool], tuple[dict[str, Any], bool]],
) -> int:
    """Each run on a fresh database, the first killing a worker: ``one_run(url, args,
    kill)`` returns the run's figures and whether they break a promise. 1 if any did."""
    args = options.parse_args(argv)
    if not args.database_url:
        options.error("give --database-url or DATABASE_URL (a server to create databases on)")
    from tests.chaos.harness import fresh_database

    failed = 0
    for run in range(args.runs):
        with fresh_database(args.database_url) as url:
            result, bad = one_run(url, args, run == 0)
        failed += bad
        print(json.dumps({"run": run, **result}), flush=True)
    return 1 if failed else 0
