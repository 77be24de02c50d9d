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
from tests.apps.flow_app import (
    SETUP,
    Span,
    key_overlaps,
    most_at_once,
    most_starts_in_window,
    spans,
)
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
    key_rate: str | None = None  # the queue's key_rate too (each key's starts per window)
    lease: str = "3s"  # the workers' lease (a killed worker's jobs are reaped after it)


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


# Every start a claim records for a rate (pgbeat_queue_starts, pruned by later claims once
# out of the window), kept: the audit of key_rate reads the claims' own clock, exact,
# where the handlers' starts lag their claims by as much as the machine is loaded.
AUDIT_STARTS = """
CREATE TABLE IF NOT EXISTS starts_audit (
    queue text NOT NULL, limit_key text, started_at timestamptz NOT NULL
);
CREATE OR REPLACE FUNCTION starts_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO starts_audit VALUES (NEW.queue, NEW.limit_key, NEW.started_at);
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER starts_audit AFTER INSERT ON pgbeat_queue_starts
    FOR EACH ROW EXECUTE FUNCTION starts_audit();
"""


def key_race(url: str, race: KeyRace) -> dict[str, Any]:
    """Run one race; returns what the audit found (``overlaps`` and ``key_rate_excess``
    must be 0)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        conn.execute(AUDIT_STARTS.encode())
        pgbeat.configure_queue(
            conn, "race", key_concurrency=1, fair=race.fair, key_rate=race.key_rate
        )
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
            races.Drain(APP, race.processes, race.slots, race.kill, race.timeout, race.lease),
            lambda pid: done_count(conn) >= race.jobs // 4 and busy(conn, pid),
            lambda: done_count(conn) == race.jobs,
            "job",
        )
        found = spans(conn)
        audit = conn.execute("SELECT queue, limit_key, started_at FROM starts_audit")
        claims = [Span(0, queue, key, 0, at, at) for queue, key, at in audit]
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
        "key_rate": race.key_rate,
        "key_rate_excess": key_rate_excess(claims, race.key_rate),  # by the claims' clock
        "key_rate_excess_by_handlers": key_rate_excess(found, race.key_rate, 150),
        "most_running": most_at_once(found),
        "seconds": round(seconds, 2),
        "jobs_per_s": round(race.jobs / seconds),
    }


def key_rate_excess(found: list[Span], key_rate: str | None, jitter_ms: int = 0) -> int:
    """Starts of one key beyond its rate in any window of the period (less ``jitter_ms``
    between the claim and the handler's first statement, for handlers' spans), over all
    keys; 0 without a key_rate. A killed worker's runs count: their claims were starts."""
    if key_rate is None:
        return 0
    rate = parse_rate(key_rate)
    window = rate.period - timedelta(milliseconds=jitter_ms)
    by_key: dict[str, list[Span]] = {}
    for s in found:
        if s.limit_key is not None:
            by_key.setdefault(s.limit_key, []).append(s)
    return sum(
        max(0, most_starts_in_window(group, window) - rate.count) for group in by_key.values()
    )


def queue_race(
    url: str, concurrency: int, jobs: int, processes: int, slots: int, fair: bool = False
) -> int:
    """The most jobs of a queue with ``concurrency`` that ran at once (``fair``: a fair
    queue, its jobs over 4 limit keys: its slots go out in steps once jobs are timed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        pgbeat.configure_queue(conn, "race", concurrency=concurrency, fair=fair)
        keys = [f"k{n % 4}" if fair else None for n in range(jobs)]
        pgbeat.enqueue_many(
            conn,
            [pgbeat.NewJob("span", {"sleep": 0.02}, queue="race", limit_key=k) for k in keys],
        )
        with workers(url, processes, ["--concurrency", str(slots)]):
            wait_for(lambda: done_count(conn) == jobs, timeout=120, interval=0.1)
        return most_at_once(spans(conn))


def rate_race(url: str, rate: str, jobs: int, processes: int) -> tuple[int, float]:
    """Most starts in any window of the rate's period, by the claims' own clock (the audit
    of AUDIT_STARTS: the handlers' starts lag their claims by as much as the machine is
    loaded, past any fixed allowance), and the seconds it took."""
    count, period = parse_rate(rate).count, parse_rate(rate).period
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        conn.execute(AUDIT_STARTS.encode())
        pgbeat.configure_queue(conn, "race", rate=rate)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("span", queue="race") for _ in range(jobs)])
        started = time.monotonic()
        with workers(url, processes, ["--concurrency", "10"]):
            wait_for(lambda: done_count(conn) == jobs, timeout=120, interval=0.05)
        seconds = time.monotonic() - started
        audit = conn.execute("SELECT queue, limit_key, started_at FROM starts_audit").fetchall()
    claims = [Span(0, queue, key, 0, at, at) for queue, key, at in audit]
    assert count >= 1 and len(claims) >= jobs  # every start was a claim the audit saw
    return most_starts_in_window(claims, period), seconds


def main(argv: list[str] | None = None) -> int:
    options = races.parser("python -m tests.chaos.flow_race", slots=50)
    options.add_argument("--jobs", type=int, default=20_000)
    options.add_argument("--keys", type=int, default=500)
    options.add_argument("--fair", action="store_true", help="a fair queue (keys in turn)")
    options.add_argument("--key-rate", help="the queue's key_rate too, e.g. 1/2s")
    options.add_argument(
        "--lease", default="3s", help="longer on a loaded machine: a claim waiting for the"
        " queue's lock past the lease loses its running jobs' leases (re-run: not a violation,"
        " but the audit cannot tell)",
    )  # fmt: skip

    def one_run(url: str, args: argparse.Namespace, kill: bool) -> tuple[dict[str, Any], bool]:
        race = KeyRace(
            args.processes,
            args.slots,
            args.jobs,
            args.keys,
            kill=kill,
            timeout=900,
            fair=args.fair,
            key_rate=args.key_rate,
            lease=args.lease,
        )
        result = key_race(url, race)
        return result, result["overlaps"] > 0 or result["key_rate_excess"] > 0

    return races.run_races(options, argv, one_run)


if __name__ == "__main__":
    sys.exit(main())
