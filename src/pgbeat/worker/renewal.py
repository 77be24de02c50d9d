"""Renews the leases of a worker's running jobs, so a job may run longer than its lease.

One statement per round for every job the process runs (never one per job), about every
third of a lease. A run whose renewal did not come back in time is given up: its job may
have been reaped and claimed elsewhere, and its late outcome is fenced out anyway. The
same statement says which running jobs someone asked to stop, so a worker that cannot
LISTEN (behind a pooler) still hears of cancels, within one round.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import psycopg

from pgbeat.errors import TimedOut
from pgbeat.worker import operations
from pgbeat.worker.executor import Executor, Run

# A run trusts a renewal for this share of the lease: it gives up a little before the
# database could reap its job, so two runs of one job do not overlap.
LEASE_TRUST = 0.9
ROUNDS_PER_LEASE = 3
# Rounds a cancel notification asks for come at most this often (seconds): anyone may send
# notifications, and a flood of them must not turn into a flood of renewals.
HINTED_GAP = 0.1
_LOST = (
    "gave up on the run: its job was no longer leased to this worker (its lease expired "
    "and it was reaped, or it was claimed again)"
)


class LeaseRenewer:
    """Renews the leases of ``executor``'s running runs every ``lease / 3`` (or sooner)."""

    def __init__(self, executor: Executor, lease: timedelta, poll: timedelta) -> None:
        self._executor = executor
        self._lease = lease
        self._lease_s = lease.total_seconds()
        self._every = self._lease_s / ROUNDS_PER_LEASE
        self._poll_s = poll.total_seconds()
        self.next_round = 0.0  # monotonic
        self._last_round = float("-inf")  # monotonic
        self.polling = False  # no LISTEN for cancels: look for them each poll interval too

    def claimed(self, runs: list[Run], sent: float) -> None:
        """Runs just claimed, by a statement sent at ``sent`` (monotonic)."""
        for run in runs:
            run.lease_expires = sent + self._lease_s * LEASE_TRUST

    def due(self, now: float) -> bool:
        return now >= self.next_round

    def soon(self) -> None:
        """Renew at the next look, or HINTED_GAP after the last round (a cancel was heard, or
        a listener reconnected and may have missed one)."""
        self.next_round = min(self.next_round, self._last_round + HINTED_GAP)

    def renew(self, conn: psycopg.Connection[Any], now: float) -> None:
        """One round: renew every running run's lease; stop the cancelled and the lost."""
        every = min(self._every, self._poll_s) if self.polling else self._every
        self.next_round = now + every
        self._last_round = now
        runs = self._executor.unsettled()
        if not runs:
            return
        sent = time.monotonic()
        held = operations.renew_leases(conn, [run.job for run in runs], self._lease)
        renewed = [run for run in runs if run.job.id in held and held[run.job.id].renewed]
        self._executor.lease_renewed(renewed, sent + self._lease_s * LEASE_TRUST)
        if len(renewed) < len(held):  # a row another statement had locked: renew it soon
            self.next_round = min(self.next_round, now + HINTED_GAP)
        for run in runs:
            if run.job.id not in held:
                self._executor.interrupt(run, TimedOut(_LOST))
        cancelled = {job_id for job_id, answer in held.items() if answer.stop}
        if cancelled:
            self._executor.cancel(cancelled)
