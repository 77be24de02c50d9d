"""Cron expressions exactly as Debian's cron reads them: parse, validate, match wall-clock minutes.

Pure and self-contained. An expression becomes five sets of allowed values plus the flags
Debian derives from its text: whether a day field begins with ``*`` (then a day must match
both day fields, otherwise either) and whether the minute or hour field does (then the job
follows the wall clock across DST changes instead of running at a fixed time). Turning
wall-clock minutes into instants is the DST policy's job, in fires.py.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Debian's cron keeps steps in a C int; a larger one is rejected there too.
MAX_STEP = 2**31 - 1
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)
# Gregorian dates repeat every 400 years: a match is never further away than that.
_SEARCH_YEARS = 400
_ITEM = re.compile(r"(?:(\*)|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:/([0-9]+))?")
# Quartz and croniter extensions, named in the error so nobody thinks a typo was the problem.
_NOT_DEBIAN = re.compile(r"[#?]|^[0-9]*[lw]+$|^[lh]")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low + i, as in Vixie cron

    def value(self, text: str) -> int:
        """A number or a name (any case) of this field, or ``ValueError``."""
        if text.isdigit():
            number = int(text)
            if not self.low <= number <= self.high:
                raise ValueError(f"{self.name} {text} is out of range {self.low}-{self.high}")
            return number
        if text in self.names:
            return self.low + self.names.index(text)
        allowed = f" or a name ({self.names[0]}-{self.names[-1]})" if self.names else ""
        raise ValueError(f"{self.name} {text!r} is not a number{allowed}")


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),  # 0 and 7 are both Sunday
)
_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February: leap years


@dataclass(frozen=True)
class CronExpression:
    """A parsed five-field expression: the allowed values and Debian's flags."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday ... 6 = Saturday (7 is folded into 0)
    days_and: bool  # a day field begins with "*": a day must match both day fields
    fixed_time: bool  # neither the minute nor the hour field begins with "*"
    _next_minute: tuple[int | None, ...] = field(init=False, repr=False, compare=False)
    _next_hour: tuple[int | None, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_next_minute", _next_allowed(self.minutes, 60))
        object.__setattr__(self, "_next_hour", _next_allowed(self.hours, 24))

    def day_matches(self, day: date) -> bool:
        """Debian's day rule: both day fields when either begins with ``*``, else either."""
        in_month = day.day in self.days
        in_week = day.isoweekday() % 7 in self.weekdays
        return in_month and in_week if self.days_and else in_month or in_week

    def matches(self, wall: datetime) -> bool:
        """Whether the naive wall-clock minute ``wall`` matches (seconds are ignored)."""
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self.day_matches(wall.date())
        )

    def next_match(self, after: datetime) -> datetime:
        """The first matching naive wall-clock minute strictly after naive ``after``."""
        wall = after.replace(second=0, microsecond=0) + _MINUTE
        limit = after.year + _SEARCH_YEARS
        while wall.year <= limit:
            hour = self._next_hour[wall.hour]
            if wall.month not in self.months:
                wall = self._next_month(wall)
            elif hour is None or not self.day_matches(wall.date()):
                wall = _midnight(wall) + _DAY  # no (more) matching hour on this day
            elif hour != wall.hour:
                wall = wall.replace(hour=hour, minute=0)
            elif (minute := self._next_minute[wall.minute]) is None:
                wall = wall.replace(minute=0) + timedelta(hours=1)
            else:
                return wall.replace(minute=minute)
        raise ValueError("the expression never fires")  # parse_cron rejects such expressions

    def _next_month(self, wall: datetime) -> datetime:
        year, month = wall.year, wall.month
        while True:
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            if month in self.months:
                return datetime(year, month, 1)  # noqa: DTZ001 - wall-clock time, no zone


@functools.lru_cache(maxsize=4096)  # a replica reads 100,000 rows of a few thousand crons
def parse_cron(text: str) -> CronExpression:
    """Parse a five-field expression or a shortcut; raise ``ValueError`` with one-line reason."""
    return _parse(normalise(text))


def normalise(text: str) -> str:
    """``text`` with single spaces and in lower case (names are read in any case).

    Debian reads month and weekday names in any case but shortcuts only in lower case;
    pgbeat also reads ``@Daily`` as ``@daily`` (an extension: it can mean nothing else).
    """
    return " ".join(text.split()).lower()


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> CronExpression:
    if text.startswith("@"):
        return _parse(_expand_shortcut(text))
    fields = text.split()
    if len(fields) != len(_FIELDS):
        extra = " (there is no seconds or year field)" if len(fields) > len(_FIELDS) else ""
        raise ValueError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}{extra}"
        )
    minutes, hours, days, months, weekdays = (
        _parse_field(item, spec) for item, spec in zip(fields, _FIELDS, strict=True)
    )
    expression = CronExpression(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(day % 7 for day in weekdays),
        days_and=fields[2].startswith("*") or fields[4].startswith("*"),
        fixed_time=not (fields[0].startswith("*") or fields[1].startswith("*")),
    )
    _check_fires(expression)
    return expression


def _expand_shortcut(text: str) -> str:
    if text in SHORTCUTS:
        return SHORTCUTS[text]
    if " " in text:
        raise ValueError(f"a shortcut stands alone, without other fields: {text!r}")
    if text == "@reboot":
        raise ValueError("@reboot is not a period: a schedule needs times to fire at")
    raise ValueError(f"unknown shortcut {text!r}; use one of {', '.join(SHORTCUTS)}")


def _parse_field(text: str, spec: _Field) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        values.update(_parse_item(item, text, spec))
    return frozenset(values)


def _parse_item(item: str, text: str, spec: _Field) -> range:
    try:
        return _item_values(item, text, spec)
    except ValueError as error:
        hint = " (Debian cron has no L, W, #, ? or H)" if _NOT_DEBIAN.search(item) else ""
        raise ValueError(f"{error}{hint}") from None


def _item_values(item: str, text: str, spec: _Field) -> range:
    match = _ITEM.fullmatch(item)
    if match is None:
        raise ValueError(f"{spec.name} field {text!r}: {item!r} is not a value, range or step")
    star, first, last, step_text = match.groups()
    step = _step(step_text, spec) if step_text is not None else 1
    if star:
        return range(spec.low, spec.high + 1, step)
    start = spec.value(first)
    if last is None:
        if step_text is not None:  # Debian rejects "5/10": a step needs a range
            raise ValueError(f"{spec.name} {item!r}: a step needs a range or * ({first}-N/{step})")
        return range(start, start + 1)
    stop = spec.value(last)
    if stop < start:
        raise ValueError(f"{spec.name} range {first}-{last} runs backwards")
    return range(start, stop + 1, step)


def _step(text: str, spec: _Field) -> int:
    step = int(text)
    if not 1 <= step <= MAX_STEP:
        raise ValueError(f"{spec.name} step {text} must be between 1 and {MAX_STEP}")
    return step


def _check_fires(expression: CronExpression) -> None:
    """Reject a day-of-month that no allowed month has, when the day must match it."""
    # With either day rule the weekday can always be met some year (every date falls
    # on every weekday within 28 years), so only the day of the month can be impossible.
    if not expression.days_and:
        return
    if any(min(expression.days) <= _DAYS_IN_MONTH[month] for month in expression.months):
        return
    months = ", ".join(_MONTHS[month - 1] for month in sorted(expression.months))
    days = ", ".join(map(str, sorted(expression.days)))
    verb = "has" if len(expression.months) == 1 else "have"
    raise ValueError(f"never fires: {months} {verb} no day {days}")


def _next_allowed(values: frozenset[int], size: int) -> tuple[int | None, ...]:
    """For each value below ``size``: the smallest allowed value at or above it."""
    table: list[int | None] = [None] * size
    upcoming: int | None = None
    for value in reversed(range(size)):
        if value in values:
            upcoming = value
        table[value] = upcoming
    return tuple(table)


def _midnight(wall: datetime) -> datetime:
    return wall.replace(hour=0, minute=0)
