"""Steering one job from application code: cancel it (pending or running) and wait for its end.

``cancel_job`` runs in the caller's transaction, like ``enqueue``; ``wait`` blocks until the
job is ``done``, ``failed`` or ``cancelled``, woken by the workers' NOTIFY on a connection
of its own session, and polls behind a pooler or inside a transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from pgbeat.db import frameworks, pooler, schema_errors
from pgbeat.db.runner import Plan, async_aware, run, run_on_async
from pgbeat.db.sql import session as session_sql
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.db.sql.jobs import outcomes as outcome_sql
from pgbeat.errors import JobNotFound

FINAL_STATUSES = ("done", "failed", "cancelled")
POLL_FIRST = 0.02  # seconds between looks when polling, doubling up to POLL_MAX
POLL_MAX = 0.5
RECHECK = 2.0  # seconds: even when listening, look now and then (a job reaped to failed)
FINISHED_CHANNEL = "pgbeat_finished"  # public's; pgbeat_listen names the session schema's
MAX_JOB_ID = 2**63 - 1  # jobs.id is a bigint
MAX_REASON = 1000  # characters of a cancel's reason kept in last_error


@dataclass(frozen=True)
class CancelResult:
    """What ``cancel_job`` found and did.

    ``previous_status`` is the job's status when the cancel ran: ``pending`` (it is now
    cancelled), ``running`` (its handler is being told to stop; the job ends cancelled), or
    a final one (``done``, ``failed``, ``cancelled``): the job ended first, nothing changed.
    ``refused``: the job is live but the database let this role change nothing (row-level
    security, docs/least-privilege.sql): nothing changed, the job runs.
    """

    id: int
    previous_status: str
    refused: bool = False

    @property
    def accepted(self) -> bool:
        """True when the cancel took: the job was pending or running, and it changed."""
        return self.previous_status in ("pending", "running") and not self.refused


@dataclass(frozen=True)
class JobResult:
    """A finished job as ``wait`` returns it: its status, stored result and last error."""

    id: int
    status: str  # done, failed or cancelled
    result: Any  # the handler's return value (decoded JSON), None if it returned nothing
    last_error: str | None


def _check_id(job_id: object) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError(f"job_id must be an int, not {type(job_id).__name__}")
    if not 0 < job_id <= MAX_JOB_ID:  # before any SQL: a bigint overflow aborts the caller's
        raise ValueError("job_id must be a positive job id (a bigint)")  # transaction
    return job_id


def _reason(reason: object) -> str | None:
    """A cancel's reason as stored: text UTF-8 can encode, at most MAX_REASON characters."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise TypeError(f"reason must be text, not {type(reason).__name__}")
    try:
        reason.encode()
    except UnicodeEncodeError:
        raise ValueError("reason: text UTF-8 cannot encode (a lone surrogate)") from None
    if "\x00" in reason:
        raise ValueError("reason: text with NUL, which PostgreSQL cannot store")
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON] + "\u2026"


def _seconds(timeout: object) -> float:
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, int | float) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError("timeout must be a timedelta or a number of seconds")
    if not seconds >= 0:  # also NaN
        raise ValueError("timeout must not be negative")
    return seconds


# -- cancel ---------------------------------------------------------------------------------


def cancel_plan(job_id: int, reason: str | None) -> Plan[CancelResult]:
    """Cancel one job: a pending one at once, a running one by asking its worker."""
    why = f"cancelled: {reason}" if reason else "cancelled by pgbeat.cancel_job()"
    rows = yield action_sql.JOBS_CANCEL, {"ids": [job_id], "reason": why}
    if rows:
        return CancelResult(job_id, "running" if rows[0][1] == "running" else "pending")
    rows = yield action_sql.JOBS_STATUS, {"id": job_id}
    if not rows:
        raise JobNotFound(f"no job with id {job_id}")
    status = str(rows[0][0])
    # Live, yet the update changed no row: a row-level policy kept it from this role.
    return CancelResult(job_id, status, refused=status in ("pending", "running"))


@async_aware("cancel_job_async")
def cancel_job(
    conn: psycopg.Connection[Any], job_id: int, *, reason: str | None = None
) -> CancelResult:
    """Cancel job ``job_id``, pending or running; returns a ``CancelResult``.

    A pending job becomes ``cancelled``. A running one is asked to stop: at commit its
    worker hears of it (NOTIFY pgbeat_cancel, or its next lease renewal behind a pooler),
    cancels an async handler's task or sets a sync handler's ``job.cancelled``, and the job
    ends ``cancelled``, never to run again, whatever the handler does then. A job that ended
    already is left as it is (``CancelResult.accepted`` is False). ``JobNotFound`` when
    there is no such job. Runs in ``conn``'s transaction; an async connection returns the
    coroutine of ``cancel_job_async``.
    """
    return run(conn, cancel_plan(_check_id(job_id), _reason(reason)))


async def cancel_job_async(conn: object, job_id: int, *, reason: str | None = None) -> CancelResult:
    """``cancel_job`` on an async connection, awaited."""
    return await run_on_async(conn, cancel_plan(_check_id(job_id), _reason(reason)))


# -- wait -----------------------------------------------------------------------------------


def _finished(job_id: int, row: tuple[Any, ...] | None) -> JobResult | None:
    if row is None:
        raise JobNotFound(f"no job with id {job_id}")
    status, result, last_error = row
    return JobResult(job_id, status, result, last_error) if status in FINAL_STATUSES else None


def _concerns(payloads: Iterable[str], job_id: int) -> bool:
    """Whether any of these pgbeat_finished payloads may be about ``job_id``."""
    wanted = str(job_id)
    return any(not p or wanted in p.split(",") for p in payloads)


def _refuse_fixed_snapshot(job_id: int, isolation: object) -> None:
    """In a REPEATABLE READ or SERIALIZABLE transaction the job cannot be seen to change:
    say so at once rather than wait out the whole timeout."""
    if isolation in ("repeatable read", "serializable"):
        raise ValueError(
            f"pgbeat.wait cannot see job {job_id} finish inside a {isolation} transaction "
            "(its snapshot is fixed): wait outside the transaction, or in read committed"
        )


def _timed_out(job_id: int, seconds: float) -> TimeoutError:
    return TimeoutError(f"job {job_id} did not finish within {seconds:g}s")


def _can_listen(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """LISTEN needs a session of our own, outside a transaction (notifications arrive
    between transactions only)."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    return conn.autocommit and idle and pooler.pooler() is None


@async_aware("wait_async")
def wait(conn: psycopg.Connection[Any], job_id: int, *, timeout: timedelta | float) -> JobResult:
    """Block until job ``job_id`` is done, failed or cancelled; return its ``JobResult``.

    ``timeout`` (a timedelta or seconds) bounds the wait: ``TimeoutError`` after it.
    On an autocommit connection (not behind a pooler) it LISTENs and wakes within
    milliseconds of the commit of the job's end; in a transaction or behind a pooler it
    polls. An async connection returns the coroutine of ``wait_async``.
    """
    return _wait_sync(conn, _check_id(job_id), _seconds(timeout))


async def wait_async(conn: object, job_id: int, *, timeout: timedelta | float) -> JobResult:
    """``wait`` on an async connection (psycopg or SQLAlchemy), awaited."""
    job_id, seconds = _check_id(job_id), _seconds(timeout)
    return await _wait_async(await frameworks.async_connection(conn), job_id, seconds)


@schema_errors.translate
def _wait_sync(conn: psycopg.Connection[Any], job_id: int, seconds: float) -> JobResult:
    deadline = time.monotonic() + seconds
    listening = _can_listen(conn)
    channel = FINISHED_CHANNEL
    if listening:
        row = conn.execute(outcome_sql.JOBS_LISTEN_FINISHED).fetchone()
        channel = row[0] if row else channel
    try:
        pause = POLL_FIRST
        while True:
            found = _finished(
                job_id, conn.execute(outcome_sql.JOBS_STATE, {"id": job_id}).fetchone()
            )
            if found is not None:
                return found
            if pause == POLL_FIRST and conn.info.transaction_status == TransactionStatus.INTRANS:
                row = conn.execute(session_sql.TRANSACTION_ISOLATION).fetchone()
                _refuse_fixed_snapshot(job_id, None if row is None else row[0])
            left = deadline - time.monotonic()
            if left <= 0:
                raise _timed_out(job_id, seconds)
            if not listening:
                time.sleep(min(pause, left))
                pause = min(pause * 2, POLL_MAX)
                continue
            until = time.monotonic() + min(left, RECHECK)
            while (left := until - time.monotonic()) > 0:
                heard = [
                    n.payload
                    for n in conn.notifies(timeout=left, stop_after=1)
                    if n.channel == channel
                ]
                if _concerns(heard, job_id):
                    break
    finally:
        if listening and not conn.closed:
            conn.execute(outcome_sql.JOBS_UNLISTEN_FINISHED)


@schema_errors.translate
async def _wait_async(
    aconn: psycopg.AsyncConnection[Any], job_id: int, seconds: float
) -> JobResult:
    deadline = time.monotonic() + seconds
    listening = _can_listen(aconn)
    channel = FINISHED_CHANNEL
    if listening:
        row = await (await aconn.execute(outcome_sql.JOBS_LISTEN_FINISHED)).fetchone()
        channel = row[0] if row else channel
    try:
        pause = POLL_FIRST
        while True:
            cursor = await aconn.execute(outcome_sql.JOBS_STATE, {"id": job_id})
            found = _finished(job_id, await cursor.fetchone())
            if found is not None:
                return found
            if pause == POLL_FIRST and aconn.info.transaction_status == TransactionStatus.INTRANS:
                cursor = await aconn.execute(session_sql.TRANSACTION_ISOLATION)
                row = await cursor.fetchone()
                _refuse_fixed_snapshot(job_id, None if row is None else row[0])
            left = deadline - time.monotonic()
            if left <= 0:
                raise _timed_out(job_id, seconds)
            if not listening:
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, POLL_MAX)
                continue
            until = time.monotonic() + min(left, RECHECK)
            while (left := until - time.monotonic()) > 0:
                heard = [
                    n.payload
                    async for n in aconn.notifies(timeout=left, stop_after=1)
                    if n.channel == channel
                ]
                if _concerns(heard, job_id):
                    break
    finally:
        if listening and not aconn.closed:
            await aconn.execute(outcome_sql.JOBS_UNLISTEN_FINISHED)
