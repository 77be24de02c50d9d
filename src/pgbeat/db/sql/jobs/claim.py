"""Every statement that claims jobs for a worker: the fast claim, the claim by queue heads,
the rows it could not read, when the next job falls due; and, from claim_limited.py, the
claims of limited and fair queues. (``pgbeat.testing``'s one-by-one claim is in
testing.py.)

The statements are composed once, at import, from the fragments of claim_parts.py: every
claim returns the same columns (_CLAIMED_COLUMNS, which worker/claimed_rows.py decodes by
name), sets the same columns, and the limited ones read their queue's settings and budget
the same way.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.ended_steps import _ADVANCED
from pgbeat.db.sql.jobs.claim_parts import (
    _CLAIMED_COLUMNS,
    _KINDS,
    _NOT_HELD,
    _NOT_HELD_PROBED,
    _SET_RUNNING,
    _TAKE_BEST_HEADS,
)
from pgbeat.db.sql.jobs.queue_heads import (
    _NEXT_QUEUE,
)

# -- the statements -----------------------------------------------------------------------

# Leases up to %(limit)s due jobs in claim order (higher priority first, then run_at, then
# id), skipping rows other workers hold (jobs_claim_order: the head of the index, no sort).
# Only for a worker of every queue that saw no queue held at its last look (otherwise
# JOBS_CLAIM_BY_QUEUE), so the scan filters on kinds alone: each filter here is paid on
# every row the scan passes, on the drain's critical path. The lease and started_at are set
# and committed at once: no lock outlives this statement. The update finds the rows it
# locked by tuple address (`ctid = ANY(ARRAY(...))`, a TID scan whatever the statistics
# say; a join became a sequential scan per claim on a fresh table): locked rows cannot move
# (a ctid names one row in a plain table only: docs/scale.md).
JOBS_CLAIM: LiteralString = (
    """
UPDATE jobs"""
    + _SET_RUNNING
    + """
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM jobs
    WHERE status = 'pending' AND run_at <= now()
      AND """
    + _KINDS
    + """
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
))"""
    + _NOT_HELD
    + _CLAIMED_COLUMNS
)

# JOBS_CLAIM beside held queues with few pending jobs (QUEUES_HELD's ``ahead``): the scan
# also skips the held queues' rows (%(held)s: the held queues that had pending jobs at the
# worker's last look; one that gained some since is re-checked by the update), at most a
# few per claim, where the claim by queue heads would walk every queue with a pending job
# (20,000 tenants' delayed jobs) on every claim.
JOBS_CLAIM_SKIPPING: LiteralString = JOBS_CLAIM.replace(
    "\n    ORDER BY priority DESC, run_at, id\n    LIMIT %(limit)s\n",
    "\n      AND queue <> ALL(%(held)s::text[])"
    "\n    ORDER BY priority DESC, run_at, id\n    LIMIT %(limit)s\n",
).replace(_NOT_HELD, _NOT_HELD_PROBED)
assert _NOT_HELD_PROBED in JOBS_CLAIM_SKIPPING and "ALL(%(held)s" in JOBS_CLAIM_SKIPPING

# Fails claimed rows the worker could not decode (a date outside years 1-9999, a payload
# nested too deeply for Python), each with its reason (primary key); a workflow step's
# failure advances its workflow (ended_steps.py).
# Never kept (prepare=False): a plan kept from a small table reads all of jobs_running,
# whose predicate its status test matches, not the primary key (worker.SESSION_SETTINGS).
JOBS_FAIL_UNREADABLE: LiteralString = (
    """
WITH ended AS (
    UPDATE jobs
    SET status = 'failed', locked_until = NULL, finished_at = now(),
        last_error = (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)]
    WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'
    RETURNING id, status, workflow_id
)"""
    + _ADVANCED
    + """
SELECT id FROM ended, advanced"""
)

# Subscribes to the notifications of migrations/0002's insert trigger and of 0019's trigger
# on pgbeat_queues (payload 'queues': a queue's settings changed), on the schema's channel.
JOBS_LISTEN: LiteralString = "SELECT pgbeat_listen('pgbeat_jobs')"

# Seconds until the next pending job the fast claim may take falls due, by the database
# clock, so an idle worker wakes when a delayed job becomes due (jobs_ready). Asked after a
# fast claim found nothing: the jobs due before it are those of the held queues the worker
# saw with pending jobs (%(held)s), so the scan starts 5 s back (a job that fell due
# between the claim and this look comes back negative: claim again) and never walks a
# paused queue's backlog.
# JOBS_SECONDS_TO_NEXT_LIMITED covers the limited queues. The first in run_at order, not
# min(run_at): a plan kept from an empty table read all of an index holding every column
# asked (0021's jobs_claim_kind) for min(); in that order only jobs_ready reads it unsorted.
JOBS_SECONDS_TO_NEXT: LiteralString = (
    """
SELECT extract(epoch FROM (
    SELECT run_at FROM jobs
    WHERE status = 'pending' AND run_at > now() - interval '5 seconds'
      AND """
    + _KINDS
    + """
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
      AND queue <> ALL(%(held)s::text[])
    ORDER BY run_at LIMIT 1) - now())::float8"""
)

# JOBS_CLAIM when some queues are held or the worker takes only some queues: the scan of
# JOBS_CLAIM would step over every pending job of a held queue (a paused queue's 200,000
# jobs on every claim). Instead each wanted queue's heads are read (queue_heads.py: each
# kind's, in both indexes of the queue's pending jobs; the worker's --queues, or the queues
# with pending jobs found by a skip scan, one probe per index and queue), FOR UPDATE SKIP
# LOCKED, and the best of those heads (at most %(limit)s per queue, kind and index: never
# the backlog) are claimed; the rows locked but not taken are free again when the
# statement ends. Held queues are re-checked and the taken rows found by their tuple
# address, as in JOBS_CLAIM.
JOBS_CLAIM_BY_QUEUE: LiteralString = (
    """
WITH RECURSIVE pending_queues(q) AS (
    SELECT """
    + _NEXT_QUEUE
    + """ FROM (SELECT NULL::text AS q) AS prev
    WHERE %(queues)s::text[] IS NULL
    UNION ALL
    SELECT """
    + _NEXT_QUEUE
    + """ FROM pending_queues AS prev
    WHERE prev.q IS NOT NULL
),
w(q) AS (
    SELECT q FROM pending_queues WHERE q IS NOT NULL AND q <> ALL(%(held)s::text[])
    UNION ALL
    SELECT q FROM unnest(%(queues)s::text[]) AS given(q) WHERE q <> ALL(%(held)s::text[])
),"""
    + _TAKE_BEST_HEADS
)
