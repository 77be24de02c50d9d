"""One definition of a live process and an overdue period, shared by the CLI and the dashboard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgbeat.observe.liveness import is_live
from pgbeat.scheduling.health import is_overdue

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("age_s", "live"), [(0, True), (5, True), (29.9, True), (30, True), (30.1, False), (600, False)]
)
def test_a_process_is_live_for_six_beats(age_s: float, live: bool) -> None:
    assert is_live(timedelta(seconds=age_s)) is live


@pytest.mark.parametrize(
    ("late_s", "overdue"), [(0, False), (5, False), (9.9, False), (10, True), (3600, True)]
)
def test_a_period_is_overdue_ten_seconds_after_its_fire_time(late_s: float, overdue: bool) -> None:
    assert is_overdue(T0, T0 + timedelta(seconds=late_s)) is overdue
