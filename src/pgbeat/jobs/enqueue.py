"""Enqueueing jobs: one statement on the caller's connection, inside the caller's transaction.

A job commits or rolls back with the business write that caused it. No loops, no sleeping.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat import flow, job_inputs
from pgbeat.db import runner
from pgbeat.db.runner import Plan
from pgbeat.db.sql.jobs import enqueue as enqueue_sql
from pgbeat.jobs import keys, rows
from pgbeat.jobs.keys import OnConflict
from pgbeat.jobs.payloads import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_ENV,
    encode_payload,
    json_value,
    max_payload_bytes,
)
from pgbeat.jobs.rows import NewJob

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_ENV",
    "NewJob",
    "encode_payload",
    "enqueue",
    "enqueue_async",
    "enqueue_many",
    "enqueue_many_async",
    "json_value",
    "max_payload_bytes",
]


@runner.async_aware("enqueue_async")
def enqueue(
    conn: psycopg.Connection[Any],
    kind: str,
    payload: Any = None,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
    job_key: str | None = None,
    on_conflict: OnConflict = "ignore",
    max_wait: timedelta | None = None,
    queue: str = flow.DEFAULT_QUEUE,
    priority: int = 0,
    limit_key: str | None = None,
    tags: Sequence[str] | None = None,
) -> int | None:
    """Insert a job on ``conn``, in its current transaction; return its id.

    Returns ``None`` when a job of this kind with ``unique_key`` already exists. ``delay``
    counts from the database clock. ``job_key`` names the live (pending or running) job of
    the kind; when one exists, ``on_conflict`` decides: ``"ignore"`` returns ``None``, and
    ``"replace"``, ``"keep_earliest"``, ``"keep_latest"`` give a pending job the new payload
    and the new, earlier or later ``run_at`` (at most ``max_wait`` after its first request),
    or supersede a running one with a new job, and return the live job's id (keys.py).
    ``queue``, ``priority`` (higher runs first among due jobs, -32768..32767) and
    ``limit_key`` (what a queue's per-key limits count by) are docs/flow-control.md's.
    ``tags`` (at most 20 strings of at most 100 characters) label the job for operators:
    ``pgbeat jobs list --tag T``, the dashboard's filter, ``JobContext.tags``.
    ``conn`` may also be a SQLAlchemy session or connection or Django's connection
    (db/frameworks.py). With an async one this returns the coroutine of ``enqueue_async``
    (``await pgbeat.enqueue(aconn, ...)``).
    """
    plan = _enqueue_plan(
        kind,
        payload,
        run_at,
        delay,
        unique_key,
        max_attempts,
        (job_key, on_conflict, max_wait),
        (queue, priority, limit_key),
        tags,
    )
    return runner.run(conn, plan)


async def enqueue_async(
    conn: object,
    kind: str,
    payload: Any = None,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
    job_key: str | None = None,
    on_conflict: OnConflict = "ignore",
    max_wait: timedelta | None = None,
    queue: str = flow.DEFAULT_QUEUE,
    priority: int = 0,
    limit_key: str | None = None,
    tags: Sequence[str] | None = None,
) -> int | None:
    """``enqueue`` for ``psycopg.AsyncConnection`` (or an async SQLAlchemy one), awaited."""
    plan = _enqueue_plan(
        kind,
        payload,
        run_at,
        delay,
        unique_key,
        max_attempts,
        (job_key, on_conflict, max_wait),
        (queue, priority, limit_key),
        tags,
    )
    return await runner.run_on_async(conn, plan)


def _enqueue_plan(
    kind: str,
    payload: Any,
    run_at: datetime | None,
    delay: timedelta | None,
    unique_key: str | None,
    max_attempts: int | None,
    keyed_by: tuple[str | None, OnConflict, timedelta | None],
    flow_given: tuple[str, int, str | None],
    tags: Sequence[str] | None,
) -> Plan[int | None]:
    """One job's insert: by key (keys.py's plan) or plain; every check before any SQL."""
    job_key, on_conflict, max_wait = keyed_by
    keys.check_keyed(job_key, unique_key, on_conflict, max_wait)
    flow_fields = flow.check_flow(*flow_given)
    checked_tags = job_inputs.check_tags(tags)
    if job_key is not None:
        keyed = rows.keyed_job(
            kind, payload, run_at, delay, max_attempts, job_key, on_conflict, max_wait, flow_fields
        )
        return (yield from keys.enqueue_one_plan(replace(keyed, tags=checked_tags)))
    params = rows.insert_params(
        kind, payload, run_at, delay, unique_key, max_attempts, *flow_fields, tags=checked_tags
    )
    found = yield enqueue_sql.JOBS_INSERT, params
    return None if not found else int(found[0][0])


def _many_plan(params: dict[str, Any], keyed: list[keys.KeyedJob]) -> Plan[list[int]]:
    """The unkeyed jobs in one statement, then the keyed ones by keys.py's plan."""
    ids: list[int] = []
    if params["kinds"] != "{}":
        ids = [int(row[0]) for row in (yield enqueue_sql.JOBS_INSERT_MANY, params)]
    if keyed:
        ids.extend((yield from keys.enqueue_plan(keyed)).values())
    return ids


@runner.async_aware("enqueue_many_async")
def enqueue_many(conn: psycopg.Connection[Any], jobs: Iterable[NewJob]) -> list[int]:
    """Insert many jobs in one statement on ``conn``; return the ids of those inserted.

    Jobs whose ``(kind, unique_key)`` already exists are skipped, so the result may be
    shorter than the input. Jobs with a ``job_key`` follow their ``on_conflict`` as in
    ``enqueue`` (a key given twice keeps its last job) and add the ids of the live jobs
    they inserted or updated. ``conn`` is anything ``enqueue`` takes; an async one returns
    the coroutine of ``enqueue_many_async``.
    """
    params, keyed = rows.many_params(jobs)  # every check before any SQL
    # one call, one commit: the runner commits a first statement alone on autocommit
    return runner.run(conn, _many_plan(params, keyed), together=bool(keyed))


async def enqueue_many_async(conn: object, jobs: Iterable[NewJob]) -> list[int]:
    """``enqueue_many`` for ``psycopg.AsyncConnection`` (or an async SQLAlchemy one)."""
    params, keyed = rows.many_params(jobs)
    return await runner.run_on_async(conn, _many_plan(params, keyed), together=bool(keyed))
