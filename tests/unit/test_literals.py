"""The array literals sent in place of lists (scheduler, enqueue_many), and period keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pgbeat.db.literals import bool_array, number_array, text_array
from pgbeat.scheduling.schedule import Schedule, unique_key, unique_key_prefix, unique_key_suffix


@pytest.mark.parametrize(
    ("values", "literal"),
    [
        ([], "{}"),
        ([""], '{""}'),
        (["a", "b c", "NULL"], '{"a","b c","NULL"}'),
        (['say "hi"', "back\\slash"], '{"say \\"hi\\"","back\\\\slash"}'),
        ([None], "{NULL}"),
        (["a", None, 'q"'], '{"a",NULL,"q\\""}'),
    ],
)
def test_text_array(values: list[str | None], literal: str) -> None:
    assert text_array(values) == literal


def test_number_array() -> None:
    assert number_array(["1", "2.5"]) == "{1,2.5}"


def test_bool_array() -> None:
    assert bool_array([]) == "{}"
    assert bool_array([True, False, True]) == "{t,f,t}"
    assert number_array([]) == "{}"


BERLIN, NEW_YORK_WINTER = ZoneInfo("Europe/Berlin"), timezone(timedelta(hours=-5))


@pytest.mark.parametrize(
    ("fire", "key"),
    [
        (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "daily_report@2026-03-29T01:00:00Z"),
        # the same instant in Berlin's summer time: keys are in UTC
        (datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN), "daily_report@2026-03-29T01:00:00Z"),
        # fractions of a second are dropped
        (datetime(2026, 12, 31, 23, 59, 59, 999999, UTC), "daily_report@2026-12-31T23:59:59Z"),
        (datetime(2026, 1, 1, 0, 0, tzinfo=NEW_YORK_WINTER), "daily_report@2026-01-01T05:00:00Z"),
    ],
)  # fmt: skip
def test_a_key_is_the_schedule_name_and_the_fire_time_in_utc(fire: datetime, key: str) -> None:
    """Written out by hand: every replica, and every version of pgbeat, derives these keys."""
    schedule = Schedule(name="daily_report", kind="report", every=timedelta(hours=1))
    assert unique_key(schedule, fire) == key
    assert unique_key_prefix(schedule) + unique_key_suffix(fire) == key
