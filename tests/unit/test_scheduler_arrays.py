"""The array literals sent in place of lists (scheduler, enqueue_many), and period keys."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pgbeat.db.literals import number_array, text_array
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
    assert number_array([]) == "{}"


def test_a_key_is_the_schedule_prefix_plus_the_fire_time_suffix() -> None:
    schedule = Schedule(name="daily_report", kind="report", every="1h")
    fire = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert unique_key_prefix(schedule) + unique_key_suffix(fire) == unique_key(schedule, fire)
    assert unique_key(schedule, fire) == "daily_report@2026-03-29T01:00:00Z"
