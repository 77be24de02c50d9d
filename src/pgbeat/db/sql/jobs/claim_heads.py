"""The claim led by queue and kind, for when the claim order's head is full of what the
worker cannot take: due jobs of kinds it has no handler for (a rolling deploy), or held
queues' backlogs beside thousands of queues of delayed jobs (docs/flow-control.md, "Why
the claim's cost no longer grows").

The worker walks the queues with due jobs of its kinds now and then, a bounded number of
queues a walk (JOBS_DUE_QUEUES), and keeps the answer as a hint; each claim reads only
those queues' heads, per kind (the two indexes of a queue's pending jobs, migration 0023:
queue_heads.py), and re-checks everything the hint could have got wrong: pending, due,
kind, and that the queue is not held. A queue the hint misses waits for the walk that
visits it again (worker/due_queues.py says when).
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs.claim_parts import _CLAIMED_COLUMNS, _NOT_HELD_PROBED, _SET_RUNNING
from pgbeat.db.sql.jobs.queue_heads import (
    _HEAD,
    _HEAD_ORDER,
    _KEYED_COLUMNS,
    _LATERAL,
    _LOCKED,
    _NEXT_KEYED,
    _NEXT_UNKEYED,
    _TID,
)

# How many of the first due jobs in claim order (jobs_claim_order) are of kinds the worker
# has no handler for: at most %(ahead)s rows read, so a worker whose kinds fill the head
# pays a few heap reads, every HELD_REFRESH. Many foreign rows at the head: the fast claim
# would step over all of them at every claim, so the worker claims by queue and kind.
JOBS_KINDS_AHEAD: LiteralString = """
SELECT count(*) FILTER (WHERE kind <> ALL(%(kinds)s::text[])) FROM (
    SELECT kind FROM jobs WHERE status = 'pending' AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT %(ahead)s
) AS head"""

# The worker's kinds (%(kinds)s) with a due job in queue ``w.q`` in one index of the queues'
# pending jobs (its predicate follows), in the order given: each kind's head, one row, in
# the index's order. Not ``kind = ANY(%(kinds)s)``: its kept generic plan read jobs_ready
# from the oldest due job, stepping over every foreign kind's due job (70 ms a walk beside
# 200,000); and not EXISTS, which drops its subquery's order (and the plan with it).
_DUE_KINDS: LiteralString = (
    "ARRAY(SELECT k.kind FROM unnest(%(kinds)s::text[]) AS k(kind)" + _LATERAL + "1" + _HEAD
)
_DUE_HEAD_END: LiteralString = _HEAD_ORDER.replace("LIMIT lim.n", "LIMIT 1") + "\n    ) AS due)"
assert "LIMIT 1" in _DUE_HEAD_END

# The next %(chunk)s queues with pending jobs after %(after)s (NULL: from the first), a skip
# scan that keeps each index's next queue (one probe per queue visited, in the index that
# held it), each probed for a due job of each of the worker's kinds in the indexes that
# hold it (_DUE_KINDS; a queue of unkeyed jobs only: one index, not two). As ``q, unkeyed,
# keyed, more``: the kinds with due jobs in each index of the queues that have some, less
# the held queues (%(held)s), and the last queue visited when %(chunk)s were (``more``: the
# next walk goes on after it), in the walk's order. The queues %(again)s are probed too,
# first (the hint's one queue: its heads stay as fresh as a walk, wherever the round is).
# Its cost grows with the queues it visits, so a walk visits a bounded number of them, and
# the worker runs one at most every WALK_SHARE-th of the time it takes (worker/
# due_queues.py): the first claim beside 20,000 queues of delayed jobs waited a whole walk
# (0.3-0.8 s) before. The kinds per index let a claim read the one head a walk found
# (JOBS_CLAIM_ONE_HEAD) instead of every kind's in both indexes.
JOBS_DUE_QUEUES: LiteralString = (
    """
WITH RECURSIVE pending_queues(q, u, k, n) AS (
    SELECT least(first.u, first.k), first.u, first.k, 1 FROM (
        SELECT """
    + _NEXT_UNKEYED
    + """ AS u,
               """
    + _NEXT_KEYED
    + """ AS k
        FROM (SELECT %(after)s::text AS q) AS prev
    ) AS first
    UNION ALL
    SELECT least(step.u, step.k), step.u, step.k, prev.n + 1
    FROM pending_queues AS prev
    CROSS JOIN LATERAL (
        SELECT CASE WHEN prev.u = prev.q THEN """
    + _NEXT_UNKEYED
    + """ ELSE prev.u END AS u,
               CASE WHEN prev.k = prev.q THEN """
    + _NEXT_KEYED
    + """ ELSE prev.k END AS k
        OFFSET 0
    ) AS step
    WHERE prev.q IS NOT NULL AND prev.n < %(chunk)s::int
),
w(q, unkeyed, keyed, n) AS (
    SELECT q, u = q, k = q, n FROM pending_queues WHERE q IS NOT NULL
    UNION ALL
    SELECT q, true, true, 0 FROM unnest(%(again)s::text[]) AS again(q)
)
SELECT q, unkeyed, keyed, n = %(chunk)s::int AS more FROM (
    SELECT w.q, w.n,
           CASE WHEN w.unkeyed AND w.q <> ALL(%(held)s::text[]) THEN """
    + _DUE_KINDS
    + "limit_key IS NULL"
    + _DUE_HEAD_END
    + """ ELSE '{}' END AS unkeyed,
           CASE WHEN coalesce(w.keyed, false) AND w.q <> ALL(%(held)s::text[]) THEN """
    + _DUE_KINDS
    + "limit_key IS NOT NULL"
    + _DUE_HEAD_END
    + """ ELSE '{}' END AS keyed
    FROM w
    OFFSET 0
) AS visited
WHERE cardinality(unkeyed) > 0 OR cardinality(keyed) > 0 OR n = %(chunk)s::int
ORDER BY n"""
)

# Each given queue's (%(queues)s, less the held ones) head of each of the worker's kinds
# (%(kinds)s) in one index of the queues' pending jobs (its predicate follows), at most
# %(limit)s rows, locked FOR UPDATE SKIP LOCKED, as ``tid, limit_key, priority, run_at``
# (queue_heads.py's _HEAD). Written inline (no CTE for the queues, kinds or limit, and
# no coalesce of the kinds): the generic form of _TAKE_BEST_HEADS, sized for any claim,
# cost about a fifth more per execution, more than the plain JOBS_CLAIM
# (docs/flow-control.md, "Why the claim's cost no longer grows").
_GIVEN_HEADS: LiteralString = (
    "SELECT h.* FROM unnest(%(queues)s::text[]) AS w(q)"
    " CROSS JOIN unnest(%(kinds)s::text[]) AS k(kind)" + _LATERAL + _TID + _KEYED_COLUMNS + _HEAD
)
_GIVEN_HEAD_END: LiteralString = (
    _HEAD_ORDER.replace("LIMIT lim.n", "LIMIT %(limit)s")
    + _LOCKED
    + "\n    ) AS h\n    WHERE w.q <> ALL(%(held)s::text[])"
)
assert "LIMIT %(limit)s" in _GIVEN_HEAD_END

# Leases up to %(limit)s due jobs of the worker's kinds from the queues %(queues)s (the
# walk's hint, or the worker's --queues), less the held ones: each (queue, kind)'s first
# %(limit)s due jobs in claim order in both indexes of the queue's pending jobs (their
# heads, whatever precedes them in jobs_claim_order), FOR UPDATE SKIP LOCKED, so workers
# claiming at once pass over each other's rows as JOBS_CLAIM's do (candidates picked
# unlocked and locked after collided: 4 workers took a third of what they took alone);
# the best %(limit)s of those heads, in claim order, are taken, the rows locked but not
# taken are free again when the statement ends. Rows are found by tuple address, as in
# JOBS_CLAIM; a queue held since the hint is re-checked by the update (one probe of
# pgbeat_queues per row taken). Only for a worker whose kinds are known.
JOBS_CLAIM_BY_QUEUE_KIND: LiteralString = (
    "\nUPDATE jobs"
    + _SET_RUNNING
    + """
WHERE ctid = ANY(ARRAY(
    SELECT tid FROM (
    """
    + _GIVEN_HEADS
    + "limit_key IS NULL"
    + _GIVEN_HEAD_END
    + "\n    UNION ALL\n    "
    + _GIVEN_HEADS
    + "limit_key IS NOT NULL"
    + _GIVEN_HEAD_END
    + """
    ) AS picked
    ORDER BY priority DESC, run_at, id LIMIT %(limit)s))"""
    + _NOT_HELD_PROBED
    + _CLAIMED_COLUMNS
)

# The claim by queue and kind when the last walk found due jobs of the worker's kinds in one
# head alone: queue %(queue)s, kind %(kind)s, one index (the drain of one queue behind a
# foreign backlog or beside held backlogs). That head's first %(limit)s due jobs in claim
# order, FOR UPDATE SKIP LOCKED, one index scan: no merge of every kind's head in both
# indexes, no sort of them (a claim of 10 for a worker of three kinds: 0.35 ms against 0.44,
# the plain JOBS_CLAIM 0.33; docs/flow-control.md). The queue's held state is re-checked
# once (one probe of pgbeat_queues, the queue being a parameter), not per row.
_ONE_HEAD: LiteralString = _HEAD.replace("w.q", "%(queue)s::text").replace(
    "k.kind", "%(kind)s::text"
)
_ONE_HEAD_ORDER: LiteralString = _HEAD_ORDER.replace("LIMIT lim.n", "LIMIT %(limit)s") + _LOCKED
_ONE_HEAD_OPENING: LiteralString = (
    "\nUPDATE jobs" + _SET_RUNNING + "\nWHERE ctid = ANY(ARRAY(\n    SELECT ctid"
)
_ONE_HEAD_CLOSING: LiteralString = (
    _ONE_HEAD_ORDER + "))" + _NOT_HELD_PROBED.replace("jobs.queue", "%(queue)s::text")
)
assert "%(queue)s::text" in _ONE_HEAD_CLOSING and "%(kind)s::text" in _ONE_HEAD
JOBS_CLAIM_ONE_HEAD: LiteralString = (
    _ONE_HEAD_OPENING + _ONE_HEAD + "limit_key IS NULL" + _ONE_HEAD_CLOSING + _CLAIMED_COLUMNS
)
# The same of the index of keyed jobs (an unlimited queue's jobs may carry a limit key).
JOBS_CLAIM_ONE_KEYED_HEAD: LiteralString = (
    _ONE_HEAD_OPENING + _ONE_HEAD + "limit_key IS NOT NULL" + _ONE_HEAD_CLOSING + _CLAIMED_COLUMNS
)
