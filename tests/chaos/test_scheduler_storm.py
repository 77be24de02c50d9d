"""Scenario 2, short: scheduler replicas killed and restarted at random; every period once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.scenarios import SchedulerStorm, scheduler_storm


@pytest.mark.slow
def test_scheduler_storm_enqueues_every_period_exactly_once(
    database_url: str, tmp_path: Path
) -> None:
    result = scheduler_storm(database_url, SchedulerStorm(), tmp_path)
    print(result.figures)
    assert not result.problems, result.problems
