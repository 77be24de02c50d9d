"""Workflows drained by real `pgbeat worker` processes racing for one database (the small
sizes of tests/chaos/workflow_race.py): no step before its parents ended done, none run to
its end twice, none left unfinished, and a kill -9 of a worker or a restart of the
database changes none of that."""

from __future__ import annotations

import pytest

from tests.chaos.clusters import unavailable_reason
from tests.chaos.workflow_race import WorkflowRace, one_run, workflow_race


@pytest.mark.slow
def test_diamonds_and_fan_outs_across_processes(database_url: str) -> None:
    result = workflow_race(database_url, WorkflowRace(processes=3, diamonds=40, fan_outs=4))
    assert (result["early"], result["twice"], result["unfinished"]) == (0, 0, 0), result
    assert result["wrongly_cancelled"] == 0, result
    assert result["done"] > 0 and result["cancelled"] > 0, result  # failures cascaded


@pytest.mark.slow
def test_a_killed_worker_leaves_no_workflow_unfinished(database_url: str) -> None:
    race = WorkflowRace(processes=2, diamonds=30, fan_outs=2, sleep=0.02, kill=True)
    result = workflow_race(database_url, race)
    assert (result["early"], result["unfinished"], result["wrongly_cancelled"]) == (0, 0, 0)
    assert result["killed"] == 1, result


@pytest.mark.slow
def test_a_restarted_database_leaves_no_workflow_unfinished(server_url: str) -> None:
    """A private PostgreSQL 15 cluster stopped (fast) for 2 s once a quarter of the steps
    ended, and started again under the workers: nothing early, twice or unfinished."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    race = WorkflowRace(processes=3, diamonds=30, fan_outs=3, lease=30.0, job_timeout=15.0)
    result = one_run(server_url, race, "fast", 2.0)
    assert result["database_restarted"] == 1, result
    assert (result["early"], result["twice"], result["unfinished"]) == (0, 0, 0), result
    assert result["wrongly_cancelled"] == 0, result


@pytest.mark.slow
def test_wide_fan_outs_claimed_in_place_under_kill_9(database_url: str) -> None:
    """Fan-outs of 1,200 (claimed where they are held, migration 0032) across 3 processes,
    one killed with SIGKILL mid-run: nothing early, nothing unfinished."""
    race = WorkflowRace(processes=3, diamonds=20, fan_outs=2, width=1200, sleep=0.001, kill=True)
    result = workflow_race(database_url, race)
    assert (result["early"], result["unfinished"], result["wrongly_cancelled"]) == (0, 0, 0)
    assert result["killed"] == 1, result
