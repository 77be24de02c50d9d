"""A primary failover, short: kill -9 of the primary under workers and schedulers on a
multi-host URL, promotion of its synchronous standby; nothing acknowledged is lost, no period
is doubled or missing, every process works on the new primary.

Two clusters of Debian's PostgreSQL 15 of the test's own (tests/chaos/clusters.py); the
long version, asynchronous replication included, is ``python -m tests.chaos --long --only
failover-sync,failover-async``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.clusters import unavailable_reason
from tests.chaos.failover import Failover, failover


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_failover_to_a_synchronous_standby_loses_and_doubles_nothing(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    result = failover(Failover(), tmp_path)
    print(result.figures)
    assert not result.problems, result.problems
    assert result.figures["lost_acknowledged"] == 0
    assert result.figures["all_working_s"] is not None
