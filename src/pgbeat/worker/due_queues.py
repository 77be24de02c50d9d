"""The queues with due jobs of the worker's kinds, as the last walks saw them: a hint for the
claim by queue and kind (db/sql/jobs/claim_heads.py), which re-checks every row it takes.

A walk visits the queues with pending jobs in name order, at most ``WALK_CHUNK`` of them,
going on where the last one stopped (with thousands of tenants' delayed jobs a walk of
them all cost more than many claims: 0.3-0.8 s at 20,000, which the first claim waited
for), so it is never run per claim: after something may have changed (new jobs were
announced, a claim came back short) at most every ``WALK_SHARE``-th of the time it takes
(its cost stays a small share of the worker's, whatever the number of queues) and at
least ``WALK_MIN`` seconds apart; to carry an unfinished round on with nothing changed
(a worker draining what it has), every ``WALK_ROUND_SHARE``-th; at most ``WALK_MAX``
seconds apart otherwise. Each walk replaces the hint's heads (queue, kind, index: which
of the worker's kinds have due jobs there, with or without a limit key) in the range it
visited. A queue outside the hint waits for the walk that visits it again: one walk when
the queues with pending jobs are fewer than ``WALK_CHUNK``. When the hint is one head and
nothing changed since its walk, the claim reads that head alone (``one_head``): a delayed
job of another of the worker's kinds (or keyed, or unkeyed) in that queue that falls due
meanwhile, with nothing announced, waits for the next walk, ``WALK_MAX`` at most.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, LiteralString, NamedTuple

import psycopg

from pgbeat.db.literals import text_array
from pgbeat.db.sql.jobs import claim_heads as heads_sql

WALK_MIN = 0.25  # seconds between two walks, at least
WALK_MAX = 2.0  # seconds a hint is kept when nothing says it changed
WALK_SHARE = 20  # a walk waits this many times its own duration before the next
WALK_ROUND_SHARE = 100  # ... to only carry an unfinished round on (refresh at the latest)
WALK_CHUNK = 1000  # queues with pending jobs a walk visits, at most


class Head(NamedTuple):
    """A queue's due jobs of one kind in one of the two indexes of its pending jobs."""

    queue: str
    kind: str
    keyed: bool  # the index of jobs with a limit key


class DueQueues:
    """The hint: the heads with due jobs (in queue order), when they were walked, where the
    round of walks goes on, whether something may have changed.

    ``one_head`` is the one head a claim may read alone: there is exactly one, and nothing
    was announced, nor did a claim come back short, since the walk that found it. Otherwise
    a claim reads every kind of the worker in both indexes of the hint's queues, as before
    the heads were kept: a job announced since the walk, of another kind or with a limit key,
    in a queue of the hint, is claimed at once, not after the next walk.
    """

    def __init__(self) -> None:
        self.heads: list[Head] = []
        self._walked: dict[str, float] = {}  # per queue of the hint: when its walk began
        self._changed = 0.0  # monotonic: when something last said the hint may be wrong
        self._after: str | None = None  # the last queue the last walk visited (None: start over)
        self._next = 0.0  # monotonic: the earliest walk after a change
        self._next_round = 0.0  # ... that only carries an unfinished round on
        self._refresh = 0.0  # monotonic: the next walk even if nothing changed
        self._changed_since_walk = True  # stale() since the last walk began (or none yet)
        self._round_open = False  # the last walk stopped before the last queue

    @property
    def names(self) -> list[str]:
        """The hint's queues, in name order."""
        return sorted({head.queue for head in self.heads})

    @property
    def one_head(self) -> Head | None:
        """The hint's only head, if nothing may have changed since its walk (else None)."""
        if len(self.heads) != 1:
            return None
        head = self.heads[0]
        return head if self._walked.get(head.queue, 0.0) > self._changed else None

    def stale(self) -> None:
        """Something may have changed (jobs announced, a claim short, settings): walk soon."""
        self._changed_since_walk = True
        self._changed = time.monotonic()

    def wait(self, now: float) -> float:
        """Seconds until a walk may run (0: now)."""
        return max(0.0, self._walk_at() - now)

    def _walk_at(self) -> float:
        """When the next walk may run (monotonic): soon after a change, later when it would
        only carry the round on, at the refresh otherwise."""
        if self._changed_since_walk:
            return self._next  # never after the refresh: WALK_MIN < WALK_MAX
        if self._round_open:
            return min(self._next_round, self._refresh)
        return self._refresh

    def heads_for(
        self, conn: psycopg.Connection[Any], kinds: Sequence[str], held: Sequence[str]
    ) -> list[Head]:
        """The hint, walked again first when due."""
        now = time.monotonic()
        if now >= self._walk_at():
            names = self.names
            again = names if len(names) == 1 else []  # the hint's one queue: kept fresh
            params = {"kinds": kinds, "held": held, "after": self._after, "chunk": WALK_CHUNK}
            params["again"] = again
            rows = conn.execute(heads_sql.JOBS_DUE_QUEUES, params).fetchall()
            last = rows[-1][0] if rows and rows[-1][3] else None  # None: it reached the end
            kept = {
                head
                for head in self.heads
                if head.queue not in again and not _within(head.queue, self._after, last)
            }
            for queue, unkeyed, keyed, _ in rows:
                kept.update(Head(queue, kind, False) for kind in unkeyed)
                kept.update(Head(queue, kind, True) for kind in keyed)
                self._walked[queue] = now
            self.heads = sorted(kept)
            self._walked = {head.queue: self._walked[head.queue] for head in self.heads}
            self._after = last
            took = time.monotonic() - now
            self._next = now + max(WALK_MIN, WALK_SHARE * took)
            self._next_round = now + max(WALK_MIN, WALK_ROUND_SHARE * took)
            self._refresh = now + max(WALK_MAX, WALK_SHARE * took)
            self._changed_since_walk = False
            self._round_open = last is not None  # an unfinished round goes on
        return self.heads

    def claim_of(
        self,
        conn: psycopg.Connection[Any],
        kinds: Sequence[str],
        held: Sequence[str],
        params: dict[str, Any],
    ) -> LiteralString:
        """The claim statement that reads the hint (walked again first when due), with its
        parameters set in ``params``: the one head alone (nothing merged), else every kind
        of the hint's queues."""
        heads = self.heads_for(conn, kinds, held)
        one = self.one_head
        if one is None:
            params["queues"] = text_array(sorted({head.queue for head in heads}))
            return heads_sql.JOBS_CLAIM_BY_QUEUE_KIND
        params.update(queue=one.queue, kind=one.kind)
        return heads_sql.JOBS_CLAIM_ONE_KEYED_HEAD if one.keyed else heads_sql.JOBS_CLAIM_ONE_HEAD


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
