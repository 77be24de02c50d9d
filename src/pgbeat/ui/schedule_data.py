"""Each schedule's state for the dashboard: next fire, last periods and what became of them.

Fire times come from the scheduler's functions; whether the latest period is overdue,
paused or ended is ``pgbeat.scheduling.health``'s verdict, the one ``pgbeat status`` gives;
the periods strip is one indexed query of the history for all the schedules on a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db.guarded import rows
from pgbeat.db.sql import history as history_sql
from pgbeat.scheduling.deadlines import LateSchedule
from pgbeat.scheduling.fires import fire_times_after, next_fire_after
from pgbeat.scheduling.health import ScheduleHealth, schedule_health
from pgbeat.scheduling.schedule import Schedule
from pgbeat.ui import timeline
from pgbeat.ui.describe import describe_timing
from pgbeat.ui.schedule_source import ScheduleEntry

STRIP = 30
PAGE = 100


@dataclass
class Period:
    fire_at: datetime
    key: str  # the period's unique key (file mode), or the history's reason
    # done, failed, running, pending, missed, overdue, due, skipped, manual, purged, none
    state: str
    job: dict[str, Any] | None = None
    decided: tuple[datetime, str | None] | None = None  # history: when, and by which replica
    late_at: datetime | None = None  # found late: not done by its deadline (lateness.py)

    @property
    def lag(self) -> timedelta | None:
        if self.decided is not None:
            return self.decided[0] - self.fire_at
        return None if self.job is None else self.job["created_at"] - self.fire_at


@dataclass
class ScheduleView:
    entry: ScheduleEntry
    description: str
    next_fire: datetime
    dst_change: timeline.DstChange | None
    status: ScheduleHealth  # the verdicts every face shows (scheduling/health.py)
    periods: list[Period] = field(default_factory=list)  # newest first

    @property
    def ended(self) -> bool:
        """Past its end_at: no period any more."""
        return self.status.ended

    @property
    def schedule(self) -> Schedule:
        return self.entry.schedule

    @property
    def last(self) -> Period | None:
        """The latest period (a manual run is not a period)."""
        return next((p for p in self.periods if p.state != "manual"), None)

    @property
    def overdue(self) -> Period | None:
        last = self.last
        return last if last is not None and last.state == "overdue" else None

    @property
    def past_deadline(self) -> LateSchedule | None:
        """The schedule's late period, as the read model found it (``ScheduleHealth``)."""
        return self.status.late_period

    @property
    def health(self) -> str:
        """The row's word: the read model's verdicts, then a missed period in the strip."""
        if self.status.paused:
            return "paused"
        if self.ended:
            return "ended"
        if self.overdue is not None:
            return "overdue"
        if self.status.late:
            return "late"
        if any(p.state == "missed" for p in self.periods[:STRIP]):
            return "missed"
        return "ok"  # a period's lag is shown with it; "late" is the deadline's verdict only


def next_period(schedule: Schedule, now: datetime) -> datetime:
    """The next period within the schedule's window (its raw next fire once it has ended)."""
    upcoming = fire_times_after(schedule, now, 1)
    return upcoming[0] if upcoming else next_fire_after(schedule, now)


def describe(schedule: Schedule) -> str:
    return describe_timing(schedule.timing)


def views(
    conn: psycopg.Connection[Any],
    entries: list[ScheduleEntry],
    now: datetime,
    strip: int = STRIP,
) -> list[ScheduleView]:
    """The state of each schedule at ``now`` (the database's clock)."""
    return _views_from_history(conn, entries, now, strip)


def _views_from_history(
    conn: psycopg.Connection[Any], entries: list[ScheduleEntry], now: datetime, strip: int
) -> list[ScheduleView]:
    history = history_rows(conn, [e.schedule.name for e in entries], strip)
    stored = {e.schedule.name: e.state for e in entries if e.state is not None}
    healths = schedule_health(conn, [e.schedule for e in entries], stored, now)
    result = []
    for entry, status in zip(entries, healths, strict=True):
        view = ScheduleView(
            entry=entry,
            description=describe(entry.schedule),
            next_fire=next_period(entry.schedule, now),
            dst_change=timeline.next_dst_change(entry.schedule.zone, now),
            status=status,
        )
        view.periods = periods_from_history(
            history.get(entry.schedule.name, []), overdue=overdue_period(status)
        )
        result.append(view)
    return result


def overdue_period(status: ScheduleHealth) -> datetime | None:
    """The fire time of the schedule's overdue period, if its latest one is."""
    return status.latest_due if status.missing else None


def history_rows(
    conn: psycopg.Connection[Any],
    names: list[str],
    limit: int,
    *,
    outcome: str | None = None,
    before: datetime | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The newest history rows of each schedule, newest first (one indexed query)."""
    found: dict[str, list[dict[str, Any]]] = {}
    params = {"names": names, "limit": limit, "outcome": outcome, "before": before}
    for row in rows(conn, history_sql.HISTORY_RECENT_OF_SCHEDULES, params):
        found.setdefault(row["schedule"], []).append(row)
    for listed in found.values():
        listed.sort(key=lambda r: r["fire_at"], reverse=True)
    return found


_OUTCOME_STATE = {
    "skipped": "skipped",
    "missed": "missed",
    "manual": "manual",
    "buffered": "buffered",
}


def periods_from_history(
    history: list[dict[str, Any]], *, overdue: datetime | None = None
) -> list[Period]:
    """Periods newest first from the history the scheduler replicas wrote.

    ``overdue``: the fire time of a period that should have its job by now and has none
    (``ScheduleHealth.missing``), put first as "overdue".
    """
    periods = []
    for row in history:
        if row["outcome"] in ("enqueued", "backfill"):
            state = str(row["job_status"]) if row["job_status"] else "purged"
        else:
            state = _OUTCOME_STATE[row["outcome"]]
        job = None
        if row["job_id"] is not None:
            job = {
                "id": row["job_id"],
                "status": row["job_status"],
                "created_at": row["inserted_at"],
                "inserted_by": row["inserted_by"],
            }
        period = Period(row["fire_at"], row["reason"] or "", state, job)
        period.decided = (row["inserted_at"], row["inserted_by"])
        period.late_at = row.get("late_at") if row.get("deadline_state") == "late" else None
        periods.append(period)
    if overdue is not None:
        periods.insert(0, Period(overdue, "", "overdue", None))
    return periods
