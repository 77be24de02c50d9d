"""Periods judged against their schedule's deadline, and the late schedules a status shows.

A period of a schedule with a ``deadline`` is watched from its claim (its history row's
``due_by``). At that time any replica's tick judges it in one statement
(``HISTORY_JUDGE_DEADLINES``): met when its job ended done by then, else late, with the one
alert job of the schedule's ``on_late`` kind in the same statement. The history row is
taken by one replica only, so a period is late once however many replicas run, crash or
restart. The value rules and when a loop judges are in lateness.py (no I/O); ``pgbeat
status``, the dashboard and ``schedules history`` show what is decided here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db.connections import is_connection_failure, is_data_error
from pgbeat.db.runner import DICTS, Plan, async_aware, run, run_on_async
from pgbeat.db.sql import deadlines as deadline_sql
from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql import session as session_sql
from pgbeat.observe.metrics import Metrics
from pgbeat.scheduling.lateness import BATCH, RECHECK, Watch

log = logging.getLogger("pgbeat.scheduler")

# An overdue period no replica has judged yet (none runs) counts as late in a status once
# this long past its due time: a tick judges it within seconds when one does run.
UNJUDGED_AFTER = timedelta(seconds=30)


@dataclass(frozen=True)
class LatePeriod:
    """A period found late by this replica's judging, and the alert job it enqueued."""

    schedule: str
    fire_at: datetime
    period: str  # the period's unique key, '<schedule>@<fire time in UTC>'
    status: str  # its job's status then (retrying: pending after a run), or missed, ...
    job_id: int | None
    alert_job_id: int | None  # None: the schedule has no on_late


@dataclass
class Judged:
    """What one judging decided, and when the next period falls due."""

    late: list[LatePeriod] = field(default_factory=list)
    met: int = 0
    next_due: datetime | None = None
    full: bool = False  # a whole batch: more periods may be due already


@dataclass(frozen=True)
class LateSchedule:
    """A schedule whose latest judged period is late (``late_at`` None: overdue, unjudged)."""

    schedule: str
    fire_at: datetime
    due_by: datetime
    late_at: datetime | None
    status: str | None
    job_id: int | None


def judge(conn: psycopg.Connection[Any], now: datetime, batch: int = BATCH) -> Judged:
    """Judge the watched periods due at ``now`` (the database's clock), in one transaction.

    Safe on every replica at once: each period is judged, and alerted, by one of them.
    """
    with conn.transaction():
        conn.execute(history_sql.HISTORY_CLAIM_SETTINGS)  # index probes, whatever the stats
        rows = conn.execute(
            deadline_sql.HISTORY_JUDGE_DEADLINES, {"now": now, "batch": batch}
        ).fetchall()
        found = conn.execute(deadline_sql.HISTORY_NEXT_DUE, {"now": now}).fetchone()
    alerts = {period: alert for _, _, state, _, _, period, alert in rows if state == "alert"}
    periods = [row for row in rows if row[2] != "alert"]
    judged = Judged(next_due=None if found is None else found[0], full=len(periods) >= batch)
    for schedule, fire_at, state, status, job_id, period, _ in periods:
        if state == "late":
            alert = alerts.get(period)
            judged.late.append(LatePeriod(schedule, fire_at, period, status, job_id, alert))
        else:
            judged.met += 1
    judged.late.sort(key=lambda late: (late.schedule, late.fire_at))
    return judged


def judge_if_due(
    conn: psycopg.Connection[Any],
    watch: Watch,
    now: datetime,
    *,
    deadlines: bool,
    claimed: bool,
    metrics: Metrics,
) -> list[LatePeriod]:
    """A tick's judging, when ``watch`` says it is due; logs and counts the late periods.

    ``deadlines``: the replica runs schedules with deadlines; ``claimed``: this tick claimed
    periods (new ones may be watched). A statement the database refuses for a row's values
    (a schedule edited with SQL), or for a missing grant, is logged, and tried again after
    ``RECHECK``: neither may stop a scheduler's claims.
    """
    if claimed and deadlines:
        watch.asked = True
    if not watch.due(now, deadlines):
        return []
    try:
        judged = judge(conn, now)
    except Exception as exc:
        refused = is_data_error(exc) or isinstance(exc, psycopg.errors.InsufficientPrivilege)
        if is_connection_failure(exc, conn) or not refused:
            raise
        # a role without this round's grants (docs/least-privilege.sql) must not stop the
        # scheduler's claims either: said, and tried again later
        log.error("judging periods against their deadlines failed, retried later: %s", exc)
        watch.judged(now, now + RECHECK, full=False)
        return []
    watch.judged(now, judged.next_due, judged.full)
    for late in judged.late:
        metrics.late_periods(late.schedule, 1)
        log.warning(
            "schedule %s: period %s is late (its job: %s)%s",
            late.schedule,
            late.period,
            late.status,
            "" if late.alert_job_id is None else f"; alert job {late.alert_job_id} enqueued",
            extra={"schedule": late.schedule, "unique_key": late.period},
        )
    return judged.late


@async_aware("late_schedules_async")
def late_schedules(
    conn: psycopg.Connection[Any], now: datetime | None = None
) -> list[LateSchedule]:
    """The schedules whose latest judged period is late, by name (``now``: the database's).

    A later period that met its deadline clears a schedule; a period overdue by
    ``UNJUDGED_AFTER`` that no replica judged (none runs) counts as late.
    """
    return run(conn, _late_plan(now))


async def late_schedules_async(conn: object, now: datetime | None = None) -> list[LateSchedule]:
    """``late_schedules`` for an async connection, awaited."""
    return await run_on_async(conn, _late_plan(now))


def _late_plan(now: datetime | None) -> Plan[list[LateSchedule]]:
    if now is None:
        now = (yield session_sql.DATABASE_NOW, {})[0][0]
    assert now is not None
    params = {"overdue": now - UNJUDGED_AFTER}
    rows = yield deadline_sql.HISTORY_LATE_SCHEDULES, params, DICTS
    return [
        LateSchedule(
            schedule=row["schedule"],
            fire_at=row["fire_at"],
            due_by=row["due_by"],
            late_at=row["late_at"],
            status=row["late_status"],
            job_id=row["job_id"],
        )
        for row in rows
    ]


def describe(late: LateSchedule) -> str:
    """One line for a status: which period of which schedule is late, and its job."""
    period = f"{late.schedule}@{late.fire_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    if late.late_at is None:
        due = f"{late.due_by.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        return f"schedule {late.schedule}: period {period} is late (due {due}, not judged yet)"
    return (
        f"schedule {late.schedule}: period {period} is late (its job: {late.status}; "
        f"found late at {late.late_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ})"
    )
