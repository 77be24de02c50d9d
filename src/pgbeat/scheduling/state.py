"""What operators and the dashboard do with schedules: list, history, pause, resume, run now,
backfill (backfill.py).

Every function takes a psycopg connection (or anything ``pgbeat.enqueue`` takes that is
synchronous; its ``_async`` twin takes an async one) and runs in its current transaction:
on an autocommit connection each call commits at once. Times are aware datetimes from the
database's clock. Running scheduler replicas see a pause or resume at commit; the period
decisions themselves are taken in the scheduler's insert statement, so a replica that has
not heard of a pause yet still records the period as skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import psycopg
from pydantic import ValidationError

from pgbeat.db.guarded import Unreadable, unreadable
from pgbeat.db.runner import DICTS, GUARDED, Plan, async_aware, run, run_on_async
from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.errors import ScheduleNotFound
from pgbeat.jobs import payloads
from pgbeat.scheduling.backfill import (
    MAX_BACKFILL_PERIODS,
    BackfillPlan,
    backfill,
    backfill_async,
    preview_backfill,
    preview_backfill_async,
)
from pgbeat.scheduling.catchup import MAX_CATCH_UP_PERIODS, last_fires_between
from pgbeat.scheduling.definition import schedule_from_row
from pgbeat.scheduling.schedule import Schedule

Outcome = Literal["enqueued", "skipped", "missed", "manual", "backfill", "buffered"]


@dataclass(frozen=True)
class PeriodRecord:
    """One row of a schedule's history: a period (or a manual run) and what became of it.

    ``fire_at`` is the period's fire time (UTC); for a manual run, when it was asked for.
    ``outcome`` is ``enqueued`` (``job_id`` is its job), ``skipped`` (``reason`` ``paused``
    or ``overlap``), ``missed`` (``reason`` names the catch-up policy that dropped it) or
    ``manual``. ``inserted_by`` is the ``pgbeat_processes`` id of the scheduler replica that
    decided it, or who asked for a manual run. ``job_status`` is None once the job is purged.
    """

    schedule: str
    fire_at: datetime
    outcome: Outcome
    reason: str | None
    job_id: int | None
    job_status: str | None
    inserted_at: datetime
    inserted_by: str | None
    # A schedule with a deadline watches its enqueued, buffered and missed periods: due_by
    # is the fire time plus the deadline; late once judged so (late_at: when it was found,
    # late_status: what its job was then). None and False without a deadline.
    due_by: datetime | None = None
    late: bool = False
    late_at: datetime | None = None
    late_status: str | None = None

    @property
    def lag(self) -> timedelta:
        """How long after its fire time the period was decided (inserted minus fire time)."""
        return self.inserted_at - self.fire_at


@dataclass(frozen=True)
class ScheduleState:
    """A schedule as stored: its definition, who owns it, its pause state, its last period.

    ``schedule`` is None (and ``problem`` says why) for a row that does not validate, such
    as one written by hand with SQL; the scheduler skips such rows. ``source`` is ``file``
    (a schedules file declares it) or ``api`` (``pgbeat.upsert_schedule``).
    """

    name: str
    schedule: Schedule | None
    problem: str | None
    source: Literal["file", "api"]
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    resumed_at: datetime | None
    created_at: datetime | None  # None only in a row whose time cannot be read (``problem``)
    updated_at: datetime | None
    updated_by: str | None
    definition_hash: str
    file_hash: str | None
    last: PeriodRecord | None  # the latest period, manual runs aside
    # why it paused itself (pause_after_failures); None for a pause an operator asked for
    paused_reason: str | None = None


# Each call has an ``_async`` twin for an async connection; both run one plan
# (db/runner.py), so the two cannot drift apart.


@async_aware("list_schedules_async")
def list_schedules(conn: psycopg.Connection[Any]) -> list[ScheduleState]:
    """Every schedule, by name, each with its latest period and that period's job.

    One indexed lookup of the history per schedule (the newest row), so the cost grows with
    the number of schedules, not with their history.
    """
    return run(conn, _list_plan(None))


async def list_schedules_async(conn: object) -> list[ScheduleState]:
    """``list_schedules`` on an async connection."""
    return await run_on_async(conn, _list_plan(None))


@async_aware("get_schedule_async")
def get_schedule(conn: psycopg.Connection[Any], name: str) -> ScheduleState | None:
    """The schedule ``name`` with its latest period, or None."""
    return run(conn, _get_plan(name))


async def get_schedule_async(conn: object, name: str) -> ScheduleState | None:
    """``get_schedule`` on an async connection."""
    return await run_on_async(conn, _get_plan(name))


@async_aware("schedule_history_async")
def schedule_history(
    conn: psycopg.Connection[Any], name: str, *, limit: int = 50, before: datetime | None = None
) -> list[PeriodRecord]:
    """The schedule's history, newest first: at most ``limit`` rows, before ``before`` if given.

    Pass the ``fire_at`` of the last row as ``before`` to page back (keyset paging). Rows
    are kept for the schedulers' retention (30 days unless configured otherwise), also
    after the schedule is deleted.
    """
    return run(conn, _history_plan(name, limit, before))


async def schedule_history_async(
    conn: object, name: str, *, limit: int = 50, before: datetime | None = None
) -> list[PeriodRecord]:
    """``schedule_history`` on an async connection."""
    return await run_on_async(conn, _history_plan(name, limit, before))


@async_aware("pause_schedule_async")
def pause_schedule(conn: psycopg.Connection[Any], name: str, *, by: str | None = None) -> bool:
    """Pause ``name``: its periods are recorded as skipped (paused) and nothing is enqueued.

    Returns True when it was running, False when it was paused already. A pause survives
    file syncs and changes from code. ``by`` is recorded (e.g. ``"ui:alice"``). Raises
    ``ScheduleNotFound`` when there is no such schedule.
    """
    return run(conn, _pause_plan(name, by))


async def pause_schedule_async(conn: object, name: str, *, by: str | None = None) -> bool:
    """``pause_schedule`` on an async connection."""
    return await run_on_async(conn, _pause_plan(name, by))


@async_aware("resume_schedule_async")
def resume_schedule(conn: psycopg.Connection[Any], name: str, *, by: str | None = None) -> bool:
    """Resume ``name``: its next period is enqueued; the periods of the pause are not caught up.

    Returns True when it was paused, False when it was running already. The pause's
    periods within the catch-up window that no replica recorded (none was running) are
    recorded as skipped (paused) in the same transaction. Raises ``ScheduleNotFound`` when
    there is no such schedule.
    """
    return run(conn, _resume_plan(name, by))


async def resume_schedule_async(conn: object, name: str, *, by: str | None = None) -> bool:
    """``resume_schedule`` on an async connection."""
    return await run_on_async(conn, _resume_plan(name, by))


@async_aware("run_schedule_now_async")
def run_schedule_now(
    conn: psycopg.Connection[Any], name: str, *, by: str | None = None, reason: str | None = None
) -> int:
    """Enqueue one job of ``name`` due now, recorded as a manual run; return the job's id.

    The job has the schedule's kind, payload and max_attempts, and the unique key
    ``<name>@manual:<job id>``, which can never be a period's: the next period is still
    enqueued as usual. It runs whether the schedule is paused or not, and whatever its
    overlap policy. Raises ``ScheduleNotFound`` when there is no such schedule.
    """
    return run(conn, _run_now_plan(name, by, reason))


async def run_schedule_now_async(
    conn: object, name: str, *, by: str | None = None, reason: str | None = None
) -> int:
    """``run_schedule_now`` on an async connection."""
    return await run_on_async(conn, _run_now_plan(name, by, reason))


# -- the plans ------------------------------------------------------------------------------


def _list_plan(name: str | None) -> Plan[list[ScheduleState]]:
    rows = yield schedule_sql.SCHEDULES_LIST, {"name": name}, GUARDED
    return [_state(row) for row in rows]


def _get_plan(name: str) -> Plan[ScheduleState | None]:
    found = yield from _list_plan(name)
    return found[0] if found else None


def _history_plan(name: str, limit: int, before: datetime | None) -> Plan[list[PeriodRecord]]:
    if limit < 1:  # checked when the plan is made, before any SQL
        raise ValueError("limit must be at least 1")
    return _history_rows(name, limit, before)


def _history_rows(name: str, limit: int, before: datetime | None) -> Plan[list[PeriodRecord]]:
    params = {"name": name, "limit": limit, "before": before}
    rows = yield history_sql.HISTORY_OF_SCHEDULE, params, DICTS
    return [_period(row) for row in rows]


def _pause_plan(name: str, by: str | None) -> Plan[bool]:
    rows = yield schedule_sql.SCHEDULES_PAUSE, {"name": name, "by": by}, DICTS
    return _changed(rows[0], name)


def _resume_plan(name: str, by: str | None) -> Plan[bool]:
    rows = yield schedule_sql.SCHEDULES_RESUME, {"name": name, "by": by}, GUARDED
    row = rows[0]
    if not _changed(row, name):
        return False
    schedule = None
    if unreadable(row) is None:  # a broken row runs no periods to record
        schedule, _ = validated_schedule(row)
    if schedule is not None:
        start = max(row["paused_at"], row["resumed_at"] - schedule.catch_up_window)
        fires = last_fires_between(schedule, start, row["resumed_at"], MAX_CATCH_UP_PERIODS)
        if fires:
            yield (
                history_sql.HISTORY_RECORD_PAUSED,
                {"name": name, "by": by, "fire_ats": fires},
                DICTS,
            )
    return True


def _run_now_plan(name: str, by: str | None, reason: str | None) -> Plan[int]:
    params = {
        "name": name,
        "by": by,
        "reason": reason,
        "default_max_attempts": payloads.DEFAULT_MAX_ATTEMPTS,
    }
    rows = yield history_sql.HISTORY_RUN_NOW, params, DICTS
    if not rows:
        raise ScheduleNotFound(f"no schedule named {name!r}")
    return int(rows[0]["id"])


def _changed(row: Mapping[str, Any], name: str) -> bool:
    """Whether a pause or resume changed the schedule; ScheduleNotFound when there is none."""
    if not row["found"]:
        raise ScheduleNotFound(f"no schedule named {name!r}")
    return bool(row["changed"])


def _state(row: dict[str, Any]) -> ScheduleState:
    """A row of SCHEDULES_LIST as a ``ScheduleState``; one with a value Python cannot hold
    (written with SQL) has no ``schedule``, its ``problem`` names the column, and the
    unreadable times are None."""
    problem = unreadable(row)
    schedule = None
    if problem is None:
        try:
            schedule, problem = validated_schedule(row)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            problem = f"cannot be read: {type(exc).__name__}: {str(exc)[:200]}"
    row = {k: None if isinstance(v, Unreadable) else v for k, v in row.items()}
    last = None
    if row["last_fire_at"] is not None and row["last_inserted_at"] is not None:
        last = PeriodRecord(
            schedule=row["name"],
            fire_at=row["last_fire_at"],
            outcome=row["last_outcome"],
            reason=row["last_reason"],
            job_id=row["last_job_id"],
            job_status=row["last_job_status"],
            inserted_at=row["last_inserted_at"],
            inserted_by=row["last_inserted_by"],
        )
    return ScheduleState(
        name=row["name"],
        schedule=schedule,
        problem=problem,
        source=row["source"],
        paused=row["paused"],
        paused_at=row["paused_at"],
        paused_by=row["paused_by"],
        resumed_at=row["resumed_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        updated_by=row["updated_by"],
        definition_hash=row["definition_hash"],
        file_hash=row["file_hash"],
        last=last,
        paused_reason=row["paused_reason"],
    )


def validated_schedule(row: Mapping[str, Any]) -> tuple[Schedule | None, str | None]:
    """The ``Schedule`` of a pgbeat_schedules row, or None and a one-line reason."""
    try:
        return schedule_from_row(row), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return None, f"{where}: {first['msg']}" if where else first["msg"]


def _period(row: dict[str, Any]) -> PeriodRecord:
    return PeriodRecord(
        schedule=row["schedule"],
        fire_at=row["fire_at"],
        outcome=row["outcome"],
        reason=row["reason"],
        job_id=row["job_id"],
        job_status=row["job_status"],
        inserted_at=row["inserted_at"],
        inserted_by=row["inserted_by"],
        due_by=row.get("due_by"),
        late=row.get("deadline_state") == "late",
        late_at=row.get("late_at"),
        late_status=row.get("late_status"),
    )


__all__ = [
    "MAX_BACKFILL_PERIODS",
    "BackfillPlan",
    "Outcome",
    "PeriodRecord",
    "ScheduleState",
    "backfill",
    "backfill_async",
    "get_schedule",
    "get_schedule_async",
    "list_schedules",
    "list_schedules_async",
    "pause_schedule",
    "pause_schedule_async",
    "preview_backfill",
    "preview_backfill_async",
    "resume_schedule",
    "resume_schedule_async",
    "run_schedule_now",
    "run_schedule_now_async",
    "schedule_history",
    "schedule_history_async",
]
