"""Which periods of a schedule a scheduler tick enqueues, after downtime too.

Pure: given the schedule, the time of the last successful tick (``None`` on start) and
the database's ``now``, it returns the periods to insert. Periods within ``ON_TIME`` of
``now`` are simply due; older ones were missed and follow the schedule's catch-up policy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from pgbeat.schedule import Schedule, fire_times_between

FiresBetween = Callable[[Schedule, datetime, datetime], list[datetime]]

ON_TIME = timedelta(seconds=5)  # a period this late is still on time, not "missed"
MAX_CATCH_UP_PERIODS = 10_000  # catch_up = "all" never floods one tick beyond this
_LOOK_BACK_STEPS = (timedelta(hours=1), timedelta(days=1), timedelta(days=32), timedelta(days=367))


def due_periods(
    schedule: Schedule,
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
        missed = between(schedule, since, on_time_start)
        return missed[-MAX_CATCH_UP_PERIODS:] + on_time
    if on_time:  # "latest": the most recent period is on time, older ones are dropped
        return on_time
    latest = latest_fire_between(schedule, since, on_time_start, between)
    return [] if latest is None else [latest]


def latest_fire_between(
    schedule: Schedule,
    start: datetime,
    end: datetime,
    between: FiresBetween = fire_times_between,
) -> datetime | None:
    """The last fire time in (start, end], looking back in growing steps to stay cheap."""
    for step in _LOOK_BACK_STEPS:
        fires = between(schedule, max(start, end - step), end)
        if fires:
            return fires[-1]
        if end - step <= start:
            return None
    fires = between(schedule, start, end)
    return fires[-1] if fires else None


def keep_for(schedule: Schedule) -> timedelta:
    """How long after its fire time a period's job must survive purges.

    A restarted scheduler looks back ``catch_up_window``; were the job purged sooner, it
    would find the period missing and enqueue it again.
    """
    return schedule.catch_up_window + ON_TIME + timedelta(minutes=1)
