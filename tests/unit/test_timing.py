"""scheduling/timing.py: the Timing value and the one rule for a time typed without an offset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pgbeat.scheduling.fires import next_fire_after
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.timing import Timing, typed_time

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("2026-11-01T00:00", BERLIN, datetime(2026, 11, 1, tzinfo=BERLIN)),
        ("2026-11-01", BERLIN, datetime(2026, 11, 1, tzinfo=BERLIN)),
        ("2026-11-01T00:00Z", BERLIN, datetime(2026, 11, 1, tzinfo=UTC)),
        ("2026-11-01T00:00+01:00", None, datetime(2026, 10, 31, 23, 0, tzinfo=UTC)),
        (" 2026-11-01T00:00Z ", None, datetime(2026, 11, 1, tzinfo=UTC)),
    ],
)
def test_a_time_without_an_offset_is_read_in_the_schedules_zone(
    text: str, zone: ZoneInfo | None, expected: datetime
) -> None:
    assert typed_time(text, zone) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2026-11-01T00:00", "has no UTC offset"),
        ("tomorrow", "bad ISO-8601"),
        ("0001-01-01T00:00:00+14:00", "outside the years 1-9999"),
    ],
)
def test_a_time_about_no_schedule_needs_an_offset(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        typed_time(text, None)


def test_a_schedules_timing_fires_as_the_schedule_does() -> None:
    schedule = Schedule(name="r", kind="r", cron="30 2 * * *", timezone="Europe/Berlin")
    after = datetime(2027, 3, 27, tzinfo=UTC)
    assert schedule.timing == Timing("30 2 * * *", None, "Europe/Berlin")
    assert next_fire_after(schedule.timing, after) == next_fire_after(schedule, after)
    every = Timing(None, timedelta(seconds=30))
    assert next_fire_after(every, after) == after + timedelta(seconds=30)
