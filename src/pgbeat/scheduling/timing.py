"""A schedule's timing as one small value: a cron expression or an interval, and a zone.

Pure. ``Timing`` is what the fire-time functions (fires.py), the catch-up rules
(catchup.py), a replica's groups (groups.py) and the dashboard's description read of a
schedule; a ``Schedule`` gives its own as ``schedule.timing``, and satisfies ``Timed`` as
it is, so either may be passed where only the timing matters.

A time a person types without a UTC offset is read by ``typed_time``, the one rule every
face follows (docs/schedules.md): in the zone of the schedule it is about, and refused
when it is about no schedule (nothing says which zone was meant).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta, tzinfo
from typing import NamedTuple, Protocol
from zoneinfo import ZoneInfo


class Timed(Protocol):
    """What the fire-time functions read: a ``Timing``, or a ``Schedule`` as it is."""

    @property
    def cron(self) -> str | None: ...

    @property
    def every(self) -> timedelta | None: ...

    @property
    def zone(self) -> ZoneInfo: ...


class Timing(NamedTuple):
    """When a schedule fires: ``cron`` read in ``timezone`` (with pgbeat's DST policy), or
    ``every`` interval, aligned to the Unix epoch. Exactly one of the two is set; the
    values are validated by the ``Schedule`` they come from.

    A tuple, so that a replica's tens of thousands of groups hash and compare it at C speed.
    """

    cron: str | None
    every: timedelta | None
    timezone: str = "UTC"

    @property
    def zone(self) -> ZoneInfo:
        """The zone cron wall-clock times are read in."""
        return zone_named(self.timezone)


@functools.lru_cache(maxsize=1024)  # zoneinfo keeps only 8 zones: a miss reads the zone file
def zone_named(name: str) -> ZoneInfo:
    """The zone of a validated IANA name."""
    return ZoneInfo(name)


def typed_time(text: str, zone: tzinfo | None) -> datetime:
    """An ISO-8601 time a person typed (``2027-03-13``, ``2027-03-13T01:30``, ``...Z``).

    One rule for a time without an offset: it is read in ``zone``, the zone of the
    schedule it is about; with no schedule (``zone`` None) it is refused, since nothing
    says which zone was meant. Raises ``ValueError`` with a one-line reason.
    """
    shown = text[:40]
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"bad ISO-8601 time {shown!r}: expected e.g. 2026-12-01T09:00:00+01:00"
        ) from None
    if value.tzinfo is None:
        if zone is None:
            raise ValueError(
                f"{shown!r} has no UTC offset: add one, e.g. {shown}+00:00 or {shown}Z"
            )
        value = value.replace(tzinfo=zone)
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{shown!r} is outside the years 1-9999 in UTC") from None
    return value
