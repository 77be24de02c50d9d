"""Wall-clock time in a zone around daylight-saving transitions: which instants a local
time names, and where a gap ends. Pure; the DST policy that uses it is in fires.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

SECOND = timedelta(seconds=1)


def utc_offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def instants(local: datetime, zone: ZoneInfo) -> tuple[datetime, ...]:
    """The UTC instants naive ``local`` occurs at: one, two (fall-back) or none (gap)."""
    first, second = local.replace(tzinfo=zone), local.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return (first.astimezone(UTC),)
    # Round-trip each reading: a repeated wall time has two real instants, a skipped one none.
    candidates = {first.astimezone(UTC), second.astimezone(UTC)}
    return tuple(sorted(t for t in candidates if wall_time(t, zone) == local))


def gap_end(local: datetime, zone: ZoneInfo) -> datetime:
    """The instant the spring-forward gap containing naive ``local`` ends."""
    before, after = sorted(local.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1))
    return transition_between(before, after, zone)


def wall_time(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def transition_between(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (before, after] whose UTC offset differs from ``before``'s."""
    # zoneinfo exposes no transition list; offsets change on whole seconds, so bisect.
    old_offset = utc_offset(before, zone)
    while after - before > SECOND:
        middle = before + (after - before) // SECOND // 2 * SECOND
        if utc_offset(middle, zone) == old_offset:
            before = middle
        else:
            after = middle
    return after
