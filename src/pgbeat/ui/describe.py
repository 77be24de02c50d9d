"""A schedule's definition in plain words: "at 02:30 every day", "every 10 seconds".

Pure and bounded: a field is expanded into at most its own range (60 minutes, 24 hours),
and anything the describer does not recognise falls back to the cron text itself, so a
hostile expression costs nothing. The schedule module has already validated the text.
"""

from __future__ import annotations

from datetime import timedelta

_ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}
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
_MONTH_NAMES = [m[:3].lower() for m in _MONTHS]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_DAY_NAMES = [d[:3].lower() for d in _DAYS]
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


def describe_cron(cron: str) -> str:
    """Plain words for a validated cron expression, or the expression when it is unusual."""
    fields = _ALIASES.get(cron, cron).split()
    if len(fields) != 5:
        return f"cron {cron}"
    minute, hour, dom, month, dow = fields
    when = _time_of_day(minute, hour)
    days = _days(dom, month, dow)
    if when is None or days is None:
        return f"cron {cron}"
    if days == "every day" and not when.startswith("at "):
        return when  # "every 15 minutes", not "every 15 minutes every day"
    if days == "every day" and when.startswith("at minute"):
        return when
    return f"{when} {days}"


def field_values(text: str, low: int, high: int, names: list[str] | None = None) -> set[int]:
    """The numbers a cron field names (``1-5``, ``*/15``, ``mon,wed``), within low..high."""
    values: set[int] = set()
    for item in text.split(","):
        body, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            start, end = low, high
        else:
            first, _, last = body.partition("-")
            start = _number(first, low, names)
            end = _number(last, low, names) if last else (high if step_text else start)
        values.update(range(start, end + 1, step))
    return {v for v in values if low <= v <= high}


def _number(text: str, low: int, names: list[str] | None) -> int:
    if text.isdigit():
        return int(text)
    assert names is not None, text
    return names.index(text) + low


def _time_of_day(minute: str, hour: str) -> str | None:
    if minute == "*" and hour == "*":
        return "every minute"
    if minute.startswith("*/") and hour == "*":
        return f"every {minute[2:]} minutes"
    minutes = sorted(field_values(minute, 0, 59))
    if hour == "*":
        return f"at minute {_join([str(m) for m in minutes])} of every hour"
    if hour.startswith("*/") and len(minutes) == 1:
        return f"at minute {minutes[0]} of every {hour[2:]}th hour"
    hours = sorted(field_values(hour, 0, 23))
    if len(minutes) * len(hours) > _MAX_LISTED:
        return f"{len(minutes) * len(hours)} times a day"
    return "at " + _join([f"{h:02d}:{m:02d}" for h in hours for m in minutes])


def _days(dom: str, month: str, dow: str) -> str | None:
    months = (
        ""
        if month == "*"
        else " in "
        + _join([_MONTHS[m - 1] for m in sorted(field_values(month, 1, 12, _MONTH_NAMES))])
    )
    if dom == "*" and dow == "*":
        return "every day" + months
    weekdays = sorted({d % 7 for d in field_values(dow, 0, 7, _DAY_NAMES)})
    on_weekdays = "on " + _weekday_words(weekdays)
    on_dates = (
        "on day " + _join([str(d) for d in sorted(field_values(dom, 1, 31))]) + " of the month"
    )
    if dom == "*":
        return on_weekdays + months
    if dow == "*":
        return on_dates + months
    # Debian cron: a field starting with "*" restricts; otherwise either field may match.
    joiner = " and " if dom.startswith("*") or dow.startswith("*") else " or "
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
