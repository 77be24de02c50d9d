"""Jobs by key: the live job of ``(kind, job_key)``, enqueued with a conflict policy,
cancelled, rescheduled or found, in the caller's transaction.

A ``job_key`` names the one live (pending or running) job of its kind; the partial unique
index ``jobs_live_key`` keeps it to one and frees the key when the job ends. A running job
is never rewritten: it gives up its key (it is *superseded*) and never runs again, and the
new values go to a new pending job. Each call is a short plan of statements, written once
as a generator and driven by a sync or an async runner, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

import psycopg

from pgbeat import job_inputs
from pgbeat.db.literals import number_array, text_array
from pgbeat.db.runner import Plan, async_aware, run, run_on_async
from pgbeat.db.sql.jobs import enqueue as enqueue_sql
from pgbeat.db.sql.jobs import keys as key_sql
from pgbeat.errors import KeyContended
from pgbeat.observe import tracing

OnConflict = Literal["ignore", "replace", "keep_earliest", "keep_latest"]
ON_CONFLICT_MODES: tuple[str, ...] = get_args(OnConflict)
# Upsert, supersede, upsert again: a turn fails only when, in between, another transaction
# committed a new job for the key and a worker claimed it. Past this many, give up loudly.
SUPERSEDE_TURNS = 10

Key = tuple[str, str]  # (kind, job_key)


@dataclass(frozen=True)
class KeyedJob:
    """One keyed job to enqueue; ``payload`` is JSON text, ``max_attempts`` is resolved."""

    kind: str
    job_key: str
    payload: str
    run_at: datetime | None
    delay: timedelta | None
    max_attempts: int
    on_conflict: OnConflict = "ignore"
    max_wait: timedelta | None = None
    queue: str = "default"
    priority: int = 0
    limit_key: str | None = None
    tags: list[str] | None = None  # checked (job_inputs.check_tags)

    @property
    def key(self) -> Key:
        return (self.kind, self.job_key)


@dataclass(frozen=True)
class Cancelled:
    """What ``cancel`` did: a pending job is now cancelled, or a running one was told to stop
    (``was_running``: its key is free at once, its handler is told, and it ends cancelled)."""

    id: int
    was_running: bool


@dataclass(frozen=True)
class LiveJob:
    """The live job of a key, as ``find`` returns it."""

    id: int
    kind: str
    job_key: str
    status: str  # pending or running
    payload: Any
    run_at: datetime
    attempts: int
    max_attempts: int
    created_at: datetime


def check_keyed(
    job_key: str | None, unique_key: str | None, on_conflict: str, max_wait: timedelta | None
) -> None:
    """Reject combinations that have no meaning, before any statement runs."""
    job_inputs.check_times(None, None, max_wait)
    if on_conflict not in ON_CONFLICT_MODES:
        raise ValueError(f"on_conflict must be one of {', '.join(ON_CONFLICT_MODES)}")
    if job_key is None:
        if on_conflict != "ignore" or max_wait is not None:
            raise ValueError("on_conflict and max_wait apply to jobs with a job_key")
        return
    if not job_key or not isinstance(job_key, str):
        raise ValueError("a job_key must be a non-empty string")
    if unique_key is not None:
        raise ValueError("give job_key or unique_key, not both")
    if max_wait is not None and max_wait < timedelta(0):
        raise ValueError("max_wait must not be negative")


# -- plans: the statements of each call, independent of how they are run -------------------


def enqueue_plan(jobs: Sequence[KeyedJob]) -> Plan[dict[Key, int]]:
    """Enqueue keyed jobs; returns the id of each key's live job that was inserted or updated.

    A key repeated in ``jobs`` keeps its last occurrence. Keys go to the database sorted
    (one statement per on_conflict mode), so two batches of one mode that share keys lock
    their rows in the same order and do not deadlock.
    """
    last = {job.key: job for job in jobs}
    groups: dict[tuple[str, timedelta | None], list[KeyedJob]] = {}
    for key in sorted(last):
        job = last[key]
        groups.setdefault((job.on_conflict, job.max_wait), []).append(job)
    ids: dict[Key, int] = {}
    for (on_conflict, max_wait), group in groups.items():
        ids.update((yield from _upsert_plan(group, on_conflict, max_wait)))
    return ids


def enqueue_one_plan(job: KeyedJob) -> Plan[int | None]:
    """Enqueue one keyed job: the live job's id, or ``None`` when ``ignore`` found one."""
    ids = yield from enqueue_plan([job])
    return ids.get(job.key)


def _upsert_plan(
    jobs: list[KeyedJob], on_conflict: str, max_wait: timedelta | None
) -> Plan[dict[Key, int]]:
    """Upsert one group (one mode); supersede the running jobs that block it; repeat."""
    ids: dict[Key, int] = {}
    if on_conflict == "ignore":
        rows = yield enqueue_sql.JOBS_INSERT_KEYED, _columns(jobs, on_conflict, max_wait)
        return {(kind, job_key): int(job_id) for job_id, kind, job_key in rows}
    waiting = jobs
    for _ in range(SUPERSEDE_TURNS):
        rows = yield enqueue_sql.JOBS_UPSERT_KEYED, _columns(waiting, on_conflict, max_wait)
        ids.update(((kind, job_key), int(job_id)) for job_id, kind, job_key in rows)
        waiting = [job for job in waiting if job.key not in ids]
        if not waiting:
            return ids
        # No row back: the key's live job is running. It keeps its run, loses its key.
        yield enqueue_sql.JOBS_SUPERSEDE_KEYED, _superseding(waiting, on_conflict)
    raise KeyContended(
        f"the live job of {len(waiting)} key(s) (e.g. {waiting[0].kind} {waiting[0].job_key!r}) "
        f"was claimed again {SUPERSEDE_TURNS} times while being replaced; try again"
    )


def _columns(
    jobs: Sequence[KeyedJob], on_conflict: str, max_wait: timedelta | None
) -> dict[str, Any]:
    return {
        "kinds": text_array([job.kind for job in jobs]),
        "job_keys": text_array([job.job_key for job in jobs]),
        "payloads": text_array([job.payload for job in jobs]),
        "run_ats": text_array([None if j.run_at is None else j.run_at.isoformat() for j in jobs]),
        "delay_seconds": number_array(
            "0" if job.delay is None else repr(job.delay.total_seconds()) for job in jobs
        ),
        "max_attempts": number_array(str(job.max_attempts) for job in jobs),
        "queues": text_array([job.queue for job in jobs]),
        "priorities": number_array(str(job.priority) for job in jobs),
        "limit_keys": text_array([job.limit_key for job in jobs]),
        "tags": text_array([None if j.tags is None else text_array(j.tags) for j in jobs]),
        "on_conflict": on_conflict,
        "max_wait": max_wait,
        "meta": tracing.meta_param(),
    }


def _superseding(jobs: Sequence[KeyedJob], on_conflict: str) -> dict[str, Any]:
    return {
        "kinds": text_array([job.kind for job in jobs]),
        "job_keys": text_array([job.job_key for job in jobs]),
        "reason": f"superseded while running by a newer enqueue of its job_key "
        f"(on_conflict={on_conflict}): not run again",
    }


def cancel_plan(kind: str, job_key: str, reason: str | None) -> Plan[Cancelled | None]:
    job_inputs.check_names(kind=kind, job_key=job_key)
    why = f"cancelled: {reason}" if reason else "cancelled by pgbeat.cancel()"
    rows = yield key_sql.JOBS_CANCEL_KEYED, {"kind": kind, "job_key": job_key, "reason": why}
    return None if not rows else Cancelled(int(rows[0][0]), bool(rows[0][1]))


def reschedule_plan(
    kind: str, job_key: str, run_at: datetime | None, delay: timedelta | None
) -> Plan[int | None]:
    job_inputs.check_names(kind=kind, job_key=job_key)
    job_inputs.check_times(run_at, delay)
    if (run_at is None) == (delay is None):
        raise ValueError("give run_at or delay (one of them)")
    if run_at is not None and run_at.tzinfo is None:
        raise ValueError("run_at must be timezone-aware")
    params = {"kind": kind, "job_key": job_key, "run_at": run_at, "delay": delay}
    rows = yield key_sql.JOBS_RESCHEDULE_KEYED, params
    return None if not rows else int(rows[0][0])


def find_plan(kind: str, job_key: str) -> Plan[LiveJob | None]:
    job_inputs.check_names(kind=kind, job_key=job_key)
    rows = yield key_sql.JOBS_FIND_KEYED, {"kind": kind, "job_key": job_key}
    return None if not rows else LiveJob(*rows[0])


# -- the public calls ------------------------------------------------------------------------
# Each takes what ``pgbeat.enqueue`` takes: a psycopg connection (the overload types it),
# an async one (a coroutine comes back), or a SQLAlchemy or Django connection.


@async_aware("cancel_async")
def cancel(
    conn: psycopg.Connection[Any], kind: str, job_key: str, *, reason: str | None = None
) -> Cancelled | None:
    """Cancel the live job of ``(kind, job_key)``; ``None`` if there is none.

    A pending job becomes ``cancelled`` (``last_error`` says who or why). A running one gives
    up its key at once and is told to stop, as ``cancel_job`` tells it (its async task is
    cancelled, a sync handler sees ``job.cancelled``); it ends ``cancelled``, never retried.
    Runs in ``conn``'s transaction: a rollback undoes it. An async connection returns the
    coroutine of ``cancel_async``.
    """
    return run(conn, cancel_plan(kind, job_key, reason))


async def cancel_async(
    conn: object, kind: str, job_key: str, *, reason: str | None = None
) -> Cancelled | None:
    """``cancel`` on an async connection, awaited."""
    return await run_on_async(conn, cancel_plan(kind, job_key, reason))


@async_aware("reschedule_async")
def reschedule(
    conn: psycopg.Connection[Any],
    kind: str,
    job_key: str,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
) -> int | None:
    """Move the pending live job of ``(kind, job_key)`` to ``run_at`` (or now + ``delay``,
    by the database clock); returns its id, or ``None`` (no pending job: nothing inserted).
    An async connection returns the coroutine of ``reschedule_async``."""
    return run(conn, reschedule_plan(kind, job_key, run_at, delay))


async def reschedule_async(
    conn: object,
    kind: str,
    job_key: str,
    *,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
) -> int | None:
    """``reschedule`` on an async connection, awaited."""
    return await run_on_async(conn, reschedule_plan(kind, job_key, run_at, delay))


@async_aware("find_async")
def find(conn: psycopg.Connection[Any], kind: str, job_key: str) -> LiveJob | None:
    """The live (pending or running) job of ``(kind, job_key)``, or ``None``. An async
    connection returns the coroutine of ``find_async``."""
    return run(conn, find_plan(kind, job_key))


async def find_async(conn: object, kind: str, job_key: str) -> LiveJob | None:
    """``find`` on an async connection, awaited."""
    return await run_on_async(conn, find_plan(kind, job_key))
