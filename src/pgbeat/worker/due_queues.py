"""The queues with due jobs of the worker's kinds, as the last walk saw them: a hint for the
claim by queue and kind (db/sql/jobs/claim_heads.py), which re-checks every row it takes.

A walk visits every queue with pending jobs (with thousands of tenants' delayed jobs it costs
more than a claim: docs/benchmarks.md), so it is never run per claim: at most every
``WALK_SHARE``-th of the time it takes (its cost stays a small share of the worker's,
whatever the number of queues), and at least every ``WALK_MIN`` seconds once something may
have changed (new jobs were announced, a claim came back short). A queue outside the hint
waits for the next walk.
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


class DueQueues:
    """The hint: queue names, when it was walked, whether something may have changed."""

    def __init__(self) -> None:
        self.names: list[str] = []
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
            rows = conn.execute(heads_sql.JOBS_DUE_QUEUES, {"kinds": kinds, "held": held})
            self.names = [name for (name,) in rows.fetchall()]
            took = time.monotonic() - now
            self._next = now + max(WALK_MIN, WALK_SHARE * took)
            self._refresh = now + max(WALK_MAX, WALK_SHARE * took)
            self._stale = False
        return self.names


def kinds_ahead(
    conn: psycopg.Connection[Any], kinds: Sequence[str] | None, ahead: int
) -> psycopg.Cursor[Any] | None:
    """Counts the foreign kinds' jobs among the first ``ahead`` due ones in claim order (in
    the caller's pipeline: read its cursor after); None for a worker of every kind."""
    if kinds is None:
        return None
    return conn.execute(heads_sql.JOBS_KINDS_AHEAD, {"kinds": kinds, "ahead": ahead})
