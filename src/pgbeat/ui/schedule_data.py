"""Each schedule's state for the dashboard: next fire, last periods and what became of them.

Fire times come from the scheduler's functions; which periods have a job is one lookup by
exact unique key for all the schedules on a page (``jobs_unique``), so the page costs one
indexed query however long the schedules have run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db import ui_queries as q
from pgbeat.scheduling.schedule import Schedule, next_fire_after, unique_key
from pgbeat.ui import timeline
from pgbeat.ui.describe import describe_cron, describe_every
from pgbeat.ui.schedule_source import ScheduleEntry
from pgbeat.ui.store import rows

STRIP = 30
PAGE = 100


@dataclass
class Period:
    fire_at: datetime
    key: str
    state: str  # done, failed, running, pending, missed, overdue, due, skipped
    job: dict[str, Any] | None = None

    @property
    def lag(self) -> timedelta | None:
        return None if self.job is None else self.job["created_at"] - self.fire_at


@dataclass
class ScheduleView:
    entry: ScheduleEntry
    description: str
    next_fire: datetime
    dst_change: timeline.DstChange | None
    periods: list[Period] = field(default_factory=list)  # newest first

    @property
    def schedule(self) -> Schedule:
        return self.entry.schedule

    @property
    def last(self) -> Period | None:
        return self.periods[0] if self.periods else None

    @property
    def overdue(self) -> Period | None:
        return next((p for p in self.periods[:1] if p.state == "overdue"), None)

    @property
    def health(self) -> str:
        if self.entry.paused:
            return "paused"
        if self.overdue is not None:
            return "overdue"
        if any(p.state == "missed" for p in self.periods[:STRIP]):
            return "missed"
        last = self.last
        if last is not None and last.lag is not None and last.lag > timedelta(seconds=30):
            return "late"
        return "ok"


def describe(schedule: Schedule) -> str:
    if schedule.every is not None:
        return describe_every(schedule.every)
    assert schedule.cron is not None
    return describe_cron(schedule.cron)


def views(
    conn: psycopg.Connection[Any], entries: list[ScheduleEntry], now: datetime, strip: int = STRIP
) -> list[ScheduleView]:
    """The state of each schedule at ``now`` (the database's clock)."""
    result = [
        ScheduleView(
            entry=e,
            description=describe(e.schedule),
            next_fire=next_fire_after(e.schedule, now),
            dst_change=timeline.next_dst_change(e.schedule.zone, now),
        )
        for e in entries
    ]
    fires = {v.schedule.name: timeline.last_periods(v.schedule, now, strip) for v in result}
    jobs = periods_jobs(conn, [(v.schedule, fires[v.schedule.name]) for v in result])
    for view in result:
        view.periods = make_periods(view.entry, fires[view.schedule.name], jobs, now)
    return result


def periods_jobs(
    conn: psycopg.Connection[Any], wanted: list[tuple[Schedule, list[datetime]]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """The jobs of these periods, by (kind, unique key); absent periods have no entry."""
    kinds, keys = [], []
    for schedule, fires in wanted:
        for fire in fires:
            kinds.append(schedule.kind)
            keys.append(unique_key(schedule, fire))
    if not keys:
        return {}
    found = rows(conn, q.JOBS_OF_PERIODS, {"kinds": kinds, "keys": keys})
    return {(row["kind"], row["unique_key"]): row for row in found}


def make_periods(
    entry: ScheduleEntry,
    fires: list[datetime],
    jobs: dict[tuple[str, str], dict[str, Any]],
    now: datetime,
) -> list[Period]:
    """Periods newest first, each with its job or what its absence means.

    A period older than the oldest one with a job is "none" (no record), not "missed":
    the schedule may not have run yet, or its jobs were purged.
    """
    keys = [unique_key(entry.schedule, fire) for fire in fires]
    found = [jobs.get((entry.schedule.kind, key)) for key in keys]
    recorded = max((i for i, job in enumerate(found) if job is not None), default=0)
    periods = []
    for index, (fire, key, job) in enumerate(zip(fires, keys, found, strict=True)):
        state = timeline.period_state(
            fire,
            None if job is None else str(job["status"]),
            now,
            newest=index == 0,
            enabled=not entry.paused,
        )
        if state == "missed" and index > recorded:
            state = "none"
        periods.append(Period(fire, key, state, job))
    return periods
