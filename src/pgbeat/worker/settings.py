"""A worker's settings, and the defaults of its lease and timeout.

Pure: validated once, when the worker (or the CLI) builds them. The timeout may be longer
than the lease: the worker renews the leases of the jobs it runs (worker/renewal.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pgbeat import flow
from pgbeat.backoff import BackoffPolicy
from pgbeat.worker.retention_policy import RetentionPolicy

DEFAULT_LEASE = timedelta(minutes=5)
DEFAULT_TIMEOUT = timedelta(minutes=1)


MIN_LEASE = timedelta(milliseconds=300)  # renewed every third of it: shorter would spin


def resolve_timing(
    lease: timedelta | None, timeout: timedelta | None
) -> tuple[timedelta, timedelta]:
    """Lease and timeout with defaults filled in (each independent of the other: leases are
    renewed while a job runs, so a 2-hour timeout needs no 2-hour lease)."""
    lease = DEFAULT_LEASE if lease is None else lease
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if lease < MIN_LEASE:
        raise ValueError(f"the lease must be at least {MIN_LEASE.total_seconds():g}s")
    if timeout <= timedelta(0):
        raise ValueError("the timeout must be positive")
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
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    workflow_repair: timedelta | None = timedelta(seconds=30)  # None: no repair pass here

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.claim_batch < 1:
            raise ValueError("claim_batch must be at least 1")
        resolve_timing(self.lease, self.timeout)
        if not isinstance(self.retention, RetentionPolicy):
            raise TypeError(
                f"retention must be a RetentionPolicy, got {type(self.retention).__name__}"
            )
        for queue in self.queues or ():
            flow.check_queue(queue)

    def described(self, handled: list[str]) -> dict[str, Any]:
        """What a worker of these settings shows in its heartbeat (the dashboard's and
        ``pgbeat status``'s view of each worker), its lease and timeout resolved;
        ``handled``: its registry's kinds, shown unless ``kinds`` narrows them."""
        lease, timeout = resolve_timing(self.lease, self.timeout)
        return {
            "concurrency": self.concurrency,
            "kinds": list(self.kinds or handled),
            "queues": list(self.queues) if self.queues else None,
            "lease_s": lease.total_seconds(),
            "timeout_s": timeout.total_seconds(),
        }
