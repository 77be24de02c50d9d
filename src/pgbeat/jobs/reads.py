"""The job list and a job's page as every face shows them.

Decided once here: ``pgbeat jobs list`` / ``pgbeat jobs show`` (text and ``--json``) and the
dashboard's jobs pages only render these answers: a listed job's error line, a job's every
column, its recorded attempts and when each started, a done job's own run time, the
schedule it is a period or manual run of, and which values cannot be read. A value Python
cannot hold (a time of infinity, JSON nested too deeply) loads as ``Unreadable``, so one
such row never hides the others from an operator. The dashboard's filtered, paged list
(ui/jobs_data.py) takes its error line from the same SQL fragment as ``list_jobs``
(db/sql/jobs/actions.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db import guarded
from pgbeat.db.guarded import Unreadable
from pgbeat.db.sql import attempts as attempt_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.db.sql.jobs import dashboard as dashboard_sql
from pgbeat.errors import JobNotFound

ERROR_LINE_CHARS = 200  # as the SQL's ERROR_LINE cuts a listed job's error


def list_jobs(
    conn: psycopg.Connection[Any],
    *,
    status: str | None,
    kind: str | None,
    limit: int,
    tag: str | None = None,
) -> list[dict[str, Any]]:
    """The newest jobs, newest first, each with its ``error_line``; with ``tag``, only those
    that have it (jobs_tags)."""
    params = {"status": status, "kind": kind, "limit": limit, "tag": tag}
    return guarded.rows(conn, action_sql.JOBS_LIST, params)


# The run_at of a workflow step held for its parents (migration 0017): in no queue yet, so
# the faces say "waiting for its parents" rather than a due time 8,000 years away.
WAITING_RUN_AT = datetime(9999, 12, 29, tzinfo=UTC)


@dataclass(frozen=True)
class JobShown:
    """Everything a face shows of one job."""

    job: dict[str, Any]  # every column
    attempts: list[dict[str, Any]]  # recorded ones, oldest first, each with its started_at
    run_seconds: float | None  # a done job's own run: from its claim to its finish
    schedule: str | None  # the schedule whose period or manual run the job is

    @property
    def waiting_for_parents(self) -> bool:
        """A workflow step still held for its parents (pending, at the held run_at)."""
        job = self.job
        return (
            job.get("status") == "pending"
            and job.get("workflow_id") is not None
            and job.get("run_at") == WAITING_RUN_AT
        )

    @property
    def unreadable(self) -> dict[str, str]:
        """The columns whose value cannot be read, and why."""
        return unreadable(self.job)


def show_job(conn: psycopg.Connection[Any], job_id: int) -> JobShown:
    """Job ``job_id`` as the faces show it; ``JobNotFound`` if there is none."""
    found = guarded.rows(conn, dashboard_sql.JOBS_DETAIL, {"id": job_id})
    if not found:
        raise JobNotFound(f"no job with id {job_id}")
    job = found[0]
    attempts = guarded.rows(conn, attempt_sql.ATTEMPTS_OF_JOB, {"id": job_id})
    for attempt in attempts:
        seconds, finished_at = attempt["duration_s"], attempt["finished_at"]
        known = isinstance(finished_at, datetime) and _finite(seconds)
        attempt["started_at"] = finished_at - timedelta(seconds=seconds) if known else None
        attempt["error_line"] = error_line(attempt["error"])
    started, finished = job.get("started_at"), job.get("finished_at")
    run_seconds = (
        (finished - started).total_seconds()
        if job["status"] == "done"
        and isinstance(started, datetime)
        and isinstance(finished, datetime)
        else None
    )
    return JobShown(job, attempts, run_seconds, _schedule_of(conn, job))


def error_line(error: object) -> str:
    """The first line of an error, as a list shows it ('' for none or an unreadable one)."""
    if not isinstance(error, str):
        return ""
    return error.split("\n", 1)[0][:ERROR_LINE_CHARS]


def unreadable(row: dict[str, Any]) -> dict[str, str]:
    """A row's columns whose value cannot be read, and why."""
    return {k: str(v) for k, v in row.items() if isinstance(v, Unreadable)}


def as_json(row: dict[str, Any]) -> dict[str, Any]:
    """A row for JSON: a value that cannot be read is null, and named under ``unreadable``
    (column -> reason)."""
    bad = unreadable(row)
    if not bad:
        return row
    return {**{k: None if k in bad else v for k, v in row.items()}, "unreadable": bad}


def _schedule_of(conn: psycopg.Connection[Any], job: dict[str, Any]) -> str | None:
    """The schedule a job belongs to: its unique key is ``name@period`` (or
    ``name@manual:...``) and a schedule of that name exists."""
    key = job.get("unique_key")
    name, at, _ = key.partition("@") if isinstance(key, str) else ("", "", "")
    if not (name and at):
        return None
    found = conn.execute(schedule_sql.SCHEDULES_NAMED, {"name": name}).fetchone()
    return name if found is not None else None


def _finite(seconds: Any) -> bool:
    """A recorded duration that makes a time: not NULL, NaN or infinite (the worker role
    may write any float)."""
    return isinstance(seconds, int | float) and math.isfinite(seconds) and abs(seconds) < 1e9
