"""The pure side of this round's schedule keys: windows, backfill ranges, the fingerprint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgbeat.errors import ConfigError
from pgbeat.scheduling.definition import definition_hash
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.fires import fire_times_after, periods_between
from pgbeat.scheduling.schedule import Schedule, has_ended

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def every_minute(**values: object) -> Schedule:
    return Schedule.model_validate({"name": "beat", "kind": "beat", "every": "1m", **values})


@pytest.mark.parametrize(
    ("start", "end", "after", "expected"),
    [
        (None, None, T0, [T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]),
        (T0 + 2 * MINUTE, None, T0, [T0 + 2 * MINUTE, T0 + 3 * MINUTE, T0 + 4 * MINUTE]),
        (None, T0 + 2 * MINUTE, T0, [T0 + MINUTE, T0 + 2 * MINUTE]),
        (T0 - MINUTE, T0, T0, []),  # past its end
        (T0 + 30 * timedelta(seconds=1), None, T0, [T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]),
    ],
)
def test_the_preview_honours_the_window(
    start: datetime | None, end: datetime | None, after: datetime, expected: list[datetime]
) -> None:
    schedule = every_minute(start_at=start, end_at=end)
    assert fire_times_after(schedule, after, 3) == expected


def test_has_ended_once_the_end_has_passed() -> None:
    schedule = every_minute(end_at=T0)
    assert not has_ended(schedule, T0) and has_ended(schedule, T0 + MINUTE)
    assert not has_ended(every_minute(), T0)


def test_a_backfill_range_is_start_inclusive_end_exclusive_and_capped() -> None:
    schedule = every_minute()
    assert periods_between(schedule, T0, T0 + 3 * MINUTE, 10) == [
        T0,
        T0 + MINUTE,
        T0 + 2 * MINUTE,
    ]
    assert len(periods_between(schedule, T0, T0 + 100 * MINUTE, 10)) == 11  # limit + 1
    windowed = every_minute(start_at=T0 + MINUTE, end_at=T0 + MINUTE + timedelta(seconds=1))
    assert periods_between(windowed, T0, T0 + 3 * MINUTE, 10) == [T0 + MINUTE]


def test_instants_take_iso_text_with_an_offset_and_are_kept_in_utc() -> None:
    schedule = every_minute(start_at="2026-05-01T14:00:00+02:00")
    assert schedule.start_at == T0 and schedule.start_at.tzinfo == UTC


def test_the_fingerprint_of_a_schedule_without_the_new_keys_is_unchanged() -> None:
    plain = every_minute()
    assert definition_hash(plain) == definition_hash(every_minute(queue="default", priority=0))
    for values in ({"queue": "q"}, {"priority": 1}, {"start_at": T0}, {"end_at": T0}):
        assert definition_hash(every_minute(**values)) != definition_hash(plain)
    assert definition_hash(every_minute(pause_after_failures=2)) != definition_hash(plain)


def test_a_file_with_the_new_keys_loads_and_bad_ones_are_named() -> None:
    (schedule,) = parse_schedules(
        """
[schedules.a]
every = "1m"
start_at = 2026-01-01T00:00:00+01:00
end_at = "2027-01-01T00:00:00Z"
overlap = "buffer_one"
pause_after_failures = 3
queue = "reports"
priority = 2
"""
    )
    assert schedule.start_at == datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    assert (schedule.overlap, schedule.pause_after_failures) == ("buffer_one", 3)
    with pytest.raises(ConfigError) as error:
        parse_schedules(
            '[schedules.b]\nevery = "1m"\nstart_at = 2026-02-01T00:00:00Z\n'
            "end_at = 2026-01-01T00:00:00Z\n"
        )
    assert error.value.problems == ["schedules.toml: schedule 'b': end_at must be after start_at"]


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("pause_after_failures = 0", "pause_after_failures"),
        ('overlap = "queue"', "overlap"),
        ("start_at = 2026-01-01T00:00:00", "offset"),  # a local date-time: which instant?
        ("priority = 40000", "priority"),
    ],
)
def test_bad_new_keys_in_a_file_are_refused_with_one_line_naming_the_schedule(
    line: str, named: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_schedules(f'[schedules.c]\nevery = "1m"\n{line}\n')
    (problem,) = error.value.problems
    assert problem.startswith("schedules.toml: schedule 'c': "), problem
    assert named in problem and "\n" not in problem, problem
