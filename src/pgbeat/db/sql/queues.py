"""The statements of flow control's tables (migration 0008): ``pgbeat_queues`` (each
queue's settings: paused, limits) and ``pgbeat_queue_starts`` (the starts a rate counts).

A limited queue is claimed in a transaction of its own: first its row is locked
(QUEUES_LOCK), then QUEUES_BUDGET counts its running jobs and recent starts, and a claim
of sql/jobs/claim.py takes that many.
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

# The paused or limited queues among a worker's queues, and which are paused (a scan of a
# small table): the fast claim skips them all, the limited claim takes the running ones.
QUEUES_HELD: LiteralString = """
SELECT name, paused FROM pgbeat_queues
WHERE (paused OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
       OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
  AND (%(queues)s::text[] IS NULL OR name = ANY(%(queues)s::text[]))
ORDER BY name"""

# Locks a queue's row for this claim's transaction and reads its limits as they are now
# (FOR UPDATE returns the newest version of the row). Periods in seconds.
QUEUES_LOCK: LiteralString = """
SELECT paused, concurrency, key_concurrency,
       rate_count, extract(epoch FROM rate_period)::float8,
       key_rate_count, extract(epoch FROM key_rate_period)::float8
FROM pgbeat_queues WHERE name = %(queue)s FOR UPDATE"""

# How many jobs the queue may start now (run after QUEUES_LOCK, in its transaction): the
# claim's limit, its free concurrency slots (jobs_running) and its rate's remaining
# starts in the window (pgbeat_queue_starts_window); least() ignores the NULLs of unset
# limits. Returns the clock the claim records its starts at, read after the lock was
# granted: claims of one queue follow one another, so their start times only grow; and,
# when the rate is spent, in how many seconds its oldest start leaves the window. Deletes
# the starts older than the longest window.
QUEUES_BUDGET: LiteralString = """
WITH clock AS (SELECT clock_timestamp() AS t),
pruned AS (
    DELETE FROM pgbeat_queue_starts USING clock
    WHERE %(record)s::bool AND queue = %(queue)s
      AND started_at <= t - %(keep_seconds)s::float8 * interval '1 second'
)
SELECT greatest(0, least(%(limit)s::int, running.left, starts.left)), t, starts.left,
       extract(epoch FROM starts.oldest + %(rate_seconds)s::float8 * interval '1 second' - t)
FROM clock,
LATERAL (SELECT %(concurrency)s::int - count(*) AS left FROM jobs
         WHERE status = 'running' AND queue = %(queue)s) AS running,
LATERAL (SELECT %(rate_count)s::int - count(*) AS left, min(started_at) AS oldest
         FROM pgbeat_queue_starts
         WHERE queue = %(queue)s
           AND started_at > t - %(rate_seconds)s::float8 * interval '1 second') AS starts"""
