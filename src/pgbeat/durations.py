"""Human durations ("500ms", "30s", "1h30m") to and from ``timedelta``.

Pure: used by the CLI flags, schedules.toml and the admin commands alike, so every
place that accepts a duration accepts the same spelling and rejects it the same way.
"""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS: dict[str, timedelta] = {
    "d": timedelta(days=1),
    "h": timedelta(hours=1),
    "m": timedelta(minutes=1),
    "s": timedelta(seconds=1),
    "ms": timedelta(milliseconds=1),
}
# Largest unit first, each at most once: "1h30m" and "90s" are fine, "30m1h" is not.
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")
_EXAMPLES = "500ms, 30s, 5m, 2h, 1d or 1h30m"
# Ten years: longer is a typo, and instants that far from now leave datetime's range.
MAX_DURATION = timedelta(days=3660)


def parse_duration(text: str) -> timedelta:
    """Parse a positive duration; raise ``ValueError`` with a one-line reason otherwise."""
    cleaned = text.strip().lower()
    match = _DURATION.fullmatch(cleaned)
    if not cleaned or match is None or not any(match.groups()):
        raise ValueError(f"bad duration {text!r}: expected e.g. {_EXAMPLES}")
    total = timedelta()
    try:
        for amount, unit in zip(match.groups(), ("d", "h", "m", "s", "ms"), strict=True):
            if amount is not None:
                total += int(amount) * _UNITS[unit]
    except OverflowError:
        raise ValueError(f"bad duration {text!r}: too large") from None
    if total > MAX_DURATION:
        raise ValueError(f"bad duration {text!r}: at most {MAX_DURATION.days} days")
    if total <= timedelta(0):
        raise ValueError(f"bad duration {text!r}: must be greater than zero")
    return total


def format_duration(value: timedelta) -> str:
    """Shortest spelling that ``parse_duration`` reads back to the same value."""
    if value <= timedelta(0):
        return "0s"
    remaining_ms = round(value.total_seconds() * 1000)
    parts: list[str] = []
    for unit in ("d", "h", "m", "s", "ms"):
        unit_ms = round(_UNITS[unit].total_seconds() * 1000)
        amount, remaining_ms = divmod(remaining_ms, unit_ms)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)
