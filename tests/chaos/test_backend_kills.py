"""Scenario 5, short: pgbeat backends terminated at random leave no half-written state."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.scenarios import BackendKills, backend_kills


@pytest.mark.slow
def test_terminated_backends_leave_consistent_state(database_url: str, tmp_path: Path) -> None:
    result = backend_kills(database_url, BackendKills(), tmp_path)
    print(result.figures)
    assert not result.problems, result.problems
