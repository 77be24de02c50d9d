"""The queues with due jobs of the worker's kinds, as the last walks saw them: a hint for the
claim by queue and kind (db/sql/jobs/claim_heads.py), which re-checks every row it takes.

A walk visits the queues with pending jobs in name order, at most ``WALK_CHUNK`` of them,
going on where the last one stopped (with thousands of tenants' delayed jobs a walk of
them all cost more than many claims: 0.3-0.8 s at 20,000, which the first claim waited
for), so it is never run per claim: at most every ``WALK_SHARE``-th of the time it takes
(its cost stays a small share of the worker's, whatever the number of queues), and at
least every ``WALK_MIN`` seconds while a round of walks is unfinished or something may
have changed (new jobs were announced, a claim came back short); at most ``WALK_MAX``
seconds apart otherwise. Each walk replaces the hint's queues in the range it visited. A
queue outside the hint waits for the walk that visits it again: one walk when the queues
with pending jobs are fewer than ``WALK_CHUNK``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg

from pgbeat.db.sql.jobs import claim_heads as heads_sql

WALK_MIN = 0.25  # seconds between two walks, at least
WALK_MAX = 2.0  # seconds a hint is kept when nothing says it changed
WALK_SHARE = 20  # a walk waits this many times its own duration before the next
WALK_CHUNK = 1000  # queues with pending jobs a walk visits, at most


class DueQueues:
    """The hint: queue names (in name order), when it was walked, where the round of walks
    goes on, whether something may have changed."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._after: str | None = None  # the last queue the last walk visited (None: start over)
        self._next = 0.0  # monotonic: the earliest next walk
        self._refresh = 0.0  # monotonic: the next walk even if nothing changed
        self._stale = True

    def stale(self) -> None:
        """Something may have changed (jobs announced, a claim short, settings): walk soon."""
        self._stale = True

    def wait(self, now: float) -> float:
        """Seconds until a walk may run (0: now)."""
        return max(0.0, self._next - now) if self._stale else max(0.0, self._refresh - now)

    def names_for(
        self, conn: psycopg.Connection[Any], kinds: Sequence[str], held: Sequence[str]
    ) -> list[str]:
        """The hint, walked again first when due."""
        now = time.monotonic()
        if (self._stale and now >= self._next) or now >= self._refresh:
            params = {"kinds": kinds, "held": held, "after": self._after, "chunk": WALK_CHUNK}
            rows = conn.execute(heads_sql.JOBS_DUE_QUEUES, params).fetchall()
            last = rows[-1][0] if rows and rows[-1][2] else None  # None: it reached the end
            self.names = [name for name in self.names if not _within(name, self._after, last)] + [
                name for name, due, _ in rows if due
            ]
            self.names.sort()
            self._after = last
            took = time.monotonic() - now
            self._next = now + max(WALK_MIN, WALK_SHARE * took)
            self._refresh = now + max(WALK_MAX, WALK_SHARE * took)
            self._stale = last is not None  # an unfinished round goes on soon
        return self.names


def _within(name: str, after: str | None, last: str | None) -> bool:
    """Whether a walk from after ``after`` to ``last`` (None: the end) visited ``name``."""
    return (after is None or name > after) and (last is None or name <= last)


def kinds_ahead(
    conn: psycopg.Connection[Any], kinds: Sequence[str] | None, ahead: int
) -> psycopg.Cursor[Any] | None:
    """Counts the foreign kinds' jobs among the first ``ahead`` due ones in claim order (in
    the caller's pipeline: read its cursor after); None for a worker of every kind."""
    if kinds is None:
        return None
    return conn.execute(heads_sql.JOBS_KINDS_AHEAD, {"kinds": kinds, "ahead": ahead})
