"""The statements of flow control's tables (migration 0008): ``pgbeat_queues`` (each
queue's settings: paused, limits) and ``pgbeat_queue_starts`` (the starts a rate counts).

A limited queue is claimed in a transaction of its own: first its row is locked
(QUEUES_LOCK), then a claim of sql/jobs/claim.py reads its settings, counts its running
jobs and recent starts, and takes what they leave.
"""

from __future__ import annotations

from typing import LiteralString

# A row the constraints of migration 0019 refuse (written by SQL before them): NULL when
# valid, else why. Workers skip such a queue's limits (its jobs wait), `queues list` and the
# dashboard show the reason instead of the values they cannot read.
_PROBLEM: LiteralString = """
CASE WHEN rate_period IS NOT NULL
          AND rate_period NOT BETWEEN interval '1 ms' AND interval '1 day'
     THEN 'its rate period is outside 1ms-1d'
     WHEN key_rate_period IS NOT NULL
          AND key_rate_period NOT BETWEEN interval '1 ms' AND interval '1 day'
     THEN 'its key rate period is outside 1ms-1d'
     WHEN name ~ '^\\s' OR name ~ '\\s$' THEN 'its name has leading or trailing spaces'
END"""

# A queue's settings as QueueSettings reads them (jobs/queues.py), periods NULL when the
# row is invalid (a period Python could not hold), then the row's problem.
_SETTINGS_COLUMNS: LiteralString = (
    """
RETURNING name, paused, concurrency, key_concurrency, rate_count,
          CASE WHEN rate_period <= interval '1 day' THEN rate_period END AS rate_period,
          key_rate_count,
          CASE WHEN key_rate_period <= interval '1 day' THEN key_rate_period END
              AS key_rate_period,
          fair, """
    + _PROBLEM
    + " AS problem"
)

# -- settings -------------------------------------------------------------------------------

# Creates a queue's row or sets the limits named in %(set)s, leaving the others as they
# are, in one statement (primary key): two calls that each change one limit cannot undo
# each other. NULL clears a limit. Returns the queue's settings afterwards.
QUEUES_CONFIGURE: LiteralString = (
    """
INSERT INTO pgbeat_queues AS q (name, concurrency, key_concurrency, rate_count, rate_period,
                                key_rate_count, key_rate_period, fair)
VALUES (%(name)s, %(concurrency)s, %(key_concurrency)s, %(rate_count)s, %(rate_period)s,
        %(key_rate_count)s, %(key_rate_period)s, coalesce(%(fair)s::boolean, false))
ON CONFLICT (name) DO UPDATE SET
    fair = CASE WHEN 'fair' = ANY(%(set)s::text[]) THEN excluded.fair ELSE q.fair END,
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
    updated_at = now()"""
    + _SETTINGS_COLUMNS
)

# Pauses or resumes a queue, creating its row if need be (primary key).
QUEUES_SET_PAUSED: LiteralString = (
    """
INSERT INTO pgbeat_queues AS q (name, paused) VALUES (%(name)s, %(paused)s)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()"""
    + _SETTINGS_COLUMNS
)

# One page of the queues with settings or live jobs, by name after %(after)s, whose name
# contains %(name)s (NULL: any), at most %(limit)s: the names from pgbeat_queues, the queues
# with pending jobs (a skip scan of jobs_claim_queue, one probe per queue) and those with
# running ones (jobs_running: at most the cluster's slots); then the page's counts, each a
# scan of that queue's pending rows only. Settings as _SETTINGS_COLUMNS, then the counts.
QUEUES_LIST: LiteralString = (
    """
WITH RECURSIVE pending_queues(q) AS (
    SELECT (SELECT min(queue) FROM jobs
            WHERE status = 'pending' AND queue > coalesce(%(after)s::text, ''))
    UNION ALL
    SELECT (SELECT min(queue) FROM jobs WHERE status = 'pending' AND queue > p.q)
    FROM pending_queues AS p WHERE p.q IS NOT NULL
),
names AS (
    SELECT q AS name FROM pending_queues WHERE q IS NOT NULL
    UNION
    SELECT name FROM pgbeat_queues WHERE name > coalesce(%(after)s::text, '')
    UNION
    SELECT DISTINCT queue FROM jobs
    WHERE status = 'running' AND queue > coalesce(%(after)s::text, '')
),
page AS (
    SELECT name AS queue_name FROM names
    WHERE %(name)s::text IS NULL OR strpos(lower(name), lower(%(name)s::text)) > 0
    ORDER BY name LIMIT %(limit)s
)
SELECT queue_name AS name, coalesce(paused, false) AS paused, concurrency, key_concurrency,
       rate_count, CASE WHEN rate_period <= interval '1 day' THEN rate_period END AS rate_period,
       key_rate_count,
       CASE WHEN key_rate_period <= interval '1 day' THEN key_rate_period END AS key_rate_period,
       coalesce(fair, false) AS fair, """
    + _PROBLEM
    + """ AS problem,
       (SELECT count(*) FROM jobs WHERE status = 'pending' AND queue = queue_name) AS pending,
       (SELECT count(*) FROM jobs WHERE status = 'running' AND queue = queue_name) AS running
FROM page LEFT JOIN pgbeat_queues ON pgbeat_queues.name = page.queue_name
ORDER BY queue_name"""
)

# -- the claim of a limited queue ---------------------------------------------------------------

# The held queues among a worker's queues (paused, limited or fair; a scan of a small
# table): the fast claim skips them all, the limited claim takes the running ones with the
# statement their ``mode`` needs, unless the row has a ``problem`` (skipped, named once).
# ``updated_at`` tells the worker a queue's settings changed (its rest ends); ``ahead``
# counts the queue's pending jobs up to %(ahead)s (jobs_claim_queue, in its order: a bounded
# probe; without the order a plan read jobs_ready whole for an empty queue), which
# tells the worker whether its fast claim may simply skip them (JOBS_CLAIM_SKIPPING).
QUEUES_HELD: LiteralString = (
    """
SELECT name, paused,
       CASE WHEN fair THEN 'fair'
            WHEN key_concurrency IS NOT NULL OR key_rate_count IS NOT NULL THEN 'keyed'
            ELSE 'whole' END AS mode,
       """
    + _PROBLEM
    + """ AS problem, updated_at,
       (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'pending' AND queue = name
                              ORDER BY priority DESC, run_at, id LIMIT %(ahead)s) AS few)
           AS ahead
FROM pgbeat_queues
WHERE (paused OR fair OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
       OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
  AND (%(queues)s::text[] IS NULL OR name = ANY(%(queues)s::text[]))
ORDER BY name"""
)

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
