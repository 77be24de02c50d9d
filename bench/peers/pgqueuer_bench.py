"""pgqueuer through its public API, on its asyncpg or its psycopg driver.

Runs in ``bench/.venv-peers``. Drains use ``QueueManager.run(mode=drain)``, which returns
once the queue is empty and every job's status has been flushed to the database. The
multi-process drains run this module again as 2 or 3 children (``--drain-child``), each
with its own QueueManager on the same queue (bench.process_drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg
from pgqueuer import AsyncpgDriver, PsycopgDriver, Queries, QueueManager
from pgqueuer.models import Job
from pgqueuer.types import QueueExecutionMode

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

PAYLOAD = b"{}"


@dataclass(frozen=True)
class DrainConfig:
    batch_size: int
    processes: int = 1

    @property
    def variant(self) -> str:
        procs = f"-p{self.processes}" if self.processes > 1 else ""
        return f"b{self.batch_size}{procs}"

    def description(self, driver: str) -> str:
        how = f"{self.processes} processes" if self.processes > 1 else "1 process"
        return f"QueueManager.run batch_size={self.batch_size}, {driver} driver, {how}"


# batch_size=10 (the default) drained at a third of batch_size=100 in every earlier run;
# 1000 was the best in one process, so the multi-process drains use it (asyncpg only: the
# psycopg driver is several times slower in one process).
DRAIN_CONFIGS = {
    "asyncpg": (
        DrainConfig(100),
        DrainConfig(1000),
        DrainConfig(1000, processes=2),
        DrainConfig(1000, processes=3),
    ),
    "psycopg": (DrainConfig(100), DrainConfig(1000)),
}
QUICK_DRAIN_CONFIGS = (DrainConfig(100),)


@contextlib.asynccontextmanager
async def connected(url: str, driver: str) -> AsyncIterator[Any]:
    """A pgqueuer driver on a new connection of the chosen kind."""
    if driver == "asyncpg":
        import asyncpg

        connection = await asyncpg.connect(url)
        try:
            yield AsyncpgDriver(connection)
        finally:
            await connection.close()
    else:
        aconn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            yield PsycopgDriver(aconn)
        finally:
            await aconn.close()


async def enqueue_single(system: str, queries: Queries, jobs: int) -> Result:
    with Stopwatch() as watch:
        for _ in range(jobs):
            await queries.enqueue("noop", PAYLOAD)
    config = "Queries.enqueue, one per transaction, 1 connection"
    return rate_result(system, ENQUEUE_SINGLE, "enqueue", config, jobs, watch.seconds)


async def enqueue_bulk(system: str, queries: Queries, jobs: int, batch: int) -> Result:
    with Stopwatch() as watch:
        await _enqueue_many(queries, jobs, batch)
    config = f"Queries.enqueue with lists, {batch} jobs per call"
    return rate_result(system, ENQUEUE_BULK, "enqueue_list", config, jobs, watch.seconds)


async def _enqueue_many(queries: Queries, jobs: int, batch: int) -> None:
    for start in range(0, jobs, batch):
        size = min(batch, jobs - start)
        await queries.enqueue(["noop"] * size, [PAYLOAD] * size, [0] * size)


async def drain(system: str, url: str, driver: str, jobs: int, config: DrainConfig) -> Result:
    async with connected(url, driver) as loader:
        queries = Queries(loader)
        await _clear(queries)
        await _enqueue_many(queries, jobs, 10_000)
    database.vacuum_analyze(url)
    if config.processes > 1:
        measured = process_drain.drain(
            url, jobs, [_child_command(driver, config)] * config.processes, PROGRESS
        )
        seconds, handled = measured.seconds, measured.handled
    else:
        async with connected(url, driver) as connection:
            manager = QueueManager(Queries(connection))

            @manager.entrypoint("noop")
            async def noop(job: Job) -> None:
                """The no-op job."""

            with Stopwatch() as watch:
                await manager.run(batch_size=config.batch_size, mode=QueueExecutionMode.drain)
        seconds, handled = watch.seconds, []
    _check_empty(url)
    config_text = config.description(driver)
    return drain_result(
        system, config.variant, config_text, jobs, seconds, config.processes, handled
    )


# How bench.process_drain follows a drain: pgqueuer deletes a job's row once its status is
# flushed to the log, so an empty table means every job finished and was recorded.
PROGRESS = process_drain.Progress(
    started="SELECT count(*) < %(jobs)s FROM pgqueuer WHERE status = 'queued'",
    finished="SELECT NOT EXISTS (SELECT FROM pgqueuer)",
)


def _child_command(driver: str, config: DrainConfig) -> list[str]:
    return [
        sys.executable, "-m", "bench.peers.pgqueuer_bench", "--driver", driver,
        "--drain-child", str(config.batch_size),
    ]  # fmt: skip


async def drain_child(url: str, driver: str, batch_size: int) -> None:
    """One process of a multi-process drain: a QueueManager, released by the parent."""
    handled = 0
    async with connected(url, driver) as connection:
        manager = QueueManager(Queries(connection))

        @manager.entrypoint("noop")
        async def noop(job: Job) -> None:
            nonlocal handled
            handled += 1

        process_drain.ready_then_wait()
        await manager.run(batch_size=batch_size, mode=QueueExecutionMode.drain)
    process_drain.report_handled(handled)


async def pickup_latency(system: str, url: str, driver: str, samples: int, gap: float) -> Result:
    """From ``enqueue`` returning (committed) to the entrypoint starting, idle manager."""
    started: dict[int, float] = {}
    async with connected(url, driver) as worker_driver, connected(url, driver) as producer:
        queries = Queries(producer)
        await _clear(queries)
        manager = QueueManager(Queries(worker_driver))

        @manager.entrypoint("probe")
        async def probe(job: Job) -> None:
            started[int(job.payload or b"0")] = time.perf_counter()

        running = asyncio.create_task(manager.run())
        latencies = []
        try:
            for i in range(-3, samples):  # three warm-up jobs, not counted
                await asyncio.sleep(gap)
                await queries.enqueue("probe", str(i).encode())
                committed = time.perf_counter()
                await _wait_for(lambda i=i: i in started, 10)
                if i >= 0:
                    latencies.append(started[i] - committed)
        finally:
            manager.shutdown.set()
            await running
    config = f"idle QueueManager (defaults, LISTEN/NOTIFY), enqueue on another {driver} connection"
    return latency_result(system, "listen_notify", config, latencies)


async def _wait_for(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("a probe job was not picked up in time")
        await asyncio.sleep(0.0002)


async def _clear(queries: Queries) -> None:
    await queries.clear_queue()
    await queries.clear_queue_log()


def _check_empty(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        left = database.count_rows(conn, "pgqueuer", None)
    if left:
        raise RuntimeError(f"drain finished with {left} jobs left in the queue")


async def footprint_results(system: str, url: str, driver: str, jobs: int) -> list[Result]:
    """WAL, dead tuples and size per job: enqueue with lists of 1,000, one manager drains."""
    async with connected(url, driver) as connection:
        await _clear(Queries(connection))

    async def enqueue() -> None:
        async with connected(url, driver) as loader:
            await _enqueue_many(Queries(loader), jobs, 1_000)

    async def drain_all() -> None:
        async with connected(url, driver) as connection:
            manager = QueueManager(Queries(connection))

            @manager.entrypoint("noop")
            async def noop(job: Job) -> None:
                """The no-op job."""

            await manager.run(batch_size=FOOTPRINT_BATCH, mode=QueueExecutionMode.drain)

    how = f"Queries.enqueue lists x1000, QueueManager.run batch_size={FOOTPRINT_BATCH}"
    # measure() is synchronous: each phase runs on an event loop of its own thread
    return await asyncio.to_thread(
        footprint.measure,
        system,
        url,
        jobs,
        how,
        lambda: asyncio.run(enqueue()),
        lambda: asyncio.run(drain_all()),
    )


FOOTPRINT_BATCH = 100


async def run(args: Any) -> list[Result]:
    system, url, driver = f"pgqueuer[{args.driver}]", args.url, args.driver
    async with connected(url, driver) as connection:
        queries = Queries(connection)
        await queries.install()
    if args.footprint_only:
        log(f"{system}: WAL and bloat of {args.footprint_jobs} jobs")
        return await footprint_results(system, url, driver, args.footprint_jobs)
    async with connected(url, driver) as connection:
        queries = Queries(connection)
        log(f"{system}: enqueue, one per transaction")
        results = [await enqueue_single(system, queries, args.enqueue_jobs)]
        await _clear(queries)
        log(f"{system}: bulk enqueue")

        async def bulk() -> Result:
            result = await enqueue_bulk(system, queries, args.bulk_jobs, args.batch)
            await _clear(queries)
            return result

        results.append(await best_run_async(bulk, args.repeat))
    for config in QUICK_DRAIN_CONFIGS if args.quick_drain else DRAIN_CONFIGS[driver]:
        log(f"{system}: drain {args.jobs} jobs, {config.variant}")
        results.append(
            await median_run_async(
                partial(drain, system, url, driver, args.jobs, config), args.repeat
            )
        )
    log(f"{system}: pickup latency")
    results.append(
        await pickup_latency(system, url, driver, args.latency_samples, args.latency_gap)
    )
    if driver == "asyncpg":  # the driver does not change what is written
        log(f"{system}: WAL and bloat of {args.footprint_jobs} jobs")
        results += await footprint_results(system, url, driver, args.footprint_jobs)
    return results


def main() -> None:
    parser = system_arguments(__doc__ or "")
    parser.add_argument("--driver", choices=("asyncpg", "psycopg"), default="asyncpg")
    parser.add_argument(
        "--drain-child", type=int, metavar="BATCH_SIZE", help="be one process of a drain"
    )
    args = parse_system_arguments(parser)
    if args.drain_child:
        asyncio.run(drain_child(args.url, args.driver, args.drain_child))
    else:
        emit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
