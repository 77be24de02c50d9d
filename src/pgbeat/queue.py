"""The queue's operations, one statement each: enqueue, claim, complete, retry, fail, reap.

``enqueue`` runs on the caller's connection and inside the caller's transaction, so a job
commits or rolls back with the business write that caused it. No loops, no sleeping here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, overload

import psycopg
import pydantic
from psycopg.types.json import Jsonb, set_json_loads

from pgbeat import queries
from pgbeat.arrays import number_array, text_array
from pgbeat.job import Job

DEFAULT_MAX_ATTEMPTS = 8  # the column default of migrations/0001_jobs.sql
ERROR_TEXT_LIMIT = 10_000  # last_error keeps the head of a huge message, not 10 MB of it


@dataclass(frozen=True)
class NewJob:
    """One job for ``enqueue_many``."""

    kind: str
    payload: Any = None
    run_at: datetime | None = None
    delay: timedelta | None = None
    unique_key: str | None = None
    max_attempts: int | None = None


def _insert_params(
    kind: str,
    payload: Any,
    run_at: datetime | None,
    delay: timedelta | None,
    unique_key: str | None,
    max_attempts: int | None,
) -> dict[str, Any]:
    _check_job(kind, run_at, delay, max_attempts)
    return {
        "kind": kind,
        "payload": Jsonb(json_value(payload)),
        "run_at": run_at,
        "delay": delay or timedelta(0),
        "unique_key": unique_key,
        "max_attempts": max_attempts or DEFAULT_MAX_ATTEMPTS,
    }


def _check_job(
    kind: str, run_at: datetime | None, delay: timedelta | None, max_attempts: int | None
) -> None:
    if not kind or not isinstance(kind, str):
        raise ValueError("a job's kind must be a non-empty string")
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    if run_at is not None and run_at.tzinfo is None:
        raise ValueError("run_at must be timezone-aware")
    if max_attempts is not None and max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")


def json_value(payload: Any) -> Any:
    """A payload as plain JSON data: pydantic models are dumped, ``None`` becomes ``{}``."""
    if payload is None:
        return {}
    if isinstance(payload, pydantic.BaseModel):
        return payload.model_dump(mode="json")
    return payload


@overload
def enqueue(
    conn: psycopg.Connection[Any],
    kind: str,
    payload: Any = None,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
) -> int | None: ...


@overload
def enqueue(
    conn: psycopg.AsyncConnection[Any],
    kind: str,
    payload: Any = None,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
) -> Any: ...


def enqueue(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
    kind: str,
    payload: Any = None,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
) -> Any:
    """Insert a job on ``conn``, in its current transaction; return its id.

    Returns ``None`` when a job of this kind with ``unique_key`` already exists. ``delay``
    counts from the database clock. With an ``AsyncConnection`` this returns a coroutine
    (``await pgbeat.enqueue(aconn, ...)``), the same as ``enqueue_async``.
    """
    if isinstance(conn, psycopg.AsyncConnection):
        return enqueue_async(
            conn,
            kind,
            payload,
            run_at=run_at,
            delay=delay,
            unique_key=unique_key,
            max_attempts=max_attempts,
        )
    params = _insert_params(kind, payload, run_at, delay, unique_key, max_attempts)
    row = conn.execute(queries.JOBS_INSERT, params).fetchone()
    return None if row is None else int(row[0])


async def enqueue_async(
    conn: psycopg.AsyncConnection[Any],
    kind: str,
    payload: Any = None,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
) -> int | None:
    """``enqueue`` for ``psycopg.AsyncConnection``: the same statement, awaited."""
    params = _insert_params(kind, payload, run_at, delay, unique_key, max_attempts)
    cursor = await conn.execute(queries.JOBS_INSERT, params)
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


def _many_params(jobs: Iterable[NewJob]) -> dict[str, str]:
    """The jobs as one array literal per column (arrays.py says why)."""
    kinds: list[str] = []
    payloads: list[str] = []
    run_ats: list[str | None] = []
    delays: list[str] = []
    unique_keys: list[str | None] = []
    max_attempts: list[str] = []
    for job in jobs:
        _check_job(job.kind, job.run_at, job.delay, job.max_attempts)
        kinds.append(job.kind)
        payloads.append(json.dumps(json_value(job.payload)))
        run_ats.append(None if job.run_at is None else job.run_at.isoformat())
        delays.append("0" if job.delay is None else repr(job.delay.total_seconds()))
        unique_keys.append(job.unique_key)
        max_attempts.append(str(job.max_attempts or DEFAULT_MAX_ATTEMPTS))
    return {
        "kinds": text_array(kinds),
        "payloads": text_array(payloads),
        "run_ats": text_array(run_ats),
        "delay_seconds": number_array(delays),
        "unique_keys": text_array(unique_keys),
        "max_attempts": number_array(max_attempts),
    }


def enqueue_many(conn: psycopg.Connection[Any], jobs: Iterable[NewJob]) -> list[int]:
    """Insert many jobs in one statement on ``conn``; return the ids of those inserted.

    Jobs whose ``(kind, unique_key)`` already exists are skipped, so the result may be
    shorter than the input.
    """
    params = _many_params(jobs)
    if params["kinds"] == "{}":
        return []
    return [int(row[0]) for row in conn.execute(queries.JOBS_INSERT_MANY, params)]


async def enqueue_many_async(
    conn: psycopg.AsyncConnection[Any], jobs: Iterable[NewJob]
) -> list[int]:
    """``enqueue_many`` for ``psycopg.AsyncConnection``."""
    params = _many_params(jobs)
    if params["kinds"] == "{}":
        return []
    cursor = await conn.execute(queries.JOBS_INSERT_MANY, params)
    return [int(row[0]) for row in await cursor.fetchall()]


# -- the worker's side ----------------------------------------------------------------------

_decode_json = json.JSONDecoder().decode


def load_payload(data: str | bytes) -> Any:
    """A claimed payload: ``{}`` (the default, and most scheduled jobs) without parsing.

    Registered on the worker's connection: ``json.loads`` on bytes first sniffs their
    encoding in Python, which made decoding 13% of a busy worker's loop.
    """
    if data == b"{}":
        return {}
    return _decode_json(data if isinstance(data, str) else data.decode())


def use_fast_payloads(conn: psycopg.Connection[Any]) -> None:
    """Decode json/jsonb columns on ``conn`` with ``load_payload``."""
    set_json_loads(load_payload, conn)


def claim_jobs(
    conn: psycopg.Connection[Any], limit: int, lease: timedelta, kinds: Sequence[str] | None
) -> list[Job]:
    """Lease up to ``limit`` due jobs and commit at once (``conn`` is in autocommit)."""
    rows = conn.execute(
        queries.JOBS_CLAIM,
        {"limit": limit, "lease": lease, "kinds": list(kinds) if kinds else None},
    ).fetchall()
    return [Job._make(row) for row in rows]


def seconds_to_next_job(conn: psycopg.Connection[Any], kinds: Sequence[str] | None) -> float | None:
    """Seconds (by the database clock) until the earliest pending job is due; None if none."""
    row = conn.execute(
        queries.JOBS_SECONDS_TO_NEXT, {"kinds": list(kinds) if kinds else None}
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def complete_jobs(conn: psycopg.Connection[Any], jobs: Sequence[Job]) -> None:
    """Mark these runs done (runs whose job was claimed again since are left alone)."""
    conn.execute(queries.JOBS_COMPLETE, _fences(jobs))


def retry_jobs(
    conn: psycopg.Connection[Any],
    retries: Sequence[tuple[Job, str, datetime | timedelta]],
) -> None:
    """Put failed runs back to pending at an absolute time or after a delay."""
    conn.execute(
        queries.JOBS_RETRY,
        {
            **_fences([job for job, _, _ in retries]),
            "errors": [truncate_error(error) for _, error, _ in retries],
            "run_ats": [when if isinstance(when, datetime) else None for _, _, when in retries],
            "delays": [when if isinstance(when, timedelta) else None for _, _, when in retries],
        },
    )


def fail_jobs(conn: psycopg.Connection[Any], failures: Sequence[tuple[Job, str]]) -> None:
    """Park these runs in the ``failed`` dead letter with their error."""
    conn.execute(
        queries.JOBS_FAIL,
        {
            **_fences([job for job, _ in failures]),
            "errors": [truncate_error(error) for _, error in failures],
        },
    )


def release_jobs(conn: psycopg.Connection[Any], jobs: Sequence[Job]) -> None:
    """Return unfinished runs to pending at shutdown, without charging their attempt."""
    conn.execute(queries.JOBS_RELEASE, _fences(jobs))


def _fences(jobs: Sequence[Job]) -> dict[str, str]:
    """The (id, attempt) pairs of runs as two array literals, ids[i] ran as attempts[i].

    A busy worker sends these for every job it finishes (as literals: 330 -> 80 us per 100).
    """
    return {
        "ids": number_array([str(job.id) for job in jobs]),
        "attempts": number_array([str(job.attempt) for job in jobs]),
    }


def reap_expired(conn: psycopg.Connection[Any]) -> list[tuple[int, str, str]]:
    """Return expired leases to pending (or failed when out of attempts); (id, kind, status)."""
    return [(int(r[0]), r[1], r[2]) for r in conn.execute(queries.JOBS_REAP).fetchall()]


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    """The database's clock."""
    row = conn.execute(queries.DATABASE_NOW).fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def truncate_error(error: str) -> str:
    """An error as ``last_error`` can hold it: no NUL (PostgreSQL text refuses it), no 10 MB."""
    error = error.replace("\x00", "\\x00")
    if len(error) <= ERROR_TEXT_LIMIT:
        return error
    return error[:ERROR_TEXT_LIMIT] + f"... [truncated, {len(error)} characters in all]"
