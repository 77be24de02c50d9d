"""Which periods of a schedule a scheduler tick enqueues, after downtime too.

Pure: given the schedule, the time of the last successful tick (``None`` on start) and
the database's ``now``, it returns the periods to insert. Periods within ``ON_TIME`` of
``now`` are simply due; older ones were missed and follow the schedule's catch-up policy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from pgbeat.scheduling.fires import fire_times_between
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.timing import Timed

FiresBetween = Callable[[Timed, datetime, datetime], list[datetime]]


class CatchingUp(Timed, Protocol):
    """What the catch-up rules read: a timing and its catch-up policy (a ``Schedule``, or
    the policy a replica's group of schedules shares)."""

    @property
    def catch_up(self) -> str: ...

    @property
    def catch_up_window(self) -> timedelta: ...


ON_TIME = timedelta(seconds=5)  # a period this late is still on time, not "missed"
MAX_CATCH_UP_PERIODS = 10_000  # catch_up = "all" never floods one tick beyond this
_FIRST_LOOK_BACK = timedelta(hours=1)


def due_periods(
    schedule: CatchingUp,
    last_tick: datetime | None,
    now: datetime,
    between: FiresBetween = fire_times_between,
) -> list[datetime]:
    """Fire times to enqueue at ``now``: on-time periods plus missed ones per ``catch_up``.

    ``between`` computes fire times; a caller may pass a memoised one.
    """
    window_start = now - schedule.catch_up_window
    since = window_start if last_tick is None else max(last_tick, window_start)
    if since >= now:
        return []
    on_time_start = max(since, now - ON_TIME)
    on_time = between(schedule, on_time_start, now)
    if schedule.catch_up == "none" or since >= on_time_start:
        return on_time
    if schedule.catch_up == "all":
        missed = last_fires_between(schedule, since, on_time_start, MAX_CATCH_UP_PERIODS, between)
        return missed + on_time
    if on_time:  # "latest": the most recent period is on time, older ones are dropped
        return on_time
    return last_fires_between(schedule, since, on_time_start, 1, between)


def missed_periods(
    schedule: CatchingUp,
    last_tick: datetime | None,
    now: datetime,
    due: list[datetime],
    limit: int,
    between: FiresBetween = fire_times_between,
) -> list[datetime]:
    """The periods at ``now`` that the catch-up policy drops: late ones not in ``due``.

    At most the ``limit`` latest, oldest first; only inside the catch-up window (older
    periods are not looked at). ``due`` is what ``due_periods`` returned for the same tick.
    """
    window_start = now - schedule.catch_up_window
    since = window_start if last_tick is None else max(last_tick, window_start)
    on_time_start = max(since, now - ON_TIME)
    if since >= on_time_start or schedule.catch_up == "all":
        return []
    enqueued = set(due)
    late = last_fires_between(schedule, since, on_time_start, limit + 1, between)
    return [fire for fire in late if fire not in enqueued][-limit:]


def last_fires_between(
    schedule: Timed,
    start: datetime,
    end: datetime,
    limit: int,
    between: FiresBetween = fire_times_between,
) -> list[datetime]:
    """The last ``limit`` fire times in (start, end], oldest first.

    Looks back from ``end`` in windows that double, so the work stays near ``limit``
    fire times however long the range is (a 1 s schedule over a 60-day window would
    otherwise compute five million).
    """
    fires: list[datetime] = []
    step, upper = _FIRST_LOOK_BACK, end
    while upper > start and len(fires) < limit:
        lower = max(start, upper - step)
        fires[:0] = between(schedule, lower, upper)
        upper, step = lower, step * 2
    return fires[-limit:]


def latest_fire_between(schedule: Timed, start: datetime, end: datetime) -> datetime | None:
    """The last fire time in (start, end], if any."""
    fires = last_fires_between(schedule, start, end, 1)
    return fires[-1] if fires else None


def keep_for(schedule: Schedule) -> timedelta:
    """How long after its fire time a period's job must survive purges.

    A restarted scheduler looks back ``catch_up_window``; were the job purged sooner, it
    would find the period missing and enqueue it again.
    """
    return schedule.catch_up_window + ON_TIME + timedelta(minutes=1)
