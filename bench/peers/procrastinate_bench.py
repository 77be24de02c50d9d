"""procrastinate 3.x through its public API: defer, batch_defer and an async worker.

Runs in ``bench/.venv-peers``. Drains use ``run_worker_async(wait=False)``, which returns
once the queue is empty and every running job has finished and been recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import procrastinate

from bench import database
from bench.measure import (
    DRAIN,
    ENQUEUE_BULK,
    ENQUEUE_SINGLE,
    Result,
    Stopwatch,
    best_run_async,
    emit,
    latency_result,
    log,
    parse_system_arguments,
    rate_result,
    system_arguments,
)

SYSTEM = "procrastinate"
DRAIN_CONCURRENCY = (10, 50)
QUICK_DRAIN_CONCURRENCY = (50,)
POOL_SIZE = max(DRAIN_CONCURRENCY) + 4


def make_app(url: str) -> tuple[procrastinate.App, dict[int, float]]:
    """An app with a no-op task and a probe task that records when it started."""
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=POOL_SIZE)
    )
    started: dict[int, float] = {}

    @app.task(name="noop")
    async def noop() -> None:
        """The no-op job."""

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


async def drain(app: procrastinate.App, url: str, jobs: int, concurrency: int) -> Result:
    _clear(url)
    await _batch_defer(app, jobs, 10_000)
    database.vacuum_analyze(url)
    with Stopwatch() as watch:
        await app.run_worker_async(
            wait=False, concurrency=concurrency, install_signal_handlers=False
        )
    _check_done(url, jobs)
    config = f"run_worker_async concurrency={concurrency}, async no-op task, 1 process"
    return rate_result(SYSTEM, DRAIN, f"c{concurrency}", config, jobs, watch.seconds)


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


async def run(args: Any) -> list[Result]:
    app, started = make_app(args.url)
    url = args.url
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        log("procrastinate: enqueue, one per transaction")
        results = [await enqueue_single(app, args.enqueue_jobs)]
        _clear(url)
        log("procrastinate: bulk enqueue")

        async def bulk() -> Result:
            result = await enqueue_bulk(app, args.bulk_jobs, args.batch)
            _clear(url)
            return result

        results.append(await best_run_async(bulk, args.repeat))
        for concurrency in QUICK_DRAIN_CONCURRENCY if args.quick_drain else DRAIN_CONCURRENCY:
            log(f"procrastinate: drain {args.jobs} jobs, concurrency {concurrency}")
            results.append(
                await best_run_async(
                    lambda c=concurrency: drain(app, url, args.jobs, c), args.repeat
                )
            )
        log("procrastinate: pickup latency")
        results.append(
            await pickup_latency(app, started, url, args.latency_samples, args.latency_gap)
        )
    return results


def main() -> None:
    args = parse_system_arguments(system_arguments(__doc__ or ""))
    emit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
