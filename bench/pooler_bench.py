"""pgbeat through pgbouncer (transaction pooling) against pgbeat direct, in one run.

    python -m bench.pooler_bench [--jobs 30000] [--processes 2] [--repeat 3]

On a fresh database of the server at ``DATABASE_URL`` (loopback only), with a pgbouncer of
its own on a free port (tests/pgbouncer.py), it drains the same no-op backlog with
``pgbeat worker --processes N`` in four set-ups, interleaved run by run so that a noisy
machine weighs on each alike:

- ``direct``: straight to PostgreSQL, the defaults (LISTEN, session settings);
- ``direct, --pooler transaction``: straight to PostgreSQL, but keeping no session state:
  what the pooler setting alone costs;
- ``pgbouncer``: through pgbouncer with ``--pooler transaction``;
- ``... + ALTER DATABASE SET``: the worker's session settings (synchronous_commit,
  enable_bitmapscan) given to the database instead, which a pooled session does keep.

Then the idle pickup latency (enqueue called -> handler started) direct with LISTEN, and
through pgbouncer polling every 100 ms. Prints a table and the JSON of every run.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql
from tests.pgbouncer import Pgbouncer

import pgbeat
from bench import database

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ("synchronous_commit", "enable_bitmapscan")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pooler_bench", description=__doc__)
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-samples", type=int, default=20)
    return parser.parse_args()


def load(url: str, jobs: int) -> None:
    database.truncate(url, "jobs")
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(0, jobs, 10_000):
            batch = min(10_000, jobs - start)
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop")] * batch)
    database.vacuum_analyze(url)


class PeakServerConnections:
    """Samples pgbouncer's pool for ``database``: the most server connections busy at once."""

    def __init__(self, bouncer: Pgbouncer | None, database: str) -> None:
        self.peak = 0
        self.clients = 0
        self._bouncer, self._database = bouncer, database
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakServerConnections:
        if self._bouncer is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._bouncer is not None:
            self._thread.join(10)

    def _sample(self) -> None:
        assert self._bouncer is not None
        with self._bouncer.console() as console:
            while not self._stop.wait(0.05):
                pools = self._bouncer.pools(console, self._database)
                self.peak = max(self.peak, pools.get("sv_active", 0))
                clients = pools.get("cl_active", 0) + pools.get("cl_idle", 0)
                self.clients = max(self.clients, clients)


def drain(url: str, watch_url: str, args: argparse.Namespace, pooled: bool) -> float:
    """Seconds from the first claim until no job is left, `pgbeat worker --processes N`."""
    load(watch_url, args.jobs)
    command = [
        sys.executable, "-m", "pgbeat", "worker", "bench.noop_app:registry",
        "--processes", str(args.processes), "--concurrency", str(args.concurrency),
        "--log-level", "WARNING",
    ]  # fmt: skip
    if pooled:
        command += ["--pooler", "transaction"]
    env = {**os.environ, "DATABASE_URL": url}
    process = subprocess.Popen(command, env=env, cwd=str(ROOT))
    try:
        with psycopg.connect(watch_url, autocommit=True) as conn:
            deadline = time.monotonic() + 300
            while scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'pending'") == args.jobs:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the workers never started")
                time.sleep(0.002)
            started = time.perf_counter()
            while scalar(conn, "SELECT count(*) FROM jobs WHERE status <> 'done'"):
                if time.monotonic() > deadline:
                    raise RuntimeError("the drain timed out")
                time.sleep(0.005)
            return time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def scalar(conn: psycopg.Connection[Any], query: Any) -> Any:
    row = conn.execute(query).fetchone()
    return None if row is None else row[0]


def database_settings(url: str, on: bool) -> None:
    """Give the database the worker's session settings (or take them back)."""
    with psycopg.connect(url, autocommit=True) as conn:
        name = sql.Identifier(scalar(conn, "SELECT current_database()"))
        for setting in SETTINGS:
            if on:
                query = sql.SQL("ALTER DATABASE {} SET {} = off").format(
                    name, sql.Identifier(setting)
                )
            else:
                query = sql.SQL("ALTER DATABASE {} RESET {}").format(name, sql.Identifier(setting))
            conn.execute(query)


def pickup_latency(url: str, samples: int, poll: float) -> list[float]:
    """Seconds from an ``enqueue`` call to its handler starting, on an idle worker.

    From the call, not its return: the handler may start before this thread wakes from the
    commit, and a time from the return would then be negative.
    """
    started: dict[int, float] = {}
    arrived = threading.Condition()
    registry = pgbeat.Registry()

    @registry.handler("probe")
    def probe(payload: dict[str, int]) -> None:
        with arrived:
            started[payload["i"]] = time.perf_counter()
            arrived.notify_all()

    settings = pgbeat.WorkerSettings(poll_interval=timedelta(seconds=poll))
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    latencies = []
    try:
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            for i in range(-3, samples):
                time.sleep(0.25)
                called = time.perf_counter()
                pgbeat.enqueue(conn, "probe", {"i": i})
                with arrived:
                    if not arrived.wait_for(partial(operator.contains, started, i), timeout=10):
                        raise RuntimeError(f"probe {i} was not picked up")
                if i >= 0:
                    latencies.append(started[i] - called)
    finally:
        worker.stop()
        thread.join(30)
    return latencies


def main() -> None:
    args = parse_args()
    admin = database.admin_url()
    database.require_loopback(admin)
    runs: dict[str, list[float]] = {}
    latencies: dict[str, list[float]] = {}
    busy: dict[str, list[tuple[int, int]]] = {}
    with database.fresh_database(admin, "pooler") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
        bouncer = Pgbouncer(admin, pool_size=20)
        pooled_url = bouncer.url(url)
        try:
            for round_ in range(args.repeat):
                for name, target, pooled, settings in (
                    ("direct", url, False, False),
                    ("direct, --pooler transaction", url, True, False),
                    ("direct, --pooler transaction + ALTER DATABASE SET", url, True, True),
                    ("pgbouncer", pooled_url, True, False),
                    ("pgbouncer + ALTER DATABASE SET", pooled_url, True, True),
                ):
                    database_settings(url, settings)
                    bouncer.restart(signal.SIGINT)  # server connections read the new defaults
                    print(f"round {round_ + 1}: {name}", file=sys.stderr, flush=True)
                    through = bouncer if target == pooled_url else None
                    with PeakServerConnections(through, database_name(url)) as peak:
                        seconds = drain(target, url, args, pooled)
                    runs.setdefault(name, []).append(args.jobs / seconds)
                    if through is not None:
                        busy.setdefault(name, []).append((peak.peak, peak.clients))
            database_settings(url, False)
            database.truncate(url, "jobs")
            latencies["direct, LISTEN"] = pickup_latency(url, args.latency_samples, 1.0)
            os.environ["PGBEAT_POOLER"] = "transaction"
            latencies["pgbouncer, poll 100ms"] = pickup_latency(
                pooled_url, args.latency_samples, 0.1
            )
            del os.environ["PGBEAT_POOLER"]
        finally:
            bouncer.close()
    report(args, runs, latencies, busy)


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def report(
    args: argparse.Namespace,
    runs: dict[str, list[float]],
    latencies: dict[str, list[float]],
    busy: dict[str, list[tuple[int, int]]],
) -> None:
    base = statistics.median(runs["direct"])
    print(
        f"drain of {args.jobs:,} no-op jobs, pgbeat worker --processes {args.processes} "
        f"--concurrency {args.concurrency}, median of {args.repeat}\n"
    )
    print("| set-up | jobs/s (median) | runs | vs direct |\n|---|---|---|---|")
    for name, values in runs.items():
        median = statistics.median(values)
        each = ", ".join(f"{v:,.0f}" for v in values)
        print(f"| {name} | {median:,.0f} | {each} | {median / base:.2f}x |")
    for name, samples in busy.items():
        servers = max(server for server, _ in samples)
        clients = max(client for _, client in samples)
        print(f"\n{name}: at most {servers} server connections busy at once, for {clients} clients")
    print("\n| pickup (idle worker) | median ms | p95 ms |\n|---|---|---|")
    for name, values in latencies.items():
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(f"| {name} | {statistics.median(values) * 1000:.1f} | {p95 * 1000:.1f} |")
    print(json.dumps({"drain_jobs_per_second": runs, "pickup_seconds": latencies, "busy": busy}))


if __name__ == "__main__":
    main()
