"""The claim led by queue and kind, for when the claim order's head is full of what the
worker cannot take: due jobs of kinds it has no handler for (a rolling deploy), or held
queues' backlogs beside thousands of queues of delayed jobs (docs/flow-control.md, "Why
the claim's cost no longer grows").

The worker walks the queues with due jobs of its kinds now and then (JOBS_DUE_QUEUES) and
keeps the answer as a hint; each claim reads only those queues' heads, per kind
(jobs_claim_kind, migration 0021), and re-checks everything the hint could have got wrong:
pending, due, kind, and that the queue is not held. A queue the hint misses waits for the
next walk, never longer than worker/due_queues.py's refresh.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs.claim_parts import _TAKE_BEST_PICKED

# How many of the first due jobs in claim order (jobs_claim_order) are of kinds the worker
# has no handler for: at most %(ahead)s rows read, so a worker whose kinds fill the head
# pays a few heap reads, every HELD_REFRESH. Many foreign rows at the head: the fast claim
# would step over all of them at every claim, so the worker claims by queue and kind.
JOBS_KINDS_AHEAD: LiteralString = """
SELECT count(*) FILTER (WHERE kind <> ALL(%(kinds)s::text[])) FROM (
    SELECT kind FROM jobs WHERE status = 'pending' AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT %(ahead)s
) AS head"""

# The queues, less the held ones (%(held)s), where a due job of the worker's kinds waits: a
# skip scan of jobs_claim_queue (one probe per queue with pending jobs), each queue probed
# for a due job of those kinds (jobs_claim_kind). Its cost grows with the queues that have
# pending jobs, so the worker runs it at most every DUE_QUEUES_MIN seconds, not per claim.
JOBS_DUE_QUEUES: LiteralString = """
WITH RECURSIVE pending_queues(q) AS (
    SELECT (SELECT min(queue) FROM jobs WHERE status = 'pending')
    UNION ALL
    SELECT (SELECT min(queue) FROM jobs WHERE status = 'pending' AND queue > p.q)
    FROM pending_queues AS p WHERE p.q IS NOT NULL
)
SELECT q FROM pending_queues
WHERE q IS NOT NULL AND q <> ALL(%(held)s::text[])
  AND EXISTS (SELECT FROM jobs
              WHERE status = 'pending' AND queue = q AND kind = ANY(%(kinds)s::text[])
                AND run_at <= now())
ORDER BY q"""

# Leases up to %(limit)s due jobs of the worker's kinds from the queues %(queues)s (the
# walk's hint, or the worker's --queues), less the held ones: each (queue, kind)'s first
# %(limit)s due jobs in claim order (jobs_claim_kind: its head, whatever precedes it in
# the other indexes), FOR UPDATE SKIP LOCKED, so workers claiming at once pass over each
# other's rows as JOBS_CLAIM's do (candidates picked unlocked and locked after collided:
# 4 workers took a third of what they took alone); the best %(limit)s of those heads, in
# claim order, are taken, the rows locked but not taken are free again when the statement
# ends. The kind is matched as a range, not by `=`: a kept plan takes `= $param` for a
# constant, drops it from the order, and may then read jobs_claim_order filtering (a whole
# backlog of other queues); in the order, only jobs_claim_kind gives it. Rows are found by
# tuple address, as in JOBS_CLAIM; a queue held since the hint is re-checked by the update.
JOBS_CLAIM_BY_QUEUE_KIND: LiteralString = (
    """
WITH picked AS (
    SELECT head.tid, head.id, head.priority, head.run_at
    FROM unnest(%(queues)s::text[]) AS w(q)
    CROSS JOIN unnest(%(kinds)s::text[]) AS k(kind)
    CROSS JOIN LATERAL (
        SELECT ctid AS tid, id, priority, run_at FROM jobs
        WHERE status = 'pending' AND queue = w.q AND kind >= k.kind AND kind <= k.kind
          AND run_at <= now()
        ORDER BY kind, priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS head
    WHERE w.q <> ALL(%(held)s::text[])
)
"""
    + _TAKE_BEST_PICKED
)
