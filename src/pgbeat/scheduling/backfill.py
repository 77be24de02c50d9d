"""Backfill: the past periods of one schedule enqueued on request, each once.

A period in the range gets a job when the history has no row for it (or only a missed one),
with the period's own unique key, due at its fire time: a second backfill of the same range
adds nothing, and neither does one of periods the scheduler enqueued. The range is read in
the schedule's zone with its DST rules (fires.py), so a backfill enqueues what the
scheduler would have. Exported as ``pgbeat.scheduling.state.backfill``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db.runner import DICTS, Plan, async_aware, run, run_on_async
from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.db.sql import session as session_sql
from pgbeat.errors import ScheduleError, ScheduleNotFound
from pgbeat.jobs import payloads
from pgbeat.scheduling.catchup import ON_TIME
from pgbeat.scheduling.definition import schedule_from_row
from pgbeat.scheduling.fires import periods_between
from pgbeat.scheduling.schedule import Schedule

MAX_BACKFILL_PERIODS = 10_000  # periods per call; a longer range is refused, not cut


@dataclass(frozen=True)
class BackfillPlan:
    """What a backfill of ``[start, end)`` would do: ``periods`` in range, ``new`` the ones
    it would enqueue (no history row yet, or a missed one), oldest first."""

    schedule: str
    start: datetime
    end: datetime
    periods: list[datetime]
    new: list[datetime]


@async_aware("backfill_async")
def backfill(
    conn: psycopg.Connection[Any],
    name: str,
    start: datetime,
    end: datetime,
    *,
    by: str | None = None,
) -> int:
    """Enqueue every period of ``name`` in ``[start, end)`` not decided yet; return how many.

    Idempotent. ``start`` and ``end`` are aware datetimes, ``end`` not after the database's
    clock; at most ``MAX_BACKFILL_PERIODS`` periods (a ``ValueError`` beyond). Each period is
    recorded in the history as ``backfill`` with ``by`` (who asked). Paused or not, overlap
    or not: an operator asked for it. Runs in ``conn``'s current transaction.
    """
    return run(conn, _backfill_plan(name, start, end, by))


async def backfill_async(
    conn: object, name: str, start: datetime, end: datetime, *, by: str | None = None
) -> int:
    """``backfill`` on an async connection."""
    return await run_on_async(conn, _backfill_plan(name, start, end, by))


@async_aware("preview_backfill_async")
def preview_backfill(
    conn: psycopg.Connection[Any], name: str, start: datetime, end: datetime
) -> BackfillPlan:
    """What ``backfill`` would enqueue now, writing nothing (``--dry-run``, the dashboard)."""
    return run(conn, _preview_plan(name, start, end))


async def preview_backfill_async(
    conn: object, name: str, start: datetime, end: datetime
) -> BackfillPlan:
    """``preview_backfill`` on an async connection."""
    return await run_on_async(conn, _preview_plan(name, start, end))


def _backfill_plan(name: str, start: datetime, end: datetime, by: str | None) -> Plan[int]:
    _check_range(name, start, end)  # before any SQL
    return _backfill_rows(name, start, end, by)


def _backfill_rows(name: str, start: datetime, end: datetime, by: str | None) -> Plan[int]:
    schedule = yield from _schedule_plan(name, end)
    fires = _periods(schedule, start, end)
    if not fires:
        return 0
    params = {
        "name": name,
        "fire_ats": fires,
        "by": by,
        "reason": f"{_iso(start)}..{_iso(end)}",
        "default_max_attempts": payloads.DEFAULT_MAX_ATTEMPTS,
        "keep_extra": ON_TIME + timedelta(minutes=1),
    }
    return len((yield history_sql.HISTORY_BACKFILL, params))


def _preview_plan(name: str, start: datetime, end: datetime) -> Plan[BackfillPlan]:
    _check_range(name, start, end)  # before any SQL
    return _preview_rows(name, start, end)


def _preview_rows(name: str, start: datetime, end: datetime) -> Plan[BackfillPlan]:
    schedule = yield from _schedule_plan(name, end)
    fires = _periods(schedule, start, end)
    taken: set[datetime] = set()
    if fires:
        rows = yield history_sql.HISTORY_PERIODS_TAKEN, {"name": name, "fire_ats": fires}
        taken = {fire_at for (fire_at,) in rows}
    new = [fire for fire in fires if fire not in taken]
    return BackfillPlan(name, start, end, fires, new)


def _check_range(name: str, start: datetime, end: datetime) -> None:
    for label, value in (("start", start), ("end", end)):
        if not isinstance(value, datetime):
            raise TypeError(f"{label} must be a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{label} must be a timezone-aware datetime, got {value}")
    if end <= start:
        raise ValueError(f"backfill of {name!r}: end ({_iso(end)}) must be after start")


def _schedule_plan(name: str, end: datetime) -> Plan[Schedule]:
    """The schedule ``name``, once the database's clock says ``end`` is past."""
    rows = yield schedule_sql.SCHEDULES_ONE, {"name": name}, DICTS
    if not rows or rows[0]["deleted_at"] is not None:
        raise ScheduleNotFound(f"no schedule named {name!r}")
    try:
        schedule = schedule_from_row(rows[0])
    except ValueError as exc:
        raise ScheduleError(f"schedule {name!r} is invalid: {exc}") from None
    ((now,),) = yield session_sql.DATABASE_NOW, {}
    if end > now:
        raise ValueError(
            f"backfill of {name!r}: end ({_iso(end)}) is in the future (now {_iso(now)}); "
            "a backfill enqueues past periods only"
        )
    return schedule


def _periods(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    try:
        fires = periods_between(schedule, start, end, MAX_BACKFILL_PERIODS)
    except OverflowError:  # a start in year 1, read in a zone west of UTC: year 0
        raise ValueError(
            f"backfill of {schedule.name!r}: the range from {_iso(start)} reaches before "
            "the year 1, which Python cannot hold; start later"
        ) from None
    if len(fires) > MAX_BACKFILL_PERIODS:
        raise ValueError(
            f"backfill of {schedule.name!r}: more than {MAX_BACKFILL_PERIODS:,} periods between "
            f"{_iso(start)} and {_iso(end)}; backfill a shorter range"
        )
    return fires


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
