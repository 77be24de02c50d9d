"""Network partitions, short: a worker host cut off for longer than the lease.

Needs root and ``ip netns`` (skipped, saying why, without them). The scheduler and
database cuts run in ``python -m tests.chaos`` (``--long`` for the full sizes).
"""

from __future__ import annotations

import pytest

from tests.chaos.netns import unavailable_reason
from tests.chaos.partitions import WorkerCut, worker_cut


@pytest.mark.slow
def test_cut_off_worker_is_fenced_and_carries_on() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    result = worker_cut(WorkerCut())
    print(result.figures)
    assert not result.problems, result.problems
