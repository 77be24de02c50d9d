"""The brute-force model: every UTC minute, the wall clock, crontab(5) and Debian's DST rules.

Nothing of pgbeat's or cronsim's: its own reading of the fields (valid expressions only,
the tests make them) and a minute-by-minute walk instead of a search.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tests.cron.expressions import DAY_NAMES, MONTH_NAMES, SHORTCUTS

WARM_UP = timedelta(hours=3)  # longer than any repeated (fall-back) stretch: Troll's 2 h


@dataclass(frozen=True)
class Fields:
    """An expression's allowed values and crontab(5)'s two flags, read the simplest way."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_and: bool  # a day field begins with "*": both day fields must match
    fixed_time: bool  # neither minute nor hour begins with "*"

    def matches(self, wall: datetime) -> bool:
        in_month = wall.day in self.days
        in_week = wall.isoweekday() % 7 in self.weekdays
        day = in_month and in_week if self.days_and else in_month or in_week
        return (
            day
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
        )


@functools.lru_cache(maxsize=1024)
def fields_of(expr: str) -> Fields:
    """The brute force's own reading of a valid expression (no validation: tests make them)."""
    minute, hour, day, month, weekday = SHORTCUTS.get(expr, expr).lower().split()
    return Fields(
        minutes=_expand(minute, 0, 59),
        hours=_expand(hour, 0, 23),
        days=_expand(day, 1, 31),
        months=_expand(month, 1, 12, MONTH_NAMES, offset=1),
        weekdays=frozenset(d % 7 for d in _expand(weekday, 0, 7, DAY_NAMES)),
        days_and=day.startswith("*") or weekday.startswith("*"),
        fixed_time=not (minute.startswith("*") or hour.startswith("*")),
    )


def _expand(
    text: str, low: int, high: int, names: tuple[str, ...] = (), offset: int = 0
) -> frozenset[int]:
    """``*``, ``a``, ``a-b``, each with an optional ``/step``, comma-separated."""
    values: set[int] = set()
    for item in text.split(","):
        body, _, step = item.partition("/")
        if body == "*":
            first, last = low, high
        else:
            ends = [
                names.index(end) + offset if end in names else int(end) for end in body.split("-")
            ]
            first, last = ends[0], ends[-1]
        values.update(range(first, last + 1, int(step or 1)))
    return frozenset(values)


def _number(text: str, names: tuple[str, ...], offset: int) -> int:
    return names.index(text) + offset if text in names else int(text)


def brute_force_between(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Fires in (start, end] by walking every UTC minute and reading the wall clock.

    Debian's rules, literally: a wildcard job runs whenever the wall clock shows a
    matching minute; a fixed-time job runs when the wall clock shows a matching minute
    for the first time (not again when a fall-back repeats it), and at the first minute
    after a spring-forward jump for every matching minute the jump skipped.
    """
    fields, tz = fields_of(expr), ZoneInfo(zone)
    fires: list[datetime] = []
    # Start early enough to have seen the first pass of any repeated hour (2 h at most).
    instant = start.replace(second=0, microsecond=0) - WARM_UP
    previous = wall_clock(instant, tz)
    seen_up_to = previous  # fixed-time: wall times up to here have had their turn
    while instant < end:
        instant += timedelta(minutes=1)
        wall = wall_clock(instant, tz)
        step = wall - previous
        if fields.fixed_time:
            skipped = _minutes_between(previous, wall) if step > timedelta(minutes=1) else []
            first_time = wall > seen_up_to
            if any(map(fields.matches, skipped)) or (first_time and fields.matches(wall)):
                fires.append(instant)
            seen_up_to = max(seen_up_to, wall)
        elif fields.matches(wall):
            fires.append(instant)
        previous = wall
    return [fire for fire in fires if start < fire <= end]


def wall_clock(instant: datetime, tz: ZoneInfo) -> datetime:
    """The wall clock at ``instant``, to the minute; a whole-minute clock, as cron reads it."""
    return instant.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)


def _minutes_between(before: datetime, after: datetime) -> list[datetime]:
    """The wall-clock minutes strictly between two readings (what a jump skipped)."""
    count = (after - before) // timedelta(minutes=1)
    return [before + timedelta(minutes=n) for n in range(1, count)]
