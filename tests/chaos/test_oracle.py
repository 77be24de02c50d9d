"""The chaos audits' oracle, checked by hand and then against pgbeat's fire times.

Agreement over DST nights and odd zones is what lets the audits trust either side: two
implementations written apart that agree, one of them simple enough to read at a glance.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgbeat.scheduling.fires import fire_times_between
from pgbeat.scheduling.schedule import Schedule, unique_key
from tests.chaos.oracle import expected_fires, expected_key


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 3, 8, hour, minute, second, tzinfo=UTC)


def test_by_hand() -> None:
    every7 = Schedule(name="t", kind="t", every=timedelta(seconds=7))
    # 2026-03-08T00:00:00Z is 1,772,928,000 s after the epoch, 4 s past a multiple of 7:
    # the multiples of 7 s fall at 3 s, 10 s, 17 s ... past that minute.
    assert expected_fires(every7, at(0, 0), at(0, 0, 20)) == {
        at(0, 0, 3),
        at(0, 0, 10),
        at(0, 0, 17),
    }
    kathmandu = Schedule(name="k", kind="k", cron="*/2 * * * *", timezone="Asia/Kathmandu")
    # UTC+05:45: even local minutes are odd UTC minutes
    assert expected_fires(kathmandu, at(0, 0), at(0, 4)) == {at(0, 1), at(0, 3)}
    assert expected_key(kathmandu, at(0, 1)) == "k@2026-03-08T00:01:00Z"
    with pytest.raises(ValueError, match="wall-clock crons only"):
        expected_fires(Schedule(name="d", kind="d", cron="30 2 * * *"), at(0, 0), at(1, 0))


@pytest.mark.parametrize(
    ("cron", "zone"),
    [
        ("* * * * *", "America/New_York"),  # 2026-03-08: clocks jump 02:00 -> 03:00 EST->EDT
        ("*/2 * * * *", "Asia/Kathmandu"),
        ("*/5 * * * 0", "America/New_York"),  # Sundays only: the 8th is one
        ("* */3 8 mar *", "Australia/Lord_Howe"),  # half-hour DST shifts
        ("*/7 * 1-7 * sun", "Europe/Berlin"),  # either day field suffices
    ],
)
def test_agrees_with_pgbeat_across_a_dst_night(cron: str, zone: str) -> None:
    schedule = Schedule(name="s", kind="s", cron=cron, timezone=zone)
    first, last = at(0, 0), at(0, 0) + timedelta(hours=12)
    ours = expected_fires(schedule, first, last)
    pgbeats = set(fire_times_between(schedule, first - timedelta(microseconds=1), last))
    assert ours == pgbeats
    assert ours  # the window has fires to compare
    assert {expected_key(schedule, f) for f in ours} == {unique_key(schedule, f) for f in ours}
