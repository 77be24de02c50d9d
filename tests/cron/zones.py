"""The time zones the differential tests use, their 2020-2030 offset changes, start instants."""

from __future__ import annotations

import functools
import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

YEARS = range(2020, 2031)

# Both hemispheres; whole, half-hour and 45-minute offsets; 30-minute and 2-hour DST
# shifts; changes at midnight; zones that dropped or changed their rules in 2020-2030.
ZONES = (
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Dublin",  # tzdata models Irish summer time as standard, winter as negative DST
    "Europe/Lisbon",
    "Europe/Chisinau",
    "Europe/Volgograd",  # +04 -> +03 in December 2020
    "Europe/Moscow",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "America/Phoenix",
    "America/St_Johns",  # -03:30 / -02:30
    "America/Havana",  # changes at midnight
    "America/Santiago",  # southern hemisphere, changes at midnight
    "America/Asuncion",  # changes at midnight; permanent -03 since October 2024
    "America/Sao_Paulo",  # no DST since 2019
    "America/Mexico_City",  # no DST since 2022
    "America/Godthab",  # old name of America/Nuuk
    "America/Nuuk",  # -03 -> -02 in 2023, DST again from 2024, changes at 22:00 / 23:00
    "America/Scoresbysund",  # -01 -> -02 in 2024
    "America/Whitehorse",  # permanent -07 since November 2020
    "Atlantic/Azores",  # changes at 00:00 / 01:00
    "Africa/Casablanca",  # +01, +00 during Ramadan
    "Africa/El_Aaiun",
    "Africa/Cairo",  # DST again since 2023, changes at midnight
    "Asia/Amman",  # changes at midnight; permanent +03 since 2022
    "Asia/Damascus",  # changes at midnight; permanent +03 since 2022
    "Asia/Beirut",  # changes at midnight
    "Asia/Gaza",
    "Asia/Jerusalem",
    "Asia/Tehran",  # +03:30 / +04:30 until 2022, changes at midnight
    "Asia/Kolkata",  # +05:30
    "Asia/Kathmandu",  # +05:45
    "Asia/Yangon",  # +06:30
    "Asia/Tokyo",
    "Australia/Sydney",
    "Australia/Adelaide",  # +09:30 / +10:30
    "Australia/Lord_Howe",  # +10:30 / +11: a 30-minute shift
    "Australia/Eucla",  # +08:45
    "Australia/Brisbane",
    "Antarctica/Troll",  # +00 / +02: a 2-hour shift
    "Antarctica/Macquarie",
    "Pacific/Auckland",
    "Pacific/Chatham",  # +12:45 / +13:45
    "Pacific/Norfolk",  # DST since 2019
    "Pacific/Apia",  # DST dropped in 2021
    "Pacific/Fiji",
    "Pacific/Easter",
    "Pacific/Marquesas",  # -09:30
    "Pacific/Kiritimati",  # +14
)


@functools.cache
def transitions(zone: str) -> tuple[datetime, ...]:
    """The instants in 2020-2030 at which ``zone``'s UTC offset changes."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    day = datetime(YEARS.start, 1, 1, tzinfo=UTC)
    end = datetime(YEARS.stop, 1, 1, tzinfo=UTC)
    offset = day.astimezone(tz).utcoffset()
    while day < end:
        following = day + timedelta(days=1)
        next_offset = following.astimezone(tz).utcoffset()
        if next_offset != offset:
            found.append(_bisect_change(day, following, tz))
        day, offset = following, next_offset
    return tuple(found)


def _bisect_change(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    offset = before.astimezone(tz).utcoffset()
    while after - before > timedelta(seconds=1):
        middle = before + (after - before) / 2
        middle = middle.replace(microsecond=0)
        if middle.astimezone(tz).utcoffset() == offset:
            before = middle
        else:
            after = middle
    return after


def starts_before(transition: datetime, rng: random.Random) -> list[datetime]:
    """Start instants just before a transition: a minute, a few hours, about a day."""
    return [
        transition - timedelta(minutes=1),
        transition - timedelta(minutes=rng.randrange(2, 6 * 60)),
        transition - timedelta(hours=rng.randrange(20, 30), seconds=rng.randrange(3600)),
    ]


def random_instant(rng: random.Random) -> datetime:
    """An instant in 2020-2030, to the second."""
    first = datetime(YEARS.start, 1, 1, tzinfo=UTC)
    span = datetime(YEARS.stop, 1, 1, tzinfo=UTC) - first
    return first + timedelta(seconds=rng.randrange(int(span.total_seconds())))
