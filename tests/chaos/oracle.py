"""Which periods a schedule must have, computed apart from pgbeat's scheduling code.

The chaos audits compare the jobs table with this oracle; were it pgbeat's own
``fire_times_between`` and ``unique_key``, a bug there would pass every audit. It covers
the schedules the chaos scenarios run: ``every`` intervals (multiples of the interval since
the Unix epoch) and cron expressions whose minute and hour fields begin with ``*``, which
follow the wall clock: a real minute fires when its local time matches the five fields.
Fixed-time crons (with their DST gaps and repeats) are refused, not guessed.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pgbeat.scheduling.schedule import Schedule

_NAMES = {
    "month": ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    "weekday": ["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
}
_ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0"}


def expected_key(schedule: Schedule, fire: datetime) -> str:
    """``<name>@<fire time in UTC, to the second>Z``, as the README describes it."""
    return (
        f"{schedule.name}@{fire.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat()}Z"
    )


def expected_fires(schedule: Schedule, first: datetime, last: datetime) -> set[datetime]:
    """Every fire instant t with first <= t <= last."""
    if schedule.every is not None:
        step = int(schedule.every.total_seconds())
        start = math.ceil(first.timestamp() / step) * step
        return {
            datetime.fromtimestamp(t, UTC) for t in range(start, int(last.timestamp()) + 1, step)
        }
    assert schedule.cron is not None
    fields = _ALIASES.get(schedule.cron, schedule.cron).split()
    if not (fields[0].startswith("*") and fields[1].startswith("*")):
        raise ValueError(f"the oracle covers wall-clock crons only, not {schedule.cron!r}")
    zone = ZoneInfo(schedule.timezone)
    minute = first.astimezone(UTC).replace(second=0, microsecond=0)
    if minute < first:
        minute += timedelta(minutes=1)
    fires = set()
    while minute <= last:
        if _matches(fields, minute.astimezone(zone)):
            fires.add(minute)
        minute += timedelta(minutes=1)
    return fires


def _matches(fields: list[str], local: datetime) -> bool:
    minute, hour, day, month, weekday = fields
    weekday_now = (local.weekday() + 1) % 7  # cron counts from Sunday = 0
    days = (
        _field(day, local.day, 1, 31),
        _field(weekday, weekday_now, 0, 7, "weekday")
        or (weekday_now == 0 and _field(weekday, 7, 0, 7, "weekday")),  # 7 is Sunday too
    )
    # crontab(5): a day field beginning with "*" makes both day fields required
    day_ok = all(days) if day.startswith("*") or weekday.startswith("*") else any(days)
    return (
        _field(minute, local.minute, 0, 59)
        and _field(hour, local.hour, 0, 23)
        and _field(month, local.month, 1, 12, "month")
        and day_ok
    )


def _field(text: str, value: int, low: int, high: int, names: str = "") -> bool:
    """Whether ``value`` is among those ``text`` (one cron field) lists."""
    for item in text.split(","):
        spec, _, step = item.partition("/")
        if spec == "*":
            first, last = low, high
        else:
            start, _, end = spec.partition("-")
            first = _number(start, names)
            last = _number(end, names) if end else (high if step else first)
        if first <= value <= last and (value - first) % int(step or 1) == 0:
            return True
    return False


def _number(text: str, names: str) -> int:
    if text.isdigit():
        return int(text)
    offset = 1 if names == "month" else 0
    return _NAMES[names].index(text[:3].lower()) + offset
