"""procrastinate 3.x through its public API: defer, batch_defer and an async worker.

Runs in ``bench/.venv-peers``. Drains use ``run_worker_async(wait=False)``, which returns
once the queue is empty and every running job has finished and been recorded. The
2-process drain runs this module again as 2 children (``--drain-child``), each with its
own app and worker on the same queue (bench.process_drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import procrastinate

from bench import database, footprint, process_drain
from bench.measure import (
    ENQUEUE_BULK,
    ENQUEUE_SINGLE,
    Result,
    Stopwatch,
    best_run_async,
    drain_result,
    emit,
    latency_result,
    log,
    median_run_async,
    parse_system_arguments,
    rate_result,
    system_arguments,
)

SYSTEM = "procrastinate"


@dataclass(frozen=True)
class DrainConfig:
    concurrency: int
    processes: int = 1

    @property
    def variant(self) -> str:
        procs = f"-p{self.processes}" if self.processes > 1 else ""
        return f"c{self.concurrency}{procs}"

    @property
    def description(self) -> str:
        how = f"{self.processes} processes" if self.processes > 1 else "1 process"
        return f"run_worker_async concurrency={self.concurrency}, async no-op task, {how}"


# concurrency=10 drained at about half the rate of 50 in every earlier run and was the
# slowest drain of the whole benchmark (~100 s), so the full run measures 50 only.
DRAIN_CONFIGS = (DrainConfig(50), DrainConfig(50, processes=2))
QUICK_DRAIN_CONFIGS = (DrainConfig(50),)
POOL_SIZE = 54  # concurrency 50 + the worker's own connections
# Each process of a multi-process drain gets a smaller pool, so that 2 of them stay well
# inside the server's max_connections (100), which other clients share.
CHILD_POOL_SIZE = 30
HANDLED = [0]  # how many no-op jobs this process ran (the multi-process drain checks it)


def make_app(url: str, pool_size: int = POOL_SIZE) -> tuple[procrastinate.App, dict[int, float]]:
    """An app with a no-op task and a probe task that records when it started."""
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=pool_size)
    )
    started: dict[int, float] = {}

    @app.task(name="noop")
    async def noop() -> None:
        HANDLED[0] += 1

    @app.task(name="probe")
    async def probe(i: int) -> None:
        started[i] = time.perf_counter()

    return app, started


async def enqueue_single(app: procrastinate.App, jobs: int) -> Result:
    task = app.tasks["noop"]
    with Stopwatch() as watch:
        for _ in range(jobs):
            await task.defer_async()
    config = "task.defer_async, one per transaction, psycopg pool"
    return rate_result(SYSTEM, ENQUEUE_SINGLE, "defer", config, jobs, watch.seconds)


async def enqueue_bulk(app: procrastinate.App, jobs: int, batch: int) -> Result:
    with Stopwatch() as watch:
        await _batch_defer(app, jobs, batch)
    config = f"task.batch_defer_async, {batch} jobs per call"
    return rate_result(SYSTEM, ENQUEUE_BULK, "batch_defer", config, jobs, watch.seconds)


async def _batch_defer(app: procrastinate.App, jobs: int, batch: int) -> None:
    task = app.tasks["noop"]
    for start in range(0, jobs, batch):
        size = min(batch, jobs - start)
        await task.batch_defer_async(*({} for _ in range(size)))


async def drain(app: procrastinate.App, url: str, jobs: int, config: DrainConfig) -> Result:
    _clear(url)
    await _batch_defer(app, jobs, 10_000)
    database.vacuum_analyze(url)
    if config.processes > 1:
        command = [sys.executable, "-m", "bench.peers.procrastinate_bench"]
        command += ["--drain-child", str(config.concurrency)]
        measured = process_drain.drain(url, jobs, [command] * config.processes, PROGRESS)
        seconds, handled = measured.seconds, measured.handled
    else:
        with Stopwatch() as watch:
            await app.run_worker_async(
                wait=False, concurrency=config.concurrency, install_signal_handlers=False
            )
        seconds, handled = watch.seconds, []
    _check_done(url, jobs)
    return drain_result(
        SYSTEM, config.variant, config.description, jobs, seconds, config.processes, handled
    )


# How bench.process_drain follows a drain: a job is 'todo', then 'doing', then 'succeeded'.
PROGRESS = process_drain.Progress(
    started="SELECT count(*) < %(jobs)s FROM procrastinate_jobs WHERE status = 'todo'",
    finished=(
        "SELECT NOT EXISTS (SELECT FROM procrastinate_jobs WHERE status IN ('todo', 'doing'))"
    ),
)


async def drain_child(url: str, concurrency: int) -> None:
    """One process of a multi-process drain: its own app and worker, released by the parent."""
    app, _ = make_app(url, CHILD_POOL_SIZE)
    async with app.open_async():
        process_drain.ready_then_wait()
        await app.run_worker_async(
            wait=False, concurrency=concurrency, install_signal_handlers=False
        )
    process_drain.report_handled(HANDLED[0])


async def pickup_latency(
    app: procrastinate.App, started: dict[int, float], url: str, samples: int, gap: float
) -> Result:
    """From ``defer_async`` returning (committed) to the task starting, idle worker."""
    _clear(url)
    worker = asyncio.create_task(
        app.run_worker_async(concurrency=10, install_signal_handlers=False)
    )
    probe = app.tasks["probe"]
    latencies = []
    try:
        for i in range(-3, samples):  # three warm-up jobs, not counted
            await asyncio.sleep(gap)
            await probe.defer_async(i=i)
            committed = time.perf_counter()
            await _wait_for(lambda i=i: i in started, 10)
            if i >= 0:
                latencies.append(started[i] - committed)
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    config = "idle worker (concurrency=10, listen_notify), defer from the same process"
    return latency_result(SYSTEM, "listen_notify", config, latencies)


async def _wait_for(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("a probe job was not picked up in time")
        await asyncio.sleep(0.0002)


def _clear(url: str) -> None:
    database.truncate(url, "procrastinate_jobs")


def _check_done(url: str, jobs: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        done = database.count_rows(conn, "procrastinate_jobs", "succeeded")
    if done != jobs:
        raise RuntimeError(f"drain finished with {done} of {jobs} jobs succeeded")


def footprint_results(url: str, jobs: int) -> list[Result]:
    """WAL, dead tuples and size per job: batch_defer of 1,000, one worker drains."""
    _clear(url)

    async def enqueue() -> None:
        app, _ = make_app(url, 2)
        async with app.open_async():
            await _batch_defer(app, jobs, 1_000)

    async def drain_all() -> None:
        app, _ = make_app(url)
        async with app.open_async():
            await app.run_worker_async(
                wait=False, concurrency=FOOTPRINT_CONCURRENCY, install_signal_handlers=False
            )

    how = f"batch_defer_async x1000, run_worker_async concurrency={FOOTPRINT_CONCURRENCY}"
    return footprint.measure(
        SYSTEM, url, jobs, how, lambda: asyncio.run(enqueue()), lambda: asyncio.run(drain_all())
    )


FOOTPRINT_CONCURRENCY = 50


async def run(args: Any) -> list[Result]:
    app, started = make_app(args.url)
    url = args.url
    configs = QUICK_DRAIN_CONFIGS if args.quick_drain else DRAIN_CONFIGS
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
    if args.footprint_only:
        log(f"procrastinate: WAL and bloat of {args.footprint_jobs} jobs")
        return await asyncio.to_thread(footprint_results, url, args.footprint_jobs)
    async with app.open_async():
        log("procrastinate: enqueue, one per transaction")
        results = [await enqueue_single(app, args.enqueue_jobs)]
        _clear(url)
        log("procrastinate: bulk enqueue")

        async def bulk() -> Result:
            result = await enqueue_bulk(app, args.bulk_jobs, args.batch)
            _clear(url)
            return result

        results.append(await best_run_async(bulk, args.repeat))
        results += await drains(app, [c for c in configs if c.processes == 1], args)
        log("procrastinate: pickup latency")
        results.append(
            await pickup_latency(app, started, url, args.latency_samples, args.latency_gap)
        )
    # The multi-process drains once this pool (up to 54 connections) is closed: the
    # children's pools and this one must fit in the server's max_connections together.
    loader, _ = make_app(url, 2)
    async with loader.open_async():
        results += await drains(loader, [c for c in configs if c.processes > 1], args)
    log(f"procrastinate: WAL and bloat of {args.footprint_jobs} jobs")
    results += await asyncio.to_thread(footprint_results, url, args.footprint_jobs)
    return results


async def drains(app: procrastinate.App, configs: list[DrainConfig], args: Any) -> list[Result]:
    results = []
    for config in configs:
        log(f"procrastinate: drain {args.jobs} jobs, {config.variant}")
        results.append(
            await median_run_async(partial(drain, app, args.url, args.jobs, config), args.repeat)
        )
    return results


def main() -> None:
    parser = system_arguments(__doc__ or "")
    parser.add_argument(
        "--drain-child", type=int, metavar="CONCURRENCY", help="be one process of a drain"
    )
    args = parse_system_arguments(parser)
    if args.drain_child:
        asyncio.run(drain_child(args.url, args.drain_child))
    else:
        emit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
