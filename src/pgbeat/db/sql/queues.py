"""The statements of flow control's tables (migration 0008): ``pgbeat_queues`` (each
queue's settings: paused, limits) and ``pgbeat_queue_starts`` (the starts a rate counts).

A limited queue is claimed in a transaction of its own: first its row is locked
(QUEUES_LOCK), then a claim of sql/jobs/claim.py reads its settings, counts its running
jobs and recent starts, and takes what they leave.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs.queue_heads import _HELD_AHEAD, _NEXT_QUEUE, _PENDING_OF

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


def _matches(column: LiteralString) -> LiteralString:
    """Whether ``column`` contains %(name)s, in any case (NULL: every name matches)."""
    return "(%(name)s::text IS NULL OR strpos(lower(" + column + "), lower(%(name)s::text)) > 0)"


# The name filter of each of QUEUES_LIST's sources, composed once at import.
_HEAD_MATCHES = _matches("head.q")
_NEXT_MATCHES = _matches("next.q")
_Q_MATCHES = _matches("q")
_SETTINGS_MATCHES = _matches("s.name")
_RUNNING_MATCHES = _matches("r.queue")

# One page of the queues with settings or live jobs, by name after %(after)s, whose name
# contains %(name)s (NULL: any), at most %(limit)s. The queues with pending jobs are walked
# in name order by a skip scan of the two indexes of a queue's pending jobs (migration
# 0023, jobs/queue_heads.py: one probe per index and queue), which stops once
# %(limit)s of them match or %(span)s were probed: a page never walks all 20,000 queues of
# a tenant-scale database. ``searched_to`` is the last queue walked when the walk stopped
# before the end (NULL when it reached it): every queue up to it was looked at, so the
# page holds the matching names up to it, from the walk, pgbeat_queues (primary key) and
# the queues with running jobs (counted once, through jobs_running: at most the cluster's
# slots), and the next page starts after it when the page is not full. Then the page's
# pending counts, each a scan of that queue's rows only (both indexes). Settings as
# _SETTINGS_COLUMNS, then the counts and ``searched_to``; one row with a NULL name when
# the page is empty (it still carries ``searched_to``).
QUEUES_LIST: LiteralString = (
    """
WITH RECURSIVE walk(q, walked, found) AS (
    SELECT head.q, 1, (head.q IS NOT NULL AND """
    + _HEAD_MATCHES
    + """)::int
    FROM (SELECT %(after)s::text AS q) AS prev,
         LATERAL (SELECT """
    + _NEXT_QUEUE
    + """ AS q) AS head
    UNION ALL
    SELECT next.q, prev.walked + 1, prev.found + (next.q IS NOT NULL AND """
    + _NEXT_MATCHES
    + """)::int
    FROM walk AS prev,
         LATERAL (SELECT """
    + _NEXT_QUEUE
    + """ AS q) AS next
    WHERE prev.q IS NOT NULL AND prev.walked < %(span)s AND prev.found < %(limit)s
),
bound AS (
    SELECT CASE WHEN bool_or(q IS NULL) THEN NULL ELSE max(q) END AS searched_to FROM walk
),
running AS MATERIALIZED (
    SELECT queue, count(*) AS jobs FROM jobs WHERE status = 'running' GROUP BY queue
),
names AS (
    SELECT q AS name FROM walk WHERE q IS NOT NULL AND """
    + _Q_MATCHES
    + """
    UNION
    (SELECT s.name FROM pgbeat_queues AS s, bound
     WHERE s.name > coalesce(%(after)s::text, '')
       AND (bound.searched_to IS NULL OR s.name <= bound.searched_to) AND """
    + _SETTINGS_MATCHES
    + """
     ORDER BY s.name LIMIT %(limit)s)
    UNION
    SELECT r.queue FROM running AS r, bound
    WHERE r.queue > coalesce(%(after)s::text, '')
      AND (bound.searched_to IS NULL OR r.queue <= bound.searched_to) AND """
    + _RUNNING_MATCHES
    + """
),
page AS (
    SELECT name AS queue_name FROM names ORDER BY name LIMIT %(limit)s
)
SELECT queue_name AS name, coalesce(paused, false) AS paused, concurrency, key_concurrency,
       rate_count, CASE WHEN rate_period <= interval '1 day' THEN rate_period END AS rate_period,
       key_rate_count,
       CASE WHEN key_rate_period <= interval '1 day' THEN key_rate_period END AS key_rate_period,
       coalesce(fair, false) AS fair, """
    + _PROBLEM
    + """ AS problem,
       """
    + _PENDING_OF
    + """ AS pending,
       coalesce((SELECT jobs FROM running WHERE running.queue = queue_name), 0) AS running,
       bound.searched_to
FROM bound
LEFT JOIN (page LEFT JOIN pgbeat_queues ON pgbeat_queues.name = page.queue_name) ON true
ORDER BY queue_name"""
)

# -- the claim of a limited queue ---------------------------------------------------------------

# The held queues among a worker's queues (paused, limited or fair; a scan of a small
# table): the fast claim skips them all, the limited claim takes the running ones with the
# statement their ``mode`` needs, unless the row has a ``problem`` (skipped, named once).
# ``updated_at`` tells the worker a queue's settings changed (its rest ends); ``ahead``
# counts the queue's pending jobs up to %(ahead)s (both indexes of its pending jobs, in their
# order: a bounded probe; without the order a plan read jobs_ready whole), which
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
       """
    + _HELD_AHEAD
    + """ AS ahead
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

# -- the overview's queues -------------------------------------------------------------------

# The queues of the oldest due jobs, oldest first, at most %(limit)s: each the queue of the
# oldest due job whose queue is not named yet (jobs_ready, in run_at order, from the last
# one named: every older due job is of a queue named before), read among the next
# %(scan)s due jobs at most, so the read is bounded however many queues and jobs there
# are; fewer rows when one queue's backlog fills a look. Each with its oldest due job's
# wait and whether it is paused (primary key, for those few only). A held workflow step is
# never due (run_at 9999-12-29): its wait for its parents is no queue delay. A run_at
# Python cannot hold (written by SQL) reads as NULL, its wait too if infinite.
QUEUES_OLDEST_DUE: LiteralString = """
WITH RECURSIVE heads(queue, due, seen, n) AS (
    SELECT oldest.queue, oldest.run_at, ARRAY[oldest.queue], 1
    FROM (SELECT queue, run_at FROM jobs WHERE status = 'pending' AND run_at <= now()
          ORDER BY run_at LIMIT 1) AS oldest
    UNION ALL
    SELECT next.queue, next.run_at, h.seen || next.queue, h.n + 1
    FROM heads AS h,
         LATERAL (SELECT ahead.queue, ahead.run_at
                  FROM (SELECT queue, run_at FROM jobs
                        WHERE status = 'pending' AND run_at <= now() AND run_at >= h.due
                        ORDER BY run_at LIMIT %(scan)s) AS ahead
                  WHERE NOT ahead.queue = ANY(h.seen)
                  ORDER BY ahead.run_at LIMIT 1) AS next
    WHERE h.n < %(limit)s
)
SELECT h.queue AS name,
       CASE WHEN h.due >= '0001-01-03' THEN h.due END AS oldest_due_at,
       CASE WHEN h.due > '-infinity' THEN extract(epoch FROM now() - h.due)::float8 END
           AS waits_s,
       coalesce((SELECT paused FROM pgbeat_queues WHERE name = h.queue), false) AS paused
FROM heads AS h
ORDER BY h.n"""
