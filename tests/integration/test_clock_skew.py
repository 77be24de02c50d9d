"""A scheduler replica whose own clock is wrong still enqueues on the database's time.

The scenario (tests/chaos/skew.py) is the one `python -m tests.chaos --long` reports as
row 4 of docs/reliability.md; here with one offset per test and fewer periods.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.skew import ClockSkew, clock_skew, faketime_library


@pytest.mark.slow
@pytest.mark.parametrize("offset", ["+7m", "-7m"])
def test_skewed_replica_follows_the_database_clock(
    database_url: str, tmp_path: Path, offset: str
) -> None:
    if faketime_library() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's faketime")
        pytest.skip("needs Debian's faketime (CI installs it)")
    result = clock_skew(database_url, ClockSkew(offsets=(offset,), ticks=4, timeout=30), tmp_path)
    print(result.figures)
    assert not result.problems, result.problems
    measured = result.figures["offsets"][offset]
    assert measured["early"] == 0 and measured["late"] == 0  # what the table reports
