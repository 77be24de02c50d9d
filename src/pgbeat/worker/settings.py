"""A worker's settings, and the rule that ties its timeout to its lease.

Pure: validated once, when the worker (or the CLI) builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from pgbeat import flow
from pgbeat.backoff import BackoffPolicy

DEFAULT_LEASE = timedelta(minutes=5)
DEFAULT_TIMEOUT = timedelta(minutes=1)


def resolve_timing(
    lease: timedelta | None, timeout: timedelta | None
) -> tuple[timedelta, timedelta]:
    """Lease and timeout with defaults filled in; the timeout must be shorter than the lease."""
    if lease is None:
        lease = max(DEFAULT_LEASE, (timeout or DEFAULT_TIMEOUT) * 5 / 4)
    if timeout is None:
        timeout = min(DEFAULT_TIMEOUT, lease * 4 / 5)
    if timeout >= lease:
        raise ValueError(
            f"the timeout ({timeout.total_seconds():g}s) must be shorter than the lease "
            f"({lease.total_seconds():g}s), or a running job could be reaped and run twice"
        )
    return lease, timeout


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker claims and runs jobs; see ``pgbeat worker --help``."""

    concurrency: int = 10
    lease: timedelta | None = None
    timeout: timedelta | None = None
    kinds: tuple[str, ...] | None = None  # None: the registry's kinds
    queues: tuple[str, ...] | None = None  # None: every queue
    poll_interval: timedelta = timedelta(seconds=1)
    grace: timedelta = timedelta(seconds=15)
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    claim_batch: int = 100
    listen: bool = True
    heartbeat: bool = True

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.claim_batch < 1:
            raise ValueError("claim_batch must be at least 1")
        resolve_timing(self.lease, self.timeout)
        for queue in self.queues or ():
            flow.check_queue(queue)
