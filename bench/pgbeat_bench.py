"""pgbeat through its public API: enqueue, enqueue_many, and Worker draining no-op jobs.

Drains try a few ``WorkerSettings`` (concurrency, claim batch, sync or async handler)
and report each; pickup latency runs an idle worker and enqueues one job at a time.
"""

from __future__ import annotations

import itertools
import operator
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import pgbeat
from bench import database, footprint, raw_sql
from bench.measure import (
    ENQUEUE_BULK,
    ENQUEUE_SINGLE,
    Result,
    Stopwatch,
    best_run,
    drain_result,
    emit,
    latency_result,
    log,
    median_run,
    parse_system_arguments,
    rate_result,
    system_arguments,
)

SYSTEM = "pgbeat"
DRAIN_TIMEOUT = 300.0
PAIRED_CHUNK = 250


@dataclass(frozen=True)
class DrainConfig:
    concurrency: int
    claim_batch: int
    is_async: bool
    processes: int = 1

    @property
    def variant(self) -> str:
        kind = "async" if self.is_async else "sync"
        procs = f"-p{self.processes}" if self.processes > 1 else ""
        return f"c{self.concurrency}-b{self.claim_batch}-{kind}{procs}"

    @property
    def description(self) -> str:
        kind = "async" if self.is_async else "sync"
        how = f"`pgbeat worker --processes {self.processes}`" if self.processes > 1 else "1 process"
        return (
            f"Worker concurrency={self.concurrency} claim_batch={self.claim_batch}, "
            f"{kind} no-op handler, {how}"
        )


DRAIN_CONFIGS = (
    DrainConfig(10, 100, is_async=False),
    DrainConfig(100, 100, is_async=False),
    DrainConfig(200, 200, is_async=False),
    DrainConfig(100, 100, is_async=True),
    DrainConfig(100, 100, is_async=False, processes=2),
    DrainConfig(100, 100, is_async=False, processes=3),
)
QUICK_DRAIN_CONFIGS = (DrainConfig(100, 100, is_async=False),)


def enqueue_single(url: str, jobs: int) -> Result:
    """``pgbeat.enqueue`` on an autocommit connection: one statement, one transaction each.

    Commits wait for the WAL flush, whose speed drifts during a run, so chunks of pgbeat
    enqueues alternate with chunks of the raw INSERT on the same connection, and the
    paired ratio of the two rates goes into the result's detail.
    """
    pgbeat_seconds = raw_seconds = 0.0
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(0, jobs, PAIRED_CHUNK):
            size = min(PAIRED_CHUNK, jobs - start)
            with Stopwatch() as watch:
                for _ in range(size):
                    pgbeat.enqueue(conn, "noop", {})
            pgbeat_seconds += watch.seconds
            with Stopwatch() as watch:
                for _ in range(size):
                    conn.execute(raw_sql.INSERT_ONE, ("noop", raw_sql.PAYLOAD))
            raw_seconds += watch.seconds
    config = "pgbeat.enqueue, one per transaction (autocommit), 1 connection"
    result = rate_result(SYSTEM, ENQUEUE_SINGLE, "enqueue", config, jobs, pgbeat_seconds)
    result.detail["paired_raw_jobs_per_s"] = round(jobs / raw_seconds, 1)
    result.detail["paired_ratio"] = round(raw_seconds / pgbeat_seconds, 3)
    return result


def enqueue_bulk(url: str, jobs: int, batch: int) -> Result:
    """``pgbeat.enqueue_many`` with ``batch`` jobs per call (one statement each)."""
    with psycopg.connect(url, autocommit=True) as conn, Stopwatch() as watch:
        _enqueue_many(conn, jobs, batch)
    config = f"pgbeat.enqueue_many, {batch} jobs per call"
    return rate_result(SYSTEM, ENQUEUE_BULK, "enqueue_many", config, jobs, watch.seconds)


def _enqueue_many(conn: psycopg.Connection[Any], jobs: int, batch: int) -> None:
    for start in range(0, jobs, batch):
        size = min(batch, jobs - start)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", {}) for _ in range(size)])


def drain(url: str, jobs: int, config: DrainConfig) -> Result:
    """Time one Worker from its start until the database shows every job done."""
    if config.processes > 1:
        return drain_processes(url, jobs, config)
    load(url, jobs)
    return _drain_result(config, jobs, run_worker(url, jobs, config))


def paired_drain(url: str, jobs: int, config: DrainConfig) -> Result:
    """A one-process ``drain`` of ``jobs`` right after a raw batched drain of as many on the
    same table, the pair's ratio in the result's detail; this module's rows drain as many
    jobs as the raw loop's row (raw_sql.BATCHED_DRAIN_FACTOR times ``--jobs``).

    The worker's start (30-40 ms: 200 handler threads, three connections) was a tenth of a
    drain of 20,000 and nothing of the raw loop's 60,000; and the raw loop's own drains ran
    minutes before these, at the machine's speed then (71,500 jobs/s in one run, which a
    pgbeat drain read 0.82x of; the same code read 0.92-1.07x of raw drains run beside it).
    """
    raw = raw_sql.drain(url, jobs, 100)
    result = drain(url, jobs, config)
    result = replace(result, config=f"{result.config}, {jobs:,} jobs after a raw drain of as many")
    result.detail["paired_raw_jobs_per_s"] = round(raw.value, 1)
    result.detail["paired_ratio"] = round(result.value / raw.value, 3)
    return result


LOOP_THREAD = "drain-loop"  # the name of the thread run_worker runs the Worker's loop on


def run_worker(
    url: str,
    jobs: int,
    config: DrainConfig,
    measured: AbstractContextManager[Any] | None = None,
) -> float:
    """Run one Worker on the ``jobs`` pending jobs until all are done; the seconds it took
    (inside ``measured``, if given: from the start until none is left, before the stop)."""
    finished = threading.Event()
    counter = itertools.count(1)
    registry = pgbeat.Registry()
    if config.is_async:

        async def noop_async(payload: Any) -> None:
            if next(counter) >= jobs:
                finished.set()

        registry.register("noop", noop_async)
    else:

        def noop(payload: Any) -> None:
            if next(counter) >= jobs:
                finished.set()

        registry.register("noop", noop)
    settings = pgbeat.WorkerSettings(concurrency=config.concurrency, claim_batch=config.claim_batch)
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, name=LOOP_THREAD, daemon=True)
    with (
        psycopg.connect(url, autocommit=True) as conn,
        Stopwatch() as watch,
        measured or nullcontext(),
    ):
        thread.start()
        if not finished.wait(DRAIN_TIMEOUT):
            raise RuntimeError("pgbeat drain timed out")
        _wait_all_done(conn)
    worker.stop()
    thread.join(30)
    raw_sql.check_done(url, jobs)
    return watch.seconds


def drain_processes(url: str, jobs: int, config: DrainConfig) -> Result:
    """Time `pgbeat worker --processes N` from its first claim until no job is left.

    The clock starts when the first job leaves `pending`, so interpreter start-up is not
    counted; progress is read through the partial indexes, which shrink as jobs finish.
    """
    load(url, jobs)
    command = worker_command(
        "--processes", str(config.processes), "--concurrency", str(config.concurrency)
    )
    env = {**os.environ, "DATABASE_URL": url}
    process = subprocess.Popen(command, env=env, cwd=str(Path(__file__).resolve().parents[1]))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            deadline = time.monotonic() + DRAIN_TIMEOUT
            while _pending(conn) == jobs:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("pgbeat worker processes never started")
                time.sleep(0.002)
            started = time.perf_counter()
            while _left(conn) > 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("pgbeat drain timed out")
                time.sleep(0.005)
            seconds = time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    return _drain_result(config, jobs, seconds)


def _drain_result(config: DrainConfig, jobs: int, seconds: float) -> Result:
    return drain_result(SYSTEM, config.variant, config.description, jobs, seconds, config.processes)


def worker_command(*flags: str) -> list[str]:
    """`pgbeat worker` on the no-op app, warnings only, in this interpreter."""
    return [
        sys.executable,
        "-m",
        "pgbeat",
        "worker",
        "bench.noop_app:registry",
        *flags,
        "--log-level",
        "WARNING",
    ]


def _pending(conn: psycopg.Connection[Any]) -> int:
    """Jobs still pending, counted through jobs_ready."""
    row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'pending'").fetchone()
    return int(row[0]) if row else 0


def _left(conn: psycopg.Connection[Any]) -> int:
    """Jobs pending or running, counted through jobs_ready and jobs_running."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM jobs WHERE status = 'pending')"
        " + (SELECT count(*) FROM jobs WHERE status = 'running')"
    ).fetchone()
    return int(row[0]) if row else 0


def _wait_all_done(conn: psycopg.Connection[Any]) -> None:
    """Poll until no job is left pending or running (the worker writes outcomes in batches).

    Polled every millisecond through the partial indexes (what is left shrinks to nothing):
    the raw loops' clocks stop when their last UPDATE returns, and a count of the done rows
    every 5 ms added 2.5-5 ms to a drain of 300 ms.
    """
    deadline = time.monotonic() + 60
    while _left(conn) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("pgbeat never recorded every job as done")
        time.sleep(0.001)


def load(url: str, jobs: int) -> None:
    database.truncate(url, "jobs")
    with psycopg.connect(url, autocommit=True) as conn:
        _enqueue_many(conn, jobs, 10_000)
    database.vacuum_analyze(url)


def pickup_latency(url: str, samples: int, gap: float) -> Result:
    """From the ``enqueue`` call to the handler starting, on an idle worker.

    Timed from the call, not from its return: the handler may start before this thread
    wakes from the commit (one GIL, a busy machine), and a time from the return would then
    be negative. The call's own round trip (INSERT and commit) is reported beside it.
    """
    database.truncate(url, "jobs")
    started: dict[int, float] = {}
    arrived = threading.Condition()
    registry = pgbeat.Registry()

    def probe(payload: dict[str, int]) -> None:
        with arrived:
            started[payload["i"]] = time.perf_counter()
            arrived.notify_all()

    registry.register("probe", probe)
    worker = pgbeat.Worker(url, registry, pgbeat.WorkerSettings())
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    latencies = []
    round_trips = []
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(-3, samples):  # three warm-up jobs, not counted
                time.sleep(gap)
                called = time.perf_counter()
                pgbeat.enqueue(conn, "probe", {"i": i})
                returned = time.perf_counter()
                with arrived:
                    if not arrived.wait_for(partial(operator.contains, started, i), timeout=10):
                        raise RuntimeError(f"probe job {i} was not picked up within 10 s")
                if i >= 0:
                    latencies.append(started[i] - called)
                    round_trips.append(returned - called)
    finally:
        worker.stop()
        thread.join(30)
    config = "idle Worker (default settings, LISTEN/NOTIFY), enqueue on another connection"
    result = latency_result(SYSTEM, "listen_notify", config, latencies)
    result.detail["enqueue_call_p50_ms"] = round(statistics.median(round_trips) * 1000, 3)
    return result


def footprint_results(url: str, jobs: int) -> list[Result]:
    """WAL, dead tuples and size per job: enqueue_many in calls of 1,000, one Worker drains.

    Twice, in one run: first with the jobs table as it was before migration 0012
    (fillfactor 100), then as the migrations leave it.
    """
    config = FOOTPRINT_DRAIN

    def enqueue() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            _enqueue_many(conn, jobs, 1_000)

    how = f"enqueue_many x1000, {config.description}"
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(FILLFACTOR).fetchone()
        fillfactor = int(row[0]) if row and row[0] else 100
    results = []
    for variant, value in (
        ("before: fillfactor 100", 100),
        (f"fillfactor {fillfactor}", fillfactor),
    ):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER TABLE jobs SET (fillfactor = {})").format(value))
        database.truncate(url, "jobs")
        results += footprint.measure(
            SYSTEM, url, jobs, how, enqueue, lambda: _ran(url, jobs, config), variant
        )
    return results


FOOTPRINT_DRAIN = DrainConfig(100, 100, is_async=False)
SET_FILLFACTOR = sql.SQL("ALTER TABLE jobs SET (fillfactor = {})")
# The jobs table's fillfactor as the migrations set it (100 when none is set).
FILLFACTOR = """
SELECT split_part(option, '=', 2) FROM pg_class, unnest(reloptions) AS option
WHERE oid = 'jobs'::regclass AND split_part(option, '=', 1) = 'fillfactor'"""


def _ran(url: str, jobs: int, config: DrainConfig) -> None:
    run_worker(url, jobs, config)


def main() -> None:
    args = parse_system_arguments(system_arguments(__doc__ or ""))
    url = args.url
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
    if args.footprint_only:
        log(f"pgbeat: WAL and bloat of {args.footprint_jobs} jobs")
        emit(footprint_results(url, args.footprint_jobs))
        return
    log("pgbeat: enqueue, one per transaction")
    results = [_emptied(url, enqueue_single(url, args.enqueue_jobs))]
    log("pgbeat: bulk enqueue")
    results.append(
        best_run(lambda: _emptied(url, enqueue_bulk(url, args.bulk_jobs, args.batch)), args.repeat)
    )
    for config in QUICK_DRAIN_CONFIGS if args.quick_drain else DRAIN_CONFIGS:
        if config.processes == 1:  # as many jobs as the raw loop's row, each after a raw drain
            jobs = args.jobs * raw_sql.BATCHED_DRAIN_FACTOR
            one = partial(paired_drain, url, jobs, config)
        else:
            jobs, one = args.jobs, partial(drain, url, args.jobs, config)
        log(f"pgbeat: drain {jobs} jobs, {config.variant}")
        results.append(median_run(one, args.repeat))
    log("pgbeat: pickup latency")
    results.append(pickup_latency(url, args.latency_samples, args.latency_gap))
    log(f"pgbeat: WAL and bloat of {args.footprint_jobs} jobs")
    results += footprint_results(url, args.footprint_jobs)
    emit(results)


def _emptied(url: str, result: Result) -> Result:
    """``result``, after emptying the table for whatever runs next."""
    database.truncate(url, "jobs")
    return result


if __name__ == "__main__":
    main()
