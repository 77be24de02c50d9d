"""Scenario 3, short: a private PostgreSQL stopped and started under schedulers and workers.

The machine's shared server is never stopped: the scenario starts its own (pgserver).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.scenarios import DatabaseRestart, database_restart


@pytest.mark.slow
def test_database_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    result = database_restart(DatabaseRestart(), tmp_path)
    print(result.figures)
    assert not result.problems, result.problems
