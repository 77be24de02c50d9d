"""Every statement that claims jobs for a worker: the fast claim, the claim by queue heads,
the claims of limited queues; the rows it could not read; when the next job falls due.
(``pgbeat.testing``'s one-by-one claim is in testing.py.)

A limited queue is claimed in a transaction of its own: first its ``pgbeat_queues`` row is
locked (QUEUES_LOCK), then a claim statement reads its settings and counts its running jobs
and recent starts, in one round trip. The claim is a new statement, so under READ COMMITTED
its snapshot is taken after the lock was granted: it sees every claim committed before.
"""

from __future__ import annotations

from typing import LiteralString

# Leases up to %(limit)s due jobs in claim order (higher priority first, then run_at, then
# id), skipping rows other workers hold (jobs_claim_order: the head of the index, no sort).
# Only for a worker of every queue that saw no queue paused or limited at its last look
# (otherwise JOBS_CLAIM_BY_QUEUE), so the scan filters on kinds alone: each filter here is
# paid on every row the scan passes, on the drain's critical path. The update re-checks
# pgbeat_queues, so a queue paused or limited since that look is never claimed here (it
# goes to JOBS_CLAIM_LIMITED once the worker reads the held queues again). The lease and
# started_at are set and committed at once: no lock outlives this statement. The update
# finds the rows it locked by tuple address (`ctid = ANY(ARRAY(...))`, a TID scan whatever
# the statistics say; a join became a sequential scan per claim on a fresh table): locked
# rows cannot move (a ctid names one row in a plain table only: docs/scale.md). Dates
# outside years 1-9999 come back NULL and the payload as text: the worker decodes each row
# alone, so one row the driver could not read fails alone instead of every claim.
JOBS_CLAIM: LiteralString = """
UPDATE jobs
SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
    started_at = now()
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM jobs
    WHERE status = 'pending' AND run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
))
  AND queue <> ALL(ARRAY(
      SELECT name FROM pgbeat_queues
      WHERE paused OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
         OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL))
RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
          CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN run_at END AS run_at,
          CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN created_at END AS created_at,
          unique_key, queue, priority, limit_key, job_key, tags"""

# Fails claimed rows the worker could not decode (a date outside years 1-9999, a payload
# nested too deeply for Python), each with its reason (primary key).
# Never kept (prepare=False): a plan kept from a small table reads all of jobs_running,
# whose predicate its status test matches, not the primary key (worker.SESSION_SETTINGS).
JOBS_FAIL_UNREADABLE: LiteralString = """
UPDATE jobs
SET status = 'failed', locked_until = NULL, finished_at = now(),
    last_error = (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)]
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'"""

# Subscribes to the notifications of migrations/0002's insert trigger.
JOBS_LISTEN: LiteralString = "SELECT pgbeat_listen('pgbeat_jobs')"

# Seconds until the next pending job the fast claim may take falls due, by the database
# clock, so an idle worker wakes when a delayed job becomes due (jobs_ready). Asked after a
# fast claim found nothing: the jobs due before it are those of the paused and limited
# queues the worker saw (%(held)s), so the scan starts 5 s back (a job that fell due
# between the claim and this look comes back negative: claim again) and never walks a paused
# queue's backlog. JOBS_SECONDS_TO_NEXT_LIMITED covers the limited queues.
JOBS_SECONDS_TO_NEXT: LiteralString = """
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM jobs
WHERE status = 'pending' AND run_at > now() - interval '5 seconds'
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
  AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
  AND queue <> ALL(%(held)s::text[])"""

# -- the claim by queue heads, and of a limited queue -----------------------------------------

# JOBS_CLAIM when some queues are held (paused or limited) or the worker takes only some
# queues: the scan of JOBS_CLAIM would step over every pending job of a held queue (a paused
# queue's 200,000 jobs on every claim). Instead each wanted queue's head is read from
# jobs_claim_queue (the worker's --queues, or the queues with pending jobs found by a skip
# scan of that index, one probe per queue), FOR UPDATE SKIP LOCKED, and the best of those
# heads (at most %(limit)s per queue: never the backlog) are claimed; the rows locked but
# not taken are free again when the statement ends. Held queues are re-checked as there,
# and the taken rows are found by their tuple address, as there.
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
    SELECT head.tid, head.id, head.priority, head.run_at
    FROM wanted CROSS JOIN LATERAL (
        SELECT ctid AS tid, id, priority, run_at FROM jobs
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
WHERE ctid = ANY(ARRAY(SELECT tid FROM picked ORDER BY priority DESC, run_at, id LIMIT %(limit)s))
  AND queue <> ALL(ARRAY(
      SELECT name FROM pgbeat_queues
      WHERE paused OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
         OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL))
RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
          CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN run_at END AS run_at,
          CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN created_at END AS created_at,
          unique_key, queue, priority, limit_key, job_key, tags"""

# The claims of a limited queue, each run right after QUEUES_LOCK in the transaction that
# holds the queue's row lock, the two sent together in one round trip. Each reads the
# queue's settings (a new statement: its snapshot sees the row and every claim committed
# before the lock was granted) and its budget: the claim's %(limit)s, the free
# concurrency slots (running jobs, jobs_running), the rate's starts left in the window
# (pgbeat_queue_starts_window); least() ignores the NULLs of unset limits. Starts are
# recorded at the clock read after the lock (claims of a queue follow one another, so
# their starts only grow), and starts older than the longest window are deleted. No row
# when the queue is paused, gone or no longer limited; otherwise the claimed jobs (one row
# of NULL job columns when none) followed by the budget, the rate's starts left, the
# seconds until its oldest start leaves the window, whether the queue has per-key limits
# now, and how many jobs the head of the backlog held (the per-key claims).

# The claim of a queue with whole-queue limits only: its budget in claim order
# (jobs_claim_queue). Claims nothing when the queue has per-key limits since the worker
# last looked (the last columns say so). Dates outside years 1-9999 come back NULL, the
# payload as text: the worker decodes each row alone and fails only a row it cannot read.
JOBS_CLAIM_LIMITED: LiteralString = """
WITH settings AS MATERIALIZED (
    SELECT concurrency, rate_count, rate_period, key_concurrency, key_rate_count,
           key_rate_period, clock_timestamp() AS t,
           greatest(coalesce(rate_period, interval '0'), coalesce(key_rate_period, interval '0'))
               AS keep
    FROM pgbeat_queues
    WHERE name = %(queue)s AND NOT paused
      AND (concurrency IS NOT NULL OR key_concurrency IS NOT NULL
           OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
),
pruned AS (
    DELETE FROM pgbeat_queue_starts AS old USING settings AS q
    WHERE old.queue = %(queue)s AND q.keep > interval '0' AND old.started_at <= q.t - q.keep
),
budget AS MATERIALIZED (
    SELECT greatest(0, least(%(limit)s::int, q.concurrency - running.n,
                             q.rate_count - starts.n))::int AS n,
           q.rate_count - starts.n AS rate_left,
           extract(epoch FROM starts.oldest + q.rate_period - q.t)::float8 AS rate_wait,
           q.key_concurrency IS NOT NULL OR q.key_rate_count IS NOT NULL AS keyed,
           q.rate_count IS NOT NULL OR q.key_rate_count IS NOT NULL AS record,
           q.key_concurrency, q.key_rate_count, q.key_rate_period, q.t
    FROM settings AS q,
    LATERAL (SELECT count(*) AS n FROM jobs
             WHERE status = 'running' AND queue = %(queue)s AND q.concurrency IS NOT NULL)
        AS running,
    LATERAL (SELECT count(*) AS n, min(started_at) AS oldest FROM pgbeat_queue_starts
             WHERE queue = %(queue)s AND q.rate_count IS NOT NULL
               AND started_at > q.t - q.rate_period) AS starts
),
picked AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = %(queue)s AND run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
    ORDER BY priority DESC, run_at, id
    LIMIT coalesce((SELECT n FROM budget WHERE NOT keyed), 0)
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
              unique_key, queue, priority, limit_key, job_key, tags
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT claimed.queue, claimed.limit_key, b.t FROM claimed, budget AS b WHERE b.record
)
SELECT claimed.*, b.n, b.rate_left, b.rate_wait, b.keyed, NULL::bigint AS scanned
FROM budget AS b LEFT JOIN claimed ON true"""

# The claim of a queue with per-key limits, from the head of its backlog: the first
# %(scan)s due jobs in claim order (jobs_claim_queue), of which each limit key gets as many
# as its own budget allows (key_concurrency minus its running jobs, jobs_running;
# key_rate minus its starts in the window, pgbeat_queue_starts_key_window): a saturated key
# gets none, so a batch never holds more of a key than it may run. Jobs without a limit_key
# count against the queue's limits only. Up to the queue's budget are taken in claim
# order. Claims of the queue are serialised by QUEUES_LOCK, so rows are not skipped:
# an update that meets a row changed meanwhile re-checks that it is pending (in a CASE:
# `status = 'pending'` there let the planner look the ids up in a partial index, a scan
# of the whole backlog, instead of the primary key). The key counts are MATERIALIZED:
# inlined, they ran once per row of the head. A full head that gave less than the budget
# means saturated keys clog it, and the worker goes on with JOBS_CLAIM_LIMITED_KEYS.
JOBS_CLAIM_LIMITED_HEAD: LiteralString = """
WITH settings AS MATERIALIZED (
    SELECT concurrency, rate_count, rate_period, key_concurrency, key_rate_count,
           key_rate_period, clock_timestamp() AS t,
           greatest(coalesce(rate_period, interval '0'), coalesce(key_rate_period, interval '0'))
               AS keep
    FROM pgbeat_queues
    WHERE name = %(queue)s AND NOT paused
      AND (concurrency IS NOT NULL OR key_concurrency IS NOT NULL
           OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
),
pruned AS (
    DELETE FROM pgbeat_queue_starts AS old USING settings AS q
    WHERE old.queue = %(queue)s AND q.keep > interval '0' AND old.started_at <= q.t - q.keep
),
budget AS MATERIALIZED (
    SELECT greatest(0, least(%(limit)s::int, q.concurrency - running.n,
                             q.rate_count - starts.n))::int AS n,
           q.rate_count - starts.n AS rate_left,
           extract(epoch FROM starts.oldest + q.rate_period - q.t)::float8 AS rate_wait,
           q.key_concurrency IS NOT NULL OR q.key_rate_count IS NOT NULL AS keyed,
           q.rate_count IS NOT NULL OR q.key_rate_count IS NOT NULL AS record,
           q.key_concurrency, q.key_rate_count, q.key_rate_period, q.t
    FROM settings AS q,
    LATERAL (SELECT count(*) AS n FROM jobs
             WHERE status = 'running' AND queue = %(queue)s AND q.concurrency IS NOT NULL)
        AS running,
    LATERAL (SELECT count(*) AS n, min(started_at) AS oldest FROM pgbeat_queue_starts
             WHERE queue = %(queue)s AND q.rate_count IS NOT NULL
               AND started_at > q.t - q.rate_period) AS starts
),
head AS (
    SELECT id, limit_key, priority, run_at FROM jobs
    WHERE status = 'pending' AND queue = %(queue)s AND run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
    ORDER BY priority DESC, run_at, id
    LIMIT coalesce((SELECT CASE WHEN n > 0 THEN %(scan)s::int END FROM budget), 0)
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
    SELECT s.limit_key, count(*) AS n FROM pgbeat_queue_starts AS s, budget AS b
    WHERE s.queue = %(queue)s AND s.limit_key IS NOT NULL AND b.key_rate_count IS NOT NULL
      AND s.started_at > b.t - b.key_rate_period
    GROUP BY s.limit_key
),
picked AS (
    SELECT ranked.id FROM ranked
    CROSS JOIN budget AS b
    LEFT JOIN running_keys AS r ON r.limit_key = ranked.limit_key
    LEFT JOIN started_keys AS s ON s.limit_key = ranked.limit_key
    WHERE ranked.limit_key IS NULL
       OR ranked.nth <= coalesce(least(b.key_concurrency - coalesce(r.n, 0),
                                       b.key_rate_count - coalesce(s.n, 0)), ranked.nth)
    ORDER BY ranked.priority DESC, ranked.run_at, ranked.id
    LIMIT coalesce((SELECT n FROM budget), 0)
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
              unique_key, queue, priority, limit_key, job_key, tags
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT claimed.queue, claimed.limit_key, b.t FROM claimed, budget AS b WHERE b.record
)
SELECT claimed.*, b.n, b.rate_left, b.rate_wait, b.keyed, (SELECT count(*) FROM head) AS scanned
FROM budget AS b LEFT JOIN claimed ON true"""

# The per-key claim when saturated keys clog the head of the backlog: limit keys with
# pending jobs in key order from %(after)s (a skip scan of jobs_claim_key, one probe per
# key, which stops once the budget is found), each giving the first jobs of its own
# budget as in JOBS_CLAIM_LIMITED_HEAD. Key order, not priority, across keys: the head
# claim took the best jobs already.
JOBS_CLAIM_LIMITED_KEYS: LiteralString = """
WITH RECURSIVE settings AS MATERIALIZED (
    SELECT concurrency, rate_count, rate_period, key_concurrency, key_rate_count,
           key_rate_period, clock_timestamp() AS t,
           greatest(coalesce(rate_period, interval '0'), coalesce(key_rate_period, interval '0'))
               AS keep
    FROM pgbeat_queues
    WHERE name = %(queue)s AND NOT paused
      AND (concurrency IS NOT NULL OR key_concurrency IS NOT NULL
           OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
),
pruned AS (
    DELETE FROM pgbeat_queue_starts AS old USING settings AS q
    WHERE old.queue = %(queue)s AND q.keep > interval '0' AND old.started_at <= q.t - q.keep
),
budget AS MATERIALIZED (
    SELECT greatest(0, least(%(limit)s::int, q.concurrency - running.n,
                             q.rate_count - starts.n))::int AS n,
           q.rate_count - starts.n AS rate_left,
           extract(epoch FROM starts.oldest + q.rate_period - q.t)::float8 AS rate_wait,
           q.key_concurrency IS NOT NULL OR q.key_rate_count IS NOT NULL AS keyed,
           q.rate_count IS NOT NULL OR q.key_rate_count IS NOT NULL AS record,
           q.key_concurrency, q.key_rate_count, q.key_rate_period, q.t
    FROM settings AS q,
    LATERAL (SELECT count(*) AS n FROM jobs
             WHERE status = 'running' AND queue = %(queue)s AND q.concurrency IS NOT NULL)
        AS running,
    LATERAL (SELECT count(*) AS n, min(started_at) AS oldest FROM pgbeat_queue_starts
             WHERE queue = %(queue)s AND q.rate_count IS NOT NULL
               AND started_at > q.t - q.rate_period) AS starts
),
pending_keys(k) AS (
    SELECT (SELECT min(limit_key) FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > coalesce(%(after)s::text, ''))
    FROM budget WHERE n > 0
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
    SELECT s.limit_key, count(*) AS n FROM pgbeat_queue_starts AS s, budget AS b
    WHERE s.queue = %(queue)s AND s.limit_key IS NOT NULL AND b.key_rate_count IS NOT NULL
      AND s.started_at > b.t - b.key_rate_period
    GROUP BY s.limit_key
),
picked AS (
    SELECT head.id
    FROM pending_keys AS p
    CROSS JOIN budget AS b
    LEFT JOIN running_keys AS r ON r.limit_key = p.k
    LEFT JOIN started_keys AS s ON s.limit_key = p.k
    CROSS JOIN LATERAL (
        SELECT id FROM jobs
        WHERE status = 'pending' AND queue = %(queue)s AND limit_key = p.k AND run_at <= now()
          AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
        ORDER BY priority DESC, run_at, id
        LIMIT greatest(0, coalesce(least(b.key_concurrency - coalesce(r.n, 0),
                                         b.key_rate_count - coalesce(s.n, 0)), b.n))
    ) AS head
    WHERE p.k IS NOT NULL
    LIMIT coalesce((SELECT n FROM budget), 0)
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
              unique_key, queue, priority, limit_key, job_key, tags
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT claimed.queue, claimed.limit_key, b.t FROM claimed, budget AS b WHERE b.record
)
SELECT claimed.*, b.n, b.rate_left, b.rate_wait, b.keyed, NULL::bigint AS scanned
FROM budget AS b LEFT JOIN claimed ON true"""

# Seconds until the earliest pending job of the worker's limited queues falls due
# (jobs_claim_queue), so an idle worker wakes for a delayed job of a limited queue too.
# Never kept (prepare=False): a plan kept from a small table walks all of jobs_claim_order.
JOBS_SECONDS_TO_NEXT_LIMITED: LiteralString = """
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM jobs
WHERE status = 'pending' AND queue = ANY(%(queues)s::text[])
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))"""
