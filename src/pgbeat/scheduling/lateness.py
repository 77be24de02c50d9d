"""The rules of a schedule's deadline: which values make sense, and when to judge periods.

Pure. A period is judged late in the database, once, by whichever replica's statement
takes its history row first (db/sql/deadlines.py, HISTORY_JUDGE_DEADLINES); this module
holds what can be decided without it: whether a deadline fits its schedule, and when a
replica's loop should run that statement (``Watch``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pgbeat.durations import format_duration
from pgbeat.scheduling.fires import next_fire_after
from pgbeat.scheduling.schedule import Schedule

# Where the shortest period of a cron schedule is looked for: from a fixed instant (so the
# answer never depends on when it is asked), over its first MAX_FIRES fire times but at
# least SPAN, long enough to take in daylight-saving changes of both hemispheres.
_FROM = datetime(2025, 3, 1, tzinfo=UTC)
_SPAN = timedelta(days=4 * 365 + 2)
_MAX_FIRES = 2000
# How often a replica judges when it knows of no period to watch but the catalog has
# schedules with deadlines: periods other replicas claimed and it has not heard of.
RECHECK = timedelta(seconds=30)
BATCH = 5000  # periods judged per statement; a full batch is followed at once by another


def deadline_problem(schedule: Schedule) -> str | None:
    """Why the schedule's deadline makes no sense, as "deadline: ..." (None: it does).

    ``on_late`` without a deadline would never enqueue anything: refused too (here, not in
    the model, so that ``[defaults]`` may give one and each schedule the other). With
    ``overlap = "skip"`` a period's job still running at the next fire time makes that
    period skipped: a deadline longer than the shortest period could never be reached
    before the next period is decided, so it is refused.
    """
    if schedule.on_late is not None and schedule.deadline is None:
        return "on_late: needs a deadline (e.g. deadline = '30m')"
    if schedule.on_late is not None and schedule.on_late == schedule.kind:
        return (
            "on_late: must name another kind than the schedule's own jobs (an alert of "
            "that kind would count as one of its periods' jobs)"
        )
    if schedule.deadline is None or schedule.overlap != "skip":
        return None
    shortest = shortest_period(schedule)
    if schedule.deadline <= shortest:
        return None
    return (
        f"deadline: {format_duration(schedule.deadline)} is longer than the schedule's "
        f"period ({format_duration(shortest)} at its shortest) while overlap = 'skip': "
        "its job would be skipped before it could be late; shorten the deadline or use "
        "another overlap"
    )


def shortest_period(schedule: Schedule) -> timedelta:
    """The shortest time between two consecutive fire times of ``schedule``."""
    if schedule.every is not None:
        return schedule.every
    assert schedule.cron is not None
    return _shortest_cron_period(schedule.cron, schedule.timezone)


@functools.lru_cache(maxsize=256)
def _shortest_cron_period(cron: str, timezone: str) -> timedelta:
    timing = Schedule.model_construct(name="timing", kind="timing", cron=cron, timezone=timezone)
    previous = next_fire_after(timing, _FROM)
    shortest: timedelta | None = None
    for count in range(_MAX_FIRES):
        fire = next_fire_after(timing, previous)
        gap = fire - previous
        shortest = gap if shortest is None else min(shortest, gap)
        previous = fire
        if fire - _FROM > _SPAN and count >= 1:
            break
    assert shortest is not None
    return shortest


@dataclass
class Watch:
    """When a replica's loop judges deadlines, so that an idle tick asks the database nothing.

    ``next_due`` is the earliest due time of a period still watched, as the last judging
    saw it (None: none was). The loop judges at start, when that time has come, after a
    tick that claimed periods of schedules with deadlines, and every ``RECHECK`` while the
    catalog has such schedules (another replica may have claimed periods this one has not).
    """

    next_due: datetime | None = None
    asked: bool = True  # judge at the next tick (the first tick always does)
    last: datetime | None = None  # when the last judging ran (database time)

    def due(self, now: datetime, deadlines: bool) -> bool:
        """Whether a tick at ``now`` judges; ``deadlines``: the catalog has some."""
        if self.asked or (self.next_due is not None and now >= self.next_due):
            return True
        return deadlines and (self.last is None or now - self.last >= RECHECK)

    def judged(self, now: datetime, next_due: datetime | None, full: bool) -> None:
        """Record a judging at ``now``; ``full``: it judged a whole batch (more may wait)."""
        self.last, self.asked = now, full
        self.next_due = now if full else next_due  # a full batch: the loop wakes at once

    def wake_at(self, next_fire: datetime | None) -> datetime | None:
        """The earlier of the next fire time and the next due time."""
        if self.next_due is None:
            return next_fire
        return self.next_due if next_fire is None else min(next_fire, self.next_due)
