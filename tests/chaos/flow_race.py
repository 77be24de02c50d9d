"""Flow-control races with real worker processes: per-key concurrency, whole-queue
concurrency, rates and pauses, optionally under kill -9 of workers.

``python -m tests.chaos.flow_race`` runs the full size (4 processes x 50 slots, 20,000
jobs over 500 limit keys with key_concurrency = 1, 10 runs, one of them killing workers)
and prints one JSON line per run; tests/integration/test_flow_processes.py runs it small.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg

import pgbeat
from pgbeat.flow import parse_rate
from tests.apps.flow_app import SETUP, key_overlaps, most_at_once, most_starts_in_window, spans
from tests.chaos import races
from tests.helpers import CliProcess, wait_for

APP = "tests.apps.flow_app:registry"


@dataclass(frozen=True)
class KeyRace:
    """``jobs`` span jobs over ``keys`` limit keys in queue ``race`` with key_concurrency=1."""

    processes: int = 2
    slots: int = 10
    jobs: int = 200
    keys: int = 20
    sleep: float = 0.005
    kill: bool = False
    timeout: float = 120.0
    fair: bool = False  # the queue fair too: its keys taken in turn


def workers(url: str, count: int, flags: list[str]) -> AbstractContextManager[list[CliProcess]]:
    """``count`` worker processes of the flow app."""
    return races.workers(url, APP, count, flags)


def done_count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
    return int(row[0]) if row else 0


def busy(conn: psycopg.Connection[Any], pid: int) -> bool:
    """Whether process ``pid`` is inside a span handler."""
    query = "SELECT count(*) FROM spans WHERE pid = %s AND ended_at IS NULL"
    row = conn.execute(query, (pid,)).fetchone()
    return bool(row and row[0])


def key_race(url: str, race: KeyRace) -> dict[str, Any]:
    """Run one race; returns what the audit found (``overlaps`` must be 0)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        pgbeat.configure_queue(conn, "race", key_concurrency=1, fair=race.fair)
        order = list(range(race.jobs))
        random.Random(race.jobs).shuffle(order)
        pgbeat.enqueue_many(
            conn,
            [
                pgbeat.NewJob(
                    "span", {"sleep": race.sleep}, queue="race", limit_key=f"k{i % race.keys}"
                )
                for i in order
            ],
        )
        killed, seconds = races.drain(
            url,
            races.Drain(APP, race.processes, race.slots, race.kill, race.timeout),
            lambda pid: done_count(conn) >= race.jobs // 4 and busy(conn, pid),
            lambda: done_count(conn) == race.jobs,
            "job",
        )
        found = spans(conn)
        row = conn.execute("SELECT count(*) FROM jobs WHERE attempts > 1").fetchone()
        reaped = int(row[0]) if row else 0
    return {
        "jobs": race.jobs,
        "keys": race.keys,
        "fair": race.fair,
        "processes": race.processes,
        "slots": race.slots,
        "killed": killed,
        "reaped": reaped,  # jobs run again after their lease expired (the killed worker's)
        "runs": len(found),
        "unfinished_runs": sum(s.ended_at is None for s in found),
        "overlaps": key_overlaps(found),
        "most_running": most_at_once(found),
        "seconds": round(seconds, 2),
        "jobs_per_s": round(race.jobs / seconds),
    }


def queue_race(url: str, concurrency: int, jobs: int, processes: int, slots: int) -> int:
    """The most jobs of a queue with ``concurrency`` that ran at once."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        pgbeat.configure_queue(conn, "race", concurrency=concurrency)
        pgbeat.enqueue_many(
            conn, [pgbeat.NewJob("span", {"sleep": 0.02}, queue="race") for _ in range(jobs)]
        )
        with workers(url, processes, ["--concurrency", str(slots)]):
            wait_for(lambda: done_count(conn) == jobs, timeout=120, interval=0.1)
        return most_at_once(spans(conn))


def rate_race(url: str, rate: str, jobs: int, processes: int) -> tuple[int, float]:
    """Most starts in any window of the rate's period (less 150 ms of start-up jitter
    between the claim and the handler's first statement), and the seconds it took."""
    count, period = parse_rate(rate).count, parse_rate(rate).period
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        pgbeat.configure_queue(conn, "race", rate=rate)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("span", queue="race") for _ in range(jobs)])
        started = time.monotonic()
        with workers(url, processes, ["--concurrency", "10"]):
            wait_for(lambda: done_count(conn) == jobs, timeout=120, interval=0.05)
        seconds = time.monotonic() - started
        found = spans(conn)
    window = period - timedelta(milliseconds=150)
    assert count >= 1
    return most_starts_in_window(found, window), seconds


def main(argv: list[str] | None = None) -> int:
    options = races.parser("python -m tests.chaos.flow_race", slots=50)
    options.add_argument("--jobs", type=int, default=20_000)
    options.add_argument("--keys", type=int, default=500)
    options.add_argument("--fair", action="store_true", help="a fair queue (keys in turn)")

    def one_run(url: str, args: argparse.Namespace, kill: bool) -> tuple[dict[str, Any], bool]:
        race = KeyRace(
            args.processes, args.slots, args.jobs, args.keys, kill=kill, timeout=900, fair=args.fair
        )
        result = key_race(url, race)
        return result, result["overlaps"] > 0

    return races.run_races(options, argv, one_run)


if __name__ == "__main__":
    sys.exit(main())
