"""A schedule's time line for the dashboard: upcoming fires with DST notes, and past periods.

Pure. Fire times come from the scheduler's own functions (``next_fire_after``,
``last_fires_between``), never from a re-implementation, so what the page promises is
what the scheduler does. ``now`` is always the database's clock, passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pgbeat.scheduling import dst
from pgbeat.scheduling.catchup import last_fires_between
from pgbeat.scheduling.cron import parse_cron
from pgbeat.scheduling.fires import next_fire_after
from pgbeat.scheduling.schedule import Schedule
from pgbeat.ui.timefmt import local_text, offset_text

MAX_PREVIEW = 200
DST_WARNING = timedelta(days=7)
HISTORY_LOOK_BACK = timedelta(days=400)  # the strip never looks further for 30 periods


@dataclass(frozen=True)
class Fire:
    """One upcoming fire time as the preview shows it."""

    at: datetime  # UTC
    local: str
    offset: str
    gap: timedelta | None  # since the previous fire in the list
    note: str


@dataclass(frozen=True)
class DstChange:
    """The next change of UTC offset in a zone."""

    at: datetime
    before: timedelta
    after: timedelta

    @property
    def words(self) -> str:
        direction = "forward" if self.after > self.before else "back"
        return f"clocks go {direction} {offset_text(self.before)} \u2192 {offset_text(self.after)}"


def preview(schedule: Schedule, start: datetime, count: int) -> list[Fire]:
    """The next ``count`` fires strictly after ``start``, each with a note where DST acts."""
    count = max(1, min(count, MAX_PREVIEW))
    zone = schedule.zone
    fires: list[Fire] = []
    # The fire before the window, so the first row has its gap and DST note too.
    before = last_fires_between(schedule, start - HISTORY_LOOK_BACK, start, 1)
    previous: datetime | None = before[0] if before else None
    at = start
    for _ in range(count):
        at = next_fire_after(schedule, at)
        gap = None if previous is None else at - previous
        fires.append(
            Fire(
                at,
                local_text(at, zone),
                offset_text(dst.utc_offset(at, zone)),
                gap,
                dst_note(schedule, at, previous),
            )
        )
        previous = at
    return fires


def dst_note(schedule: Schedule, at: datetime, previous: datetime | None) -> str:
    """Why this fire's wall-clock time or spacing is unusual, or ``""``."""
    zone = schedule.zone
    local = at.astimezone(zone)
    notes = []
    if schedule.cron is not None and schedule.is_fixed_time:
        expression = parse_cron(schedule.cron)
        if local.hour not in expression.hours or local.minute not in expression.minutes:
            notes.append(
                "GAP: the scheduled time does not exist this day (clocks jump forward); "
                f"fires once at {local:%H:%M} {local.tzname()}, when the gap ends"
            )
        elif len(dst.instants(local.replace(tzinfo=None), zone)) == 2:
            notes.append(
                f"FOLD: {local:%H:%M} occurs twice this day (clocks go back); "
                "fires once, at the first occurrence"
            )
    elif schedule.cron is not None and len(dst.instants(local.replace(tzinfo=None), zone)) == 2:
        notes.append(f"FOLD: {local:%H:%M} occurs twice this day; wildcard schedules fire in both")
    if previous is not None:
        before, after = dst.utc_offset(previous, zone), dst.utc_offset(at, zone)
        if before != after:
            change = DstChange(dst.transition_between(previous, at, zone), before, after)
            extra = " (interval schedules keep elapsed time)" if schedule.every else ""
            notes.append(f"{change.words} since the previous fire{extra}")
    return "; ".join(notes)


def next_dst_change(
    zone: ZoneInfo, now: datetime, within: timedelta = DST_WARNING
) -> DstChange | None:
    """The first offset change in (now, now + within], if any."""
    end = now + within
    before, after = dst.utc_offset(now, zone), dst.utc_offset(end, zone)
    if before == after:
        # Two changes within a week never happen in real zones; one check at each end does.
        return None
    return DstChange(dst.transition_between(now, end, zone), before, after)


def utc(value: datetime) -> datetime:
    return value.astimezone(UTC)
