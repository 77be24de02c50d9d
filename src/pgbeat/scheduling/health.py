"""Each schedule's health, decided once for every face: paused, ended, its latest period
and whether that period has its job, whether a period is late against its deadline, its
next fire.

``pgbeat status`` (text and ``--json``) and the dashboard's schedule pages only render a
``ScheduleHealth``; neither decides a verdict of its own. The rule for "the latest period"
takes no I/O (``latest_checked_period``); whether it has its job is two indexed lookups for all
the schedules at once: a job by its unique key (``jobs_unique``), or a history row that
decided the period (``pgbeat_schedule_history_period``). The late verdict is
``deadlines.late_schedules`` (one more query, the one ``deadlines.py`` owns), attached here
so that no face asks it separately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.scheduling.catchup import ON_TIME, latest_fire_between
from pgbeat.scheduling.deadlines import LateSchedule, late_schedules
from pgbeat.scheduling.fires import fire_times_after
from pgbeat.scheduling.schedule import Schedule, has_ended, unique_key
from pgbeat.scheduling.state import ScheduleState

# A period this late without a job is overdue ("missing"): ON_TIME, and 5 s more for the
# job of a period that a loaded replica is still inserting.
OVERDUE_GRACE = ON_TIME + timedelta(seconds=5)


def is_overdue(fire_at: datetime, now: datetime) -> bool:
    """Whether a period due at ``fire_at`` should have its job by ``now``."""
    return now - fire_at >= OVERDUE_GRACE


@dataclass(frozen=True)
class ScheduleHealth:
    """One schedule's verdicts at ``now`` (the database's clock).

    ``present`` is None when no period is checked (none is due yet, the schedule is paused
    or disabled, or its latest period is older than what a replica would still catch up).
    A new verdict is one more field here, rendered by every face. ``late_period``: the
    schedule's latest judged period when it is late against the schedule's deadline (or
    overdue and not judged yet: ``deadlines.late_schedules``), else None.
    """

    schedule: str
    kind: str
    enabled: bool  # runs: enabled in its definition and not paused
    paused: bool
    paused_reason: str | None
    ended: bool  # past its end_at: no period any more
    latest_due: datetime | None  # the latest period that should have its job by now
    latest_due_key: str | None
    next_fire: datetime | None  # None once the schedule has ended
    present: bool | None = None  # whether latest_due has its job (or a decision)
    late_period: LateSchedule | None = None  # its latest judged period, when it is late

    @property
    def missing(self) -> bool:
        """The latest period should have its job by now and has none (an overdue period)."""
        return self.present is False

    @property
    def late(self) -> bool:
        """A period of the schedule is late: not done within its deadline of its fire time."""
        return self.late_period is not None

    @property
    def verdict(self) -> str:
        """``paused``, ``ended``, ``missing``, ``late`` or ``ok``: the one word every face
        shows (a missing period first: it has no job at all)."""
        if self.paused:
            return "paused"
        if self.ended:
            return "ended"
        if self.missing:
            return "missing"
        return "late" if self.late else "ok"

    def as_json(self) -> dict[str, Any]:
        """The fields ``pgbeat status --json`` gives for the schedule."""
        return {
            "schedule": self.schedule,
            "kind": self.kind,
            "enabled": self.enabled,
            "paused": self.paused,
            "paused_reason": self.paused_reason,
            "ended": self.ended,
            "latest_due": self.latest_due,
            "latest_due_key": self.latest_due_key,
            "next_fire": self.next_fire,
            "present": self.present,
            "late": self.late,
            "late_fire_at": None if self.late_period is None else self.late_period.fire_at,
            "late_at": None if self.late_period is None else self.late_period.late_at,
            "verdict": self.verdict,
        }


def latest_checked_period(
    schedule: Schedule, stored: ScheduleState | None, now: datetime
) -> datetime | None:
    """The latest period that should have its job by ``now``, if it is checked at all.

    Not one a replica would no longer catch up (older than the catch-up window), none from
    before the schedule was resumed or, created from code, created (a file's schedule
    existed in its file before the table had it), none outside start_at .. end_at.
    """
    floors = [] if stored is None else [stored.resumed_at]
    if stored is not None and stored.source == "api":
        floors.append(stored.created_at)
    if schedule.start_at is not None:  # no period before its start
        floors.append(schedule.start_at - timedelta(microseconds=1))
    checked_from = max([now - schedule.catch_up_window, *(f for f in floors if f)])
    checked_until = now - OVERDUE_GRACE
    if schedule.end_at is not None:  # nor after its end: past it, "ended", not missing
        checked_until = min(checked_until, schedule.end_at)
    if checked_from >= checked_until:
        return None
    return latest_fire_between(schedule, checked_from, checked_until)


def health_at(schedule: Schedule, stored: ScheduleState | None, now: datetime) -> ScheduleHealth:
    """A schedule's verdicts but ``present``, which ``schedule_health`` looks up."""
    paused = stored is not None and stored.paused
    latest = latest_checked_period(schedule, stored, now)
    upcoming = fire_times_after(schedule, now, 1)
    return ScheduleHealth(
        schedule=schedule.name,
        kind=schedule.kind,
        enabled=schedule.enabled and not paused,
        paused=paused,
        paused_reason=None if stored is None else stored.paused_reason,
        ended=has_ended(schedule, now),
        latest_due=latest,
        latest_due_key=unique_key(schedule, latest) if latest else None,
        next_fire=upcoming[0] if upcoming else None,
    )


def schedule_health(
    conn: psycopg.Connection[Any],
    schedules: Sequence[Schedule],
    stored: Mapping[str, ScheduleState],
    now: datetime,
) -> list[ScheduleHealth]:
    """The health of each schedule at ``now``, in the order given (three queries in all)."""
    found = [health_at(s, stored.get(s.name), now) for s in schedules]
    if any(s.deadline is not None for s in schedules):
        late = {found.schedule: found for found in late_schedules(conn, now)}
        found = [replace(h, late_period=late.get(h.schedule)) for h in found]
    checked = [h for h in found if h.latest_due_key and h.enabled]
    if not checked:
        return found
    keys = {"kinds": [h.kind for h in checked], "keys": [h.latest_due_key for h in checked]}
    jobs = set(conn.execute(action_sql.JOBS_EXISTING_KEYS, keys).fetchall())
    periods = {
        "schedules": [h.schedule for h in checked],
        "fire_ats": [h.latest_due for h in checked],
    }
    decided = set(conn.execute(history_sql.HISTORY_DECIDED, periods).fetchall())
    present = {
        h.schedule: (h.kind, h.latest_due_key) in jobs or (h.schedule, h.latest_due) in decided
        for h in checked
    }
    return [replace(h, present=present[h.schedule]) if h.schedule in present else h for h in found]
