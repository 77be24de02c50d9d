"""Resource bounds a scheduler must keep however its schedules.toml is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pgbeat.scheduling.catchup import MAX_CATCH_UP_PERIODS, ON_TIME, due_periods
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.fires import fire_times_between
from pgbeat.scheduling.timing import Timed

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_catch_up_all_looks_at_no_more_periods_than_it_may_insert() -> None:
    (schedule,) = parse_schedules(
        '[schedules.s]\nevery = "1s"\ncatch_up = "all"\ncatch_up_window = "60d"\n'
    )
    asked: list[int] = []

    def between(s: Timed, start: datetime, end: datetime) -> list[datetime]:
        assert s.every is not None
        asked.append(int((end - start) / s.every))  # how many periods were asked for
        return fire_times_between(s, max(start, end - 2 * MAX_CATCH_UP_PERIODS * s.every), end)

    periods = due_periods(schedule, None, NOW, between)
    assert len(periods) <= MAX_CATCH_UP_PERIODS + ON_TIME / timedelta(seconds=1)
    assert max(asked) <= 2 * MAX_CATCH_UP_PERIODS, f"asked for {max(asked):,} fire times"
