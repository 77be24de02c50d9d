"""Operators' actions on jobs: statistics, retry, cancel, run now, delete, purge (the job
list and a job's page are read by ``reads.py``).

The one home of each: ``pgbeat jobs ...`` and the dashboard both call these, and each
action is one statement of ``db/sql/jobs/actions.py`` on a list of ids, so the two faces
cannot drift apart. Nothing here is on a worker's hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, LiteralString

import psycopg
import psycopg.errors

from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.db.sql.jobs import retention as purge_sql
from pgbeat.errors import JobNotFound, Refused
from pgbeat.jobs import control
from pgbeat.jobs.control import CancelResult

STATUSES = ("pending", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")
RETRY_BATCH = 1000  # jobs put back per statement by retry


@dataclass(frozen=True)
class Stats:
    counts: dict[str, dict[str, int]]  # status -> kind -> count
    due_unclaimed: int
    oldest_due_age_s: float | None
    failed_last_hour: int

    def totals(self) -> dict[str, int]:
        return {status: sum(self.counts.get(status, {}).values()) for status in STATUSES}


def stats(conn: psycopg.Connection[Any]) -> Stats:
    """Counts by status and kind, plus the queue's backlog and recent failures."""
    counts: dict[str, dict[str, int]] = {}
    for status, kind, count in conn.execute(action_sql.JOBS_COUNT_BY_STATUS_KIND):
        counts.setdefault(status, {})[kind] = int(count)
    row = conn.execute(action_sql.JOBS_SUMMARY).fetchone()
    assert row is not None
    due, oldest, failed = row
    return Stats(counts, int(due), None if oldest is None else float(oldest), int(failed))


@dataclass(frozen=True)
class Retried:
    ids: list[int]  # back to pending
    kept: int  # failed jobs left failed: another job of their job_key is live


@dataclass(frozen=True)
class Cancelled:
    ids: list[int]  # pending jobs now cancelled
    stopping: list[int]  # running jobs told to stop: each ends cancelled

    @property
    def count(self) -> int:
        return len(self.ids) + len(self.stopping)


# -- the actions: one statement each, on ids, for every face -------------------------------


def retry(conn: psycopg.Connection[Any], ids: Sequence[int]) -> list[int]:
    """These jobs, unless running, back to pending, due now, attempts reset; the ids retried.

    Of the jobs of one job_key only the newest given, and none whose key another live job
    holds. In batches of ``RETRY_BATCH``; a batch that meets a key taken meanwhile (a unique
    violation, or a deadlock with a concurrent retry) is retried job by job, so one taken
    key never aborts the rest.
    """
    revived: list[int] = []
    for start in range(0, len(ids), RETRY_BATCH):
        revived += _retry_batch(conn, list(ids[start : start + RETRY_BATCH]))
    return revived


def cancel(conn: psycopg.Connection[Any], ids: Sequence[int], reason: str) -> Cancelled:
    """Pending jobs cancelled, running ones told to stop (they end cancelled); ``reason``
    (who, why) in last_error. Finished jobs are left as they are."""
    rows = conn.execute(action_sql.JOBS_CANCEL, {"ids": list(ids), "reason": reason}).fetchall()
    return Cancelled(
        [int(r[0]) for r in rows if r[1] != "running"],
        [int(r[0]) for r in rows if r[1] == "running"],
    )


def run_now(conn: psycopg.Connection[Any], ids: Sequence[int]) -> list[int]:
    """Pending jobs due now; the ids moved."""
    return _ids(conn, action_sql.JOBS_RUN_NOW, ids)


def delete(conn: psycopg.Connection[Any], ids: Sequence[int]) -> list[int]:
    """Finished jobs deleted with their record; the ids deleted."""
    return _ids(conn, action_sql.JOBS_DELETE, ids)


def _ids(conn: psycopg.Connection[Any], query: LiteralString, ids: Sequence[int]) -> list[int]:
    return [int(r[0]) for r in conn.execute(query, {"ids": list(ids)}).fetchall()]


def _retry_batch(conn: psycopg.Connection[Any], ids: list[int]) -> list[int]:
    try:
        with conn.transaction():  # a savepoint inside the caller's transaction
            return _ids(conn, action_sql.JOBS_RETRY, ids)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
        # A key taken between the check and the write; or two retries at once, each making
        # live a job whose key the other's batch makes live too, in opposite orders (each
        # waits on the other's uncommitted index entry): job by job, one key at a time.
        if len(ids) == 1:
            return []
        return [job_id for one in ids for job_id in _retry_batch(conn, [one])]


# -- the CLI's forms of them: one job by id, with the reason of a refusal -----------------


def retry_job(conn: psycopg.Connection[Any], job_id: int) -> None:
    """``retry`` of one job; ``Refused`` while it is running or another live job holds its
    job_key, ``JobNotFound`` when there is none."""
    if retry(conn, [job_id]):
        return
    holder = conn.execute(action_sql.JOBS_KEY_HOLDER, {"id": job_id}).fetchone()
    if holder is not None:
        raise Refused(
            f"cannot retry job {job_id}: job {holder[0]} is the live job of its "
            f"job_key {holder[1]!r}"
        )
    _explain(conn, job_id, "retry", "it is running; cancel it or wait for its outcome")


def retry_failed(conn: psycopg.Connection[Any], kind: str | None) -> Retried:
    """Every failed job (of ``kind``) back to pending, but one per job_key, and none whose
    key another live job holds (those stay failed and are counted)."""
    row = conn.execute(action_sql.JOBS_FAILED_TO_RETRY, {"kind": kind}).fetchone()
    assert row is not None
    candidates, failed = row
    revived = retry(conn, candidates)
    return Retried(revived, int(failed) - len(revived))


def cancel_job(conn: psycopg.Connection[Any], job_id: int, reason: str) -> CancelResult:
    """``cancel`` of one job (``control.cancel_job``, the API's call, runs the same
    statement), ``reason`` (who, why) in last_error as 'cancelled: <reason>'; a finished
    one is refused."""
    result: CancelResult = control.cancel_job(conn, job_id, reason=reason)
    if not result.accepted:
        raise Refused(f"cannot cancel job {job_id}: it is {result.previous_status}")
    return result


def purge_jobs(
    conn: psycopg.Connection[Any],
    older_than: timedelta,
    statuses: tuple[str, ...] = FINISHED,
    batch: int = 5000,
) -> int:
    """Delete finished jobs older than ``older_than``, in batches; returns how many.

    Scheduled jobs younger than their schedule's catch-up window (``keep_until``) stay.
    """
    unknown = [s for s in statuses if s not in FINISHED]
    if unknown:
        raise Refused(
            f"purge deletes finished jobs only ({', '.join(FINISHED)}), not {', '.join(unknown)}"
        )
    deleted = 0
    while True:
        params = {"statuses": list(statuses), "older_than": older_than, "batch": batch}
        count = conn.execute(purge_sql.JOBS_DELETE_FINISHED, params).rowcount
        deleted += count
        if count < batch:
            return deleted


def _explain(conn: psycopg.Connection[Any], job_id: int, action: str, why_running: str) -> None:
    row = conn.execute(action_sql.JOBS_STATUS, {"id": job_id}).fetchone()
    if row is None:
        raise JobNotFound(f"no job with id {job_id}")
    status = row[0]
    if status == "running":
        raise Refused(f"cannot {action} job {job_id}: {why_running}")
    raise Refused(f"cannot {action} job {job_id}: it is {status}")


def age_text(seconds: float | None) -> str:
    """A short human age: '3.2s', '4m10s', '-' for none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
