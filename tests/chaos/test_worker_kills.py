"""Scenario 1, short: workers kill -9'd at random and restarted lose no job."""

from __future__ import annotations

import pytest

from tests.chaos.scenarios import WorkerKills, worker_kills


@pytest.mark.slow
def test_workers_under_kill_9_lose_nothing(database_url: str) -> None:
    result = worker_kills(database_url, WorkerKills())
    print(result.figures)
    assert not result.problems, result.problems
