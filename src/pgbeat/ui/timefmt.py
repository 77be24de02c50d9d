"""How the dashboard writes instants, offsets, ages and durations.

Pure: every function takes the instant and, where it matters, ``now`` (the database's
clock) as arguments, so a page is the same for every browser and testable to the second.
Offsets are always printed beside zone abbreviations, which are ambiguous on their own.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pgbeat.durations import format_duration

_MINUS = "\u2212"  # a real minus sign (U+2212) reads better in offsets than a hyphen


def utc_text(instant: datetime) -> str:
    """``2026-12-01 07:30:00Z``."""
    return f"{instant.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"


def _clock(instant: datetime) -> str:
    """``07:30``, or ``07:30:15`` when the instant is not on a whole minute."""
    return f"{instant:%H:%M:%S}" if instant.second or instant.microsecond else f"{instant:%H:%M}"


def utc_short(instant: datetime) -> str:
    """``12-01 07:30Z`` (``12-01 07:30:15Z`` off the minute): for dense tables."""
    utc = instant.astimezone(UTC)
    return f"{utc:%m-%d} {_clock(utc)}Z"


def iso(instant: datetime) -> str:
    """The machine-readable form for ``<time datetime=...>``."""
    return f"{instant.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def offset_text(offset: timedelta | None) -> str:
    """``UTC+05:30`` / ``UTC-05:00`` (with a real minus sign) / ``UTC+00:00``."""
    seconds = int((offset or timedelta(0)).total_seconds())
    sign = "+" if seconds >= 0 else _MINUS
    hours, rest = divmod(abs(seconds), 3600)
    return f"UTC{sign}{hours:02d}:{rest // 60:02d}"


def local_text(instant: datetime, zone: ZoneInfo) -> str:
    """``Tue 2026-12-01 02:30 EST (UTC-05:00)``: the wall clock in ``zone``.

    Seconds are shown when the instant is not on a whole minute (``every = "30s"``).
    """
    local = instant.astimezone(zone)
    zone_text = f"{local.tzname()} ({offset_text(local.utcoffset())})"
    return f"{local:%a %Y-%m-%d} {_clock(local)} {zone_text}"


def zone_now_text(zone: ZoneInfo, now: datetime) -> str:
    """``America/New_York (EST, UTC-05:00)``: a zone with its offset at ``now``."""
    local = now.astimezone(zone)
    return f"{zone.key} ({local.tzname()}, {offset_text(local.utcoffset())})"


def duration_text(delta: timedelta | float | None) -> str:
    """A compact duration: ``850ms``, ``12.3s``, ``4m05s``, ``3h12m``, ``2d4h``."""
    if delta is None:
        return "-"
    seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
    if not math.isfinite(seconds):  # a NaN or infinite duration a worker role may write
        return "?"
    sign = _MINUS if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{sign}{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{sign}{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{sign}{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{sign}{whole // 86400}d{whole % 86400 // 3600}h"


def relative_text(instant: datetime, now: datetime) -> str:
    """``in 21h00m`` or ``3m05s ago``, from ``now``."""
    delta = instant - now
    if abs(delta) < timedelta(seconds=1):
        return "now"
    if delta > timedelta(0):
        return f"in {duration_text(delta)}"
    return f"{duration_text(-delta)} ago"


def written_duration(delta: timedelta) -> str:
    """A duration as schedules.toml writes it: ``10m``, ``1h30m``."""
    return format_duration(delta) or "0s"


def count_text(count: int, cap: int) -> str:
    """``9,999`` or ``10,000+`` when a capped count reached its cap."""
    return f"{cap:,}+" if count > cap else f"{count:,}"
