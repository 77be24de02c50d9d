"""Real `pgbeat scheduler` replicas: kill -9 and restarts, yet every period exactly once."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers import CliProcess, run_cli, schedules_toml, start_cli, wait_for

SCHEDULES = """
[defaults]
catch_up = "all"
catch_up_window = "1m"

[schedules.tick]
every = "1s"

[schedules.minutely]
cron = "* * * * *"
timezone = "Europe/Berlin"
"""


def seconds_of(conn: psycopg.Connection[Any], name: str) -> list[Any]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT run_at FROM jobs WHERE unique_key LIKE %s ORDER BY run_at", (name + "@%",)
        )
    ]


def in_loop(conn: psycopg.Connection[Any]) -> set[int]:
    """The pids of the schedulers whose loop has written a heartbeat."""
    rows = conn.execute("SELECT pid FROM pgbeat_processes WHERE role = 'scheduler'")
    return {int(pid) for (pid,) in rows}


def stop_all(replicas: list[CliProcess], within: float) -> list[str]:
    """SIGTERM to all at once; each has until one shared deadline to exit, else SIGKILL."""
    for replica in replicas:
        replica.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + within
    for replica in replicas:
        try:
            replica.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            replica.kill()
            replica.wait(10)
    return [replica.output() for replica in replicas]


@pytest.mark.slow
def test_eight_replicas_with_kills_and_restarts_enqueue_each_period_once(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = schedules_toml(tmp_path, SCHEDULES)
    args = ["scheduler", "--schedules", str(path), "--log-level", "WARNING"]
    replicas: list[CliProcess] = [start_cli(args, database_url) for _ in range(8)]
    rng = random.Random(8)

    def ticks() -> int:
        return len(seconds_of(conn, "tick"))

    try:
        wait_for(lambda: ticks() >= 3, timeout=30, message="ticks")
        victims = rng.sample(replicas, 3)
        for victim in victims:
            victim.kill()
            victim.wait(10)
            # each kill in a later period than the one before
            now = ticks()

            def ticked_since(now: int = now) -> bool:
                return ticks() > now

            wait_for(ticked_since, timeout=30, message="a tick after a kill")
        replicas += [start_cli(args, database_url) for _ in range(2)]
        before = ticks()
        wait_for(lambda: ticks() >= before + 4, timeout=30, message="ticks after the restarts")
        # Every survivor in its loop (its heartbeat is written there, after its signal
        # handlers): a replica still importing when SIGTERM came died of it (-15) in CI.
        alive = {r.pid for r in replicas if r not in victims}
        wait_for(lambda: alive <= in_loop(conn), timeout=30, message="every survivor in its loop")
    finally:
        outputs = stop_all(replicas, within=10.0)

    survivors = [r for r in replicas if r not in victims]
    # one killed at the deadline would have exited -9: SIGTERM stopped each in time
    assert [r.returncode for r in survivors] == [0] * len(survivors), outputs
    assert not any("Traceback" in out for out in outputs), outputs

    fired = seconds_of(conn, "tick")
    first, last = fired[0], fired[-1]
    expected = int((last - first).total_seconds()) + 1
    assert fired == [first + timedelta(seconds=i) for i in range(expected)], "gap or duplicate"
    assert expected >= 8
    minutes = seconds_of(conn, "minutely")
    assert len(minutes) == len(set(minutes))
    assert all(m.second == 0 for m in minutes)
    keys = conn.execute("SELECT count(*), count(DISTINCT (kind, unique_key)) FROM jobs").fetchone()
    assert keys is not None and keys[0] == keys[1]


def test_scheduler_refuses_a_bad_file(database_url: str, tmp_path: Path) -> None:
    path = schedules_toml(
        tmp_path, '[schedules.report]\ncron = "61 * * * *"\n\n[schedules.beat]\nevery = "soon"\n'
    )
    result = run_cli(["scheduler", "--schedules", str(path)], database_url)
    assert result.returncode == 1
    assert "report" in result.stderr and "beat" in result.stderr
    assert "Traceback" not in result.stderr


def test_scheduler_with_missing_file(database_url: str, tmp_path: Path) -> None:
    result = run_cli(["scheduler", "--schedules", str(tmp_path / "nope.toml")], database_url)
    assert result.returncode == 1
    assert "nope.toml" in result.stderr
    assert result.stderr.count("\n") == 1
