"""Raw-SQL baselines on pgbeat's own ``jobs`` table: what plain psycopg loops achieve.

The floor every queue is compared with: one INSERT per transaction, bulk INSERT from
``unnest`` and COPY, and two drain loops on 4 connections (threads): the classic claim
of one job + mark done per job, and a batched claim of 100 + one UPDATE to mark them done.
The batched loop drains ``BATCHED_DRAIN_FACTOR`` times ``--jobs``: at its speed a drain of
``--jobs`` lasts well under a second and its rate swung too much between runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any, LiteralString

import psycopg

from bench import database
from bench.measure import (
    DRAIN,
    ENQUEUE_BULK,
    ENQUEUE_SINGLE,
    Result,
    Stopwatch,
    best_run,
    emit,
    log,
    median_run,
    parse_system_arguments,
    rate_result,
    system_arguments,
)

SYSTEM = "raw_sql"
CONNECTIONS = 4
BATCHED_DRAIN_FACTOR = 3
PAYLOAD = "{}"

# The classic enqueue: one row, the column defaults do the rest.
INSERT_ONE: LiteralString = "INSERT INTO jobs (kind, payload) VALUES (%s, %s::jsonb)"

# Many rows in one statement from parallel arrays.
INSERT_UNNEST: LiteralString = """
INSERT INTO jobs (kind, payload)
SELECT kind, payload FROM unnest(%s::text[], %s::jsonb[]) AS new_job(kind, payload)"""

COPY_JOBS: LiteralString = "COPY jobs (kind, payload) FROM STDIN"

# Lease up to %(limit)s due jobs (the classic claim, generalised from LIMIT 1).
CLAIM: LiteralString = """
UPDATE jobs
SET status = 'running', attempts = attempts + 1, locked_until = now() + interval '5 minutes'
WHERE id = ANY(ARRAY(
    SELECT id FROM jobs
    WHERE status = 'pending' AND run_at <= now()
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
RETURNING id, kind, payload, attempts, max_attempts"""

# The classic mark-done, for one job.
COMPLETE_ONE: LiteralString = (
    "UPDATE jobs SET status = 'done', locked_until = NULL WHERE id = %(id)s"
)

# The same for a whole claimed batch.
COMPLETE_MANY: LiteralString = (
    "UPDATE jobs SET status = 'done', locked_until = NULL WHERE id = ANY(%(ids)s)"
)


def noop(payload: Any) -> None:
    """The handler every drain runs."""


def enqueue_single(url: str, jobs: int) -> Result:
    """One autocommit INSERT (one transaction) per job."""
    with psycopg.connect(url, autocommit=True) as conn, Stopwatch() as watch:
        for _ in range(jobs):
            conn.execute(INSERT_ONE, ("noop", PAYLOAD))
    config = "one INSERT per transaction (autocommit), 1 connection"
    return rate_result(SYSTEM, ENQUEUE_SINGLE, "insert", config, jobs, watch.seconds)


def enqueue_unnest(url: str, jobs: int, batch: int) -> Result:
    """``INSERT ... SELECT FROM unnest(arrays)``, ``batch`` rows per statement."""
    with psycopg.connect(url, autocommit=True) as conn, Stopwatch() as watch:
        for size in _batches(jobs, batch):
            conn.execute(INSERT_UNNEST, (["noop"] * size, [PAYLOAD] * size))
    config = f"INSERT ... SELECT unnest, {batch} rows per statement"
    return rate_result(SYSTEM, ENQUEUE_BULK, "unnest", config, jobs, watch.seconds)


def enqueue_copy(url: str, jobs: int, batch: int) -> Result:
    """COPY FROM STDIN, ``batch`` rows per COPY (each its own transaction)."""
    with psycopg.connect(url, autocommit=True) as conn, Stopwatch() as watch:
        copy_rows(conn, jobs, batch)
    config = f"COPY, {batch} rows per COPY"
    return rate_result(SYSTEM, ENQUEUE_BULK, "copy", config, jobs, watch.seconds)


def copy_rows(conn: psycopg.Connection[Any], jobs: int, batch: int) -> None:
    for size in _batches(jobs, batch):
        with conn.cursor() as cursor, cursor.copy(COPY_JOBS) as copy:
            for _ in range(size):
                copy.write_row(("noop", PAYLOAD))


def drain(
    url: str, jobs: int, limit: int, measured: AbstractContextManager[Any] | None = None
) -> Result:
    """Drain ``jobs`` pending no-op jobs on 4 connections, claiming ``limit`` at a time
    (inside ``measured``, if given: only the drain, its connections made before)."""
    _load(url, jobs)
    loop = _claim_loop_batched if limit > 1 else _claim_loop_single
    connections = [psycopg.connect(url, autocommit=True) for _ in range(CONNECTIONS)]
    try:
        with measured or nullcontext():
            seconds = _run_threads([partial(loop, c, limit) for c in connections])
    finally:
        for conn in connections:
            conn.close()
    check_done(url, jobs)
    if limit > 1:
        variant = "batched"
        config = f"claim LIMIT {limit} + one UPDATE ... = ANY, 4 threads, {jobs:,} jobs"
    else:
        variant, config = "per_job", "claim LIMIT 1 + UPDATE per job (the classic loop), 4 threads"
    return rate_result(SYSTEM, DRAIN, variant, config, jobs, seconds)


def _claim_loop_batched(conn: psycopg.Connection[Any], limit: int) -> None:
    while rows := conn.execute(CLAIM, {"limit": limit}).fetchall():
        for row in rows:
            noop(row[2])
        conn.execute(COMPLETE_MANY, {"ids": [row[0] for row in rows]})


def _claim_loop_single(conn: psycopg.Connection[Any], limit: int) -> None:
    while row := conn.execute(CLAIM, {"limit": 1}).fetchone():
        noop(row[2])
        conn.execute(COMPLETE_ONE, {"id": row[0]})


def _run_threads(targets: list[Callable[[], None]]) -> float:
    """Start one thread per target at once; seconds until the last one returns."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    with Stopwatch() as watch:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return watch.seconds


def _load(url: str, jobs: int) -> None:
    database.truncate(url, "jobs")
    with psycopg.connect(url, autocommit=True) as conn:
        copy_rows(conn, jobs, 10_000)
    database.vacuum_analyze(url)


def check_done(url: str, jobs: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        done = database.count_rows(conn, "jobs", "done")
    if done != jobs:
        raise RuntimeError(f"drain finished with {done} of {jobs} jobs done")


def _batches(total: int, size: int) -> list[int]:
    return [min(size, total - start) for start in range(0, total, size)]


def migrate(url: str) -> None:
    """pgbeat's schema, so the baselines run on exactly the table pgbeat uses."""
    import pgbeat

    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)


def main() -> None:
    args = parse_system_arguments(system_arguments(__doc__ or ""))
    url = args.url
    migrate(url)
    log("raw_sql: enqueue, one INSERT per transaction")
    results = [_emptied(url, enqueue_single(url, args.enqueue_jobs))]
    log("raw_sql: bulk enqueue, unnest and COPY")
    for bulk in (enqueue_unnest, enqueue_copy):
        results.append(
            best_run(partial(_emptied_after, url, bulk, args.bulk_jobs, args.batch), args.repeat)
        )
    batched_jobs = args.jobs * BATCHED_DRAIN_FACTOR
    log(f"raw_sql: drain {batched_jobs} jobs batched, {args.jobs} jobs one by one")
    for limit, jobs in ((100, batched_jobs), (1, args.jobs)):
        results.append(median_run(partial(drain, url, jobs, limit), args.repeat))
    emit(results)


def _emptied(url: str, result: Result) -> Result:
    """``result``, after emptying the table for whatever runs next."""
    database.truncate(url, "jobs")
    return result


def _emptied_after(
    url: str, bulk: Callable[[str, int, int], Result], jobs: int, batch: int
) -> Result:
    """One bulk enqueue run, then the table emptied for whatever runs next."""
    return _emptied(url, bulk(url, jobs, batch))


if __name__ == "__main__":
    main()
