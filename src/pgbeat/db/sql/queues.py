"""The statements of flow control's tables (migration 0008): ``pgbeat_queues`` (each
queue's settings: paused, limits) and ``pgbeat_queue_starts`` (the starts a rate counts).

A limited queue is claimed in a transaction of its own: first its row is locked
(QUEUES_LOCK), then a claim of sql/jobs/claim.py reads its settings, counts its running
jobs and recent starts, and takes what they leave.
"""

from __future__ import annotations

from typing import LiteralString

# -- settings -------------------------------------------------------------------------------

# Creates a queue's row or sets the limits named in %(set)s, leaving the others as they
# are, in one statement (primary key): two calls that each change one limit cannot undo
# each other. NULL clears a limit. Returns the queue's settings afterwards.
QUEUES_CONFIGURE: LiteralString = """
INSERT INTO pgbeat_queues AS q (name, concurrency, key_concurrency, rate_count, rate_period,
                                key_rate_count, key_rate_period)
VALUES (%(name)s, %(concurrency)s, %(key_concurrency)s, %(rate_count)s, %(rate_period)s,
        %(key_rate_count)s, %(key_rate_period)s)
ON CONFLICT (name) DO UPDATE SET
    concurrency = CASE WHEN 'concurrency' = ANY(%(set)s::text[])
                       THEN excluded.concurrency ELSE q.concurrency END,
    key_concurrency = CASE WHEN 'key_concurrency' = ANY(%(set)s::text[])
                           THEN excluded.key_concurrency ELSE q.key_concurrency END,
    rate_count = CASE WHEN 'rate' = ANY(%(set)s::text[])
                      THEN excluded.rate_count ELSE q.rate_count END,
    rate_period = CASE WHEN 'rate' = ANY(%(set)s::text[])
                       THEN excluded.rate_period ELSE q.rate_period END,
    key_rate_count = CASE WHEN 'key_rate' = ANY(%(set)s::text[])
                          THEN excluded.key_rate_count ELSE q.key_rate_count END,
    key_rate_period = CASE WHEN 'key_rate' = ANY(%(set)s::text[])
                           THEN excluded.key_rate_period ELSE q.key_rate_period END,
    updated_at = now()
RETURNING name, paused, concurrency, key_concurrency, rate_count, rate_period,
          key_rate_count, key_rate_period"""

# Pauses or resumes a queue, creating its row if need be (primary key).
QUEUES_SET_PAUSED: LiteralString = """
INSERT INTO pgbeat_queues AS q (name, paused) VALUES (%(name)s, %(paused)s)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
RETURNING name, paused, concurrency, key_concurrency, rate_count, rate_period,
          key_rate_count, key_rate_period"""

# Every queue with settings or live jobs: its settings and pending/running counts. Counts
# scan the pending and running rows (jobs_claim_queue, jobs_running): an operator's view.
QUEUES_LIST: LiteralString = """
WITH live AS (
    SELECT queue, count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'running') AS running
    FROM jobs WHERE status IN ('pending', 'running') GROUP BY queue
)
SELECT coalesce(q.name, live.queue) AS name, coalesce(q.paused, false) AS paused,
       q.concurrency, q.key_concurrency, q.rate_count, q.rate_period,
       q.key_rate_count, q.key_rate_period,
       coalesce(live.pending, 0) AS pending, coalesce(live.running, 0) AS running
FROM pgbeat_queues AS q FULL JOIN live ON live.queue = q.name
ORDER BY 1"""

# -- the claim of a limited queue ---------------------------------------------------------------

# The paused or limited queues among a worker's queues, which are paused and which have
# per-key limits (a scan of a small table): the fast claim skips them all, the limited
# claim takes the running ones (with the statement their limits need).
QUEUES_HELD: LiteralString = """
SELECT name, paused, key_concurrency IS NOT NULL OR key_rate_count IS NOT NULL AS keyed
FROM pgbeat_queues
WHERE (paused OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
       OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
  AND (%(queues)s::text[] IS NULL OR name = ANY(%(queues)s::text[]))
ORDER BY name"""

# Locks a queue's row for the transaction of a limited queue's claim (a claim statement of
# sql/jobs/claim.py follows it, in the same round trip, and reads the settings itself):
# claims of one queue take turns, each seeing the ones before it. It also sets how the
# claim that follows is planned, for this transaction only: once per connection and kept
# (a generic plan, once psycopg prepares the statement), as planning those statements
# took a large share of the claim (docs/benchmarks.md); and with sequential scans off,
# so that a plan made while the table was small reads the claim indexes as a plan made at
# a million rows does (a sequential scan would then sort the backlog at every claim until
# the next ANALYZE). Their shape does not depend on their parameters: the budget is read
# inside them. JIT is off with them: with sequential scans off, a relation that only a
# sequential scan can read costs more than jit_above_cost, and JIT would compile that kept
# plan at every execution. tests/integration/test_queues_cli.py checks a plan made on an
# empty table and used at 100,000 rows.
QUEUES_LOCK: LiteralString = """
SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)
FROM pgbeat_queues WHERE name = %(queue)s FOR UPDATE"""
