"""The statements of flow control (migration 0008): queue settings, the claim by queue heads
and the claim of limited queues.

A limited queue is claimed in a transaction of its own: first its ``pgbeat_queues`` row is
locked (QUEUES_LOCK), then a claim statement counts its running jobs and recent starts. The
claim is a new statement, so under READ COMMITTED its snapshot is taken after the lock was
granted and sees every claim committed by the transaction that held it before.
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

# The limit keys of a queue that hold at least one running job, busiest first
# (jobs_running): which keys are saturated, for the dashboard.
QUEUES_RUNNING_KEYS: LiteralString = """
SELECT limit_key, count(*) FROM jobs
WHERE status = 'running' AND queue = %(name)s AND limit_key IS NOT NULL
GROUP BY limit_key ORDER BY count(*) DESC, limit_key LIMIT %(limit)s"""

# Pending jobs by kind and queue, to tell which no live worker claims (a scan of the
# pending rows: an operator's command).
JOBS_PENDING_KINDS: LiteralString = """
SELECT kind, queue, count(*) FROM jobs WHERE status = 'pending'
GROUP BY kind, queue ORDER BY kind, queue"""

# -- the claim of a limited queue ---------------------------------------------------------------

# JOBS_CLAIM when some queues are held (paused or limited) or the worker takes only some
# queues: the scan of JOBS_CLAIM would step over every pending job of a held queue (a paused
# queue's 200,000 jobs on every claim). Instead each wanted queue's head is read from
# jobs_claim_queue (the worker's --queues, or the queues with pending jobs found by a skip
# scan of that index, one probe per queue), FOR UPDATE SKIP LOCKED, and the best of those
# heads (at most %(limit)s per queue: never the backlog) are claimed; the rows locked but
# not taken are free again when the statement ends. Held queues are re-checked as there.
JOBS_CLAIM_BY_QUEUE: LiteralString = """
WITH RECURSIVE pending_queues(q) AS (
    SELECT (SELECT min(queue) FROM jobs WHERE status = 'pending')
    WHERE %(queues)s::text[] IS NULL
    UNION ALL
    SELECT (SELECT min(queue) FROM jobs WHERE status = 'pending' AND queue > pending_queues.q)
    FROM pending_queues WHERE pending_queues.q IS NOT NULL
),
wanted(q) AS (
    SELECT q FROM pending_queues WHERE q IS NOT NULL
    UNION ALL
    SELECT unnest(%(queues)s::text[])
),
picked AS (
    SELECT head.id, head.priority, head.run_at
    FROM wanted CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM jobs
        WHERE status = 'pending' AND queue = wanted.q AND run_at <= now()
          AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS head
    WHERE wanted.q <> ALL(%(held)s::text[])
)
UPDATE jobs
SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
    started_at = now()
WHERE id = ANY(ARRAY(SELECT id FROM picked ORDER BY priority DESC, run_at, id LIMIT %(limit)s))
  AND queue <> ALL(ARRAY(
      SELECT name FROM pgbeat_queues
      WHERE paused OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
         OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL))
RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
          CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN run_at END AS run_at,
          CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN created_at END AS created_at,
          unique_key, queue, priority, limit_key, job_key"""

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

# Claims the queue's budget (QUEUES_BUDGET) in claim order (jobs_claim_queue) and records
# the starts when the queue has a rate. Dates outside years 1-9999 come back NULL, the
# payload as text: the worker decodes each row alone and fails only a row it cannot read.
JOBS_CLAIM_LIMITED: LiteralString = """
WITH picked AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = %(queue)s AND run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE jobs
    SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
        started_at = now()
    WHERE id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
              CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
                   THEN run_at END AS run_at,
              CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
                   THEN created_at END AS created_at,
              unique_key, queue, priority, limit_key, job_key
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT queue, limit_key, %(now)s::timestamptz FROM claimed WHERE %(record)s::bool
)
SELECT * FROM claimed"""

# The claim of a queue with per-key limits, from the head of its backlog: the first
# %(scan)s due jobs in claim order (jobs_claim_queue), of which each limit key gets as many
# as its own budget allows (key_concurrency minus its running jobs, jobs_running;
# key_rate minus its starts in the window, pgbeat_queue_starts_key_window): a saturated key
# gets none, so a batch never holds more of a key than it may run. Jobs without a limit_key
# count against the queue's limits only. Up to %(limit)s (the queue's budget) are taken in
# claim order. Claims of the queue are serialised by QUEUES_LOCK, so rows are not skipped:
# an update that meets a row changed meanwhile re-checks that it is pending (in a CASE:
# `status = 'pending'` there let the planner look the ids up in a partial index, a scan
# of the whole backlog, instead of the primary key). The key counts are MATERIALIZED:
# inlined, they ran once per row of the head. The last
# column is how many jobs the head held (one row with NULL job columns when none was
# claimed): a full head that gave too few means saturated keys clog it, and the worker
# goes on with JOBS_CLAIM_LIMITED_KEYS.
JOBS_CLAIM_LIMITED_HEAD: LiteralString = """
WITH head AS (
    SELECT id, limit_key, priority, run_at FROM jobs
    WHERE status = 'pending' AND queue = %(queue)s AND run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
    ORDER BY priority DESC, run_at, id
    LIMIT %(scan)s
),
ranked AS (
    SELECT id, limit_key, priority, run_at,
           row_number() OVER (PARTITION BY limit_key ORDER BY priority DESC, run_at, id) AS nth
    FROM head
),
running_keys AS MATERIALIZED (
    SELECT limit_key, count(*) AS n FROM jobs
    WHERE status = 'running' AND queue = %(queue)s AND limit_key IS NOT NULL
    GROUP BY limit_key
),
started_keys AS MATERIALIZED (
    SELECT limit_key, count(*) AS n FROM pgbeat_queue_starts
    WHERE queue = %(queue)s AND limit_key IS NOT NULL
      AND started_at > %(now)s::timestamptz - %(key_rate_seconds)s::float8 * interval '1 second'
    GROUP BY limit_key
),
picked AS (
    SELECT ranked.id FROM ranked
    LEFT JOIN running_keys AS r ON r.limit_key = ranked.limit_key
    LEFT JOIN started_keys AS s ON s.limit_key = ranked.limit_key
    WHERE ranked.limit_key IS NULL
       OR ranked.nth <= coalesce(least(%(key_concurrency)s::int - coalesce(r.n, 0),
                                       %(key_rate_count)s::int - coalesce(s.n, 0)), ranked.nth)
    ORDER BY ranked.priority DESC, ranked.run_at, ranked.id
    LIMIT %(limit)s
),
claimed AS (
    UPDATE jobs
    SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
        started_at = now()
    WHERE id = ANY(ARRAY(SELECT id FROM picked))
      AND CASE status WHEN 'pending' THEN true ELSE false END
    RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
              CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
                   THEN run_at END AS run_at,
              CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
                   THEN created_at END AS created_at,
              unique_key, queue, priority, limit_key, job_key
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT queue, limit_key, %(now)s::timestamptz FROM claimed WHERE %(record)s::bool
)
SELECT claimed.*, scanned.n
FROM (SELECT count(*) AS n FROM head) AS scanned LEFT JOIN claimed ON true"""

# The per-key claim when saturated keys clog the head of the backlog: limit keys with
# pending jobs in key order from %(after)s (a skip scan of jobs_claim_key, one probe per
# key, which stops once %(limit)s jobs are found), each giving the first jobs of its own
# budget as in JOBS_CLAIM_LIMITED_HEAD. Key order, not priority, across keys: the head
# claim took the best jobs already.
JOBS_CLAIM_LIMITED_KEYS: LiteralString = """
WITH RECURSIVE pending_keys(k) AS (
    SELECT (SELECT min(limit_key) FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > coalesce(%(after)s::text, ''))
    UNION ALL
    SELECT (SELECT min(limit_key) FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > pending_keys.k)
    FROM pending_keys WHERE pending_keys.k IS NOT NULL
),
running_keys AS MATERIALIZED (
    SELECT limit_key, count(*) AS n FROM jobs
    WHERE status = 'running' AND queue = %(queue)s AND limit_key IS NOT NULL
    GROUP BY limit_key
),
started_keys AS MATERIALIZED (
    SELECT limit_key, count(*) AS n FROM pgbeat_queue_starts
    WHERE queue = %(queue)s AND limit_key IS NOT NULL
      AND started_at > %(now)s::timestamptz - %(key_rate_seconds)s::float8 * interval '1 second'
    GROUP BY limit_key
),
picked AS (
    SELECT head.id
    FROM pending_keys AS p
    LEFT JOIN running_keys AS r ON r.limit_key = p.k
    LEFT JOIN started_keys AS s ON s.limit_key = p.k
    CROSS JOIN LATERAL (
        SELECT id FROM jobs
        WHERE status = 'pending' AND queue = %(queue)s AND limit_key = p.k AND run_at <= now()
          AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
        ORDER BY priority DESC, run_at, id
        LIMIT greatest(0, coalesce(least(%(key_concurrency)s::int - coalesce(r.n, 0),
                                         %(key_rate_count)s::int - coalesce(s.n, 0)), %(limit)s))
    ) AS head
    WHERE p.k IS NOT NULL
    LIMIT %(limit)s
),
claimed AS (
    UPDATE jobs
    SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
        started_at = now()
    WHERE id = ANY(ARRAY(SELECT id FROM picked))
      AND CASE status WHEN 'pending' THEN true ELSE false END
    RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
              CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
                   THEN run_at END AS run_at,
              CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
                   THEN created_at END AS created_at,
              unique_key, queue, priority, limit_key, job_key
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT queue, limit_key, %(now)s::timestamptz FROM claimed WHERE %(record)s::bool
)
SELECT * FROM claimed"""

# Seconds until the earliest pending job of the worker's limited queues falls due
# (jobs_claim_queue), so an idle worker wakes for a delayed job of a limited queue too.
JOBS_SECONDS_TO_NEXT_LIMITED: LiteralString = """
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM jobs
WHERE status = 'pending' AND queue = ANY(%(queues)s::text[])
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))"""
