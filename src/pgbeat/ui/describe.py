"""A schedule's definition in plain words: "at 02:30 every day", "every 10 seconds".

Pure. The values of each field come from the one cron reader (scheduling/cron.py, the
scheduler's own); only their wording is decided here, from the field's text ("*/15":
"every 15 minutes"). Anything the describer does not recognise falls back to the cron text
itself. The schedule module has already validated the text.
"""

from __future__ import annotations

from datetime import timedelta

from pgbeat.scheduling.cron import SHORTCUTS, CronExpression, parse_cron
from pgbeat.scheduling.timing import Timing

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_MAX_LISTED = 6  # beyond this many times a day, say "N times a day"


def describe_every(every: timedelta) -> str:
    """``every 10 seconds``, ``every 1 hour 30 minutes``."""
    seconds = int(every.total_seconds())
    parts = []
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    if len(parts) == 1 and parts[0].startswith("1 "):
        return f"every {parts[0][2:]}"
    return "every " + " ".join(parts)


def describe_timing(timing: Timing) -> str:
    """Plain words for a schedule's timing."""
    if timing.every is not None:
        return describe_every(timing.every)
    assert timing.cron is not None
    return describe_cron(timing.cron)


def describe_cron(cron: str) -> str:
    """Plain words for a validated cron expression, or the expression when it is unusual."""
    fields = SHORTCUTS.get(cron.lower(), cron).lower().split()
    try:
        expression = parse_cron(cron)
    except ValueError:
        return f"cron {cron}"
    if len(fields) != 5:
        return f"cron {cron}"
    minute, hour, dom, month, dow = fields
    when = _time_of_day(minute, hour, expression)
    days = _days(dom, month, dow, expression)
    if when is None or days is None:
        return f"cron {cron}"
    if days == "every day" and not when.startswith("at "):
        return when  # "every 15 minutes", not "every 15 minutes every day"
    if days == "every day" and when.startswith("at minute"):
        return when
    return f"{when} {days}"


def _time_of_day(minute: str, hour: str, expression: CronExpression) -> str | None:
    if minute == "*" and hour == "*":
        return "every minute"
    if minute.startswith("*/") and hour == "*":
        return f"every {minute[2:]} minutes"
    minutes = sorted(expression.minutes)
    if hour == "*":
        return f"at minute {_join([str(m) for m in minutes])} of every hour"
    if hour.startswith("*/") and len(minutes) == 1:
        return f"at minute {minutes[0]} of every {hour[2:]}th hour"
    hours = sorted(expression.hours)
    if len(minutes) * len(hours) > _MAX_LISTED:
        return f"{len(minutes) * len(hours)} times a day"
    return "at " + _join([f"{h:02d}:{m:02d}" for h in hours for m in minutes])


def _days(dom: str, month: str, dow: str, expression: CronExpression) -> str | None:
    months = (
        "" if month == "*" else " in " + _join([_MONTHS[m - 1] for m in sorted(expression.months)])
    )
    if dom == "*" and dow == "*":
        return "every day" + months
    weekdays = sorted(expression.weekdays)
    on_weekdays = "on " + _weekday_words(weekdays)
    on_dates = "on day " + _join([str(d) for d in sorted(expression.days)]) + " of the month"
    if dom == "*":
        return on_weekdays + months
    if dow == "*":
        return on_dates + months
    # Debian cron: a field starting with "*" restricts; otherwise either field may match.
    joiner = " and " if expression.days_and else " or "
    return on_dates + joiner + on_weekdays + months


def _weekday_words(days: list[int]) -> str:
    if days == [1, 2, 3, 4, 5]:
        return "Monday to Friday"
    if days == [0, 6]:
        return "Saturday and Sunday"
    return _join([_DAYS[d] for d in days])


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
