"""The fragments every claim statement of claim.py is composed from, once, at import: what
a claim sets and returns, the queues a claim of unlimited queues may not take, a limited
queue's settings and budget, a limit key's budget. One place to change each.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs.queue_heads import _QUEUE_HEADS_LOCKED

# What every claim sets on the rows it takes: the lease and started_at by one clock.
_SET_RUNNING: LiteralString = """
SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
    started_at = now()"""

# What every claim returns, named as worker/claiming.py decodes them (Job's fields). Dates
# outside years 1-9999 come back NULL and the payload as text: the worker decodes each row
# alone, so one row the driver could not read fails alone instead of every claim.
_CLAIMED_COLUMNS: LiteralString = """
RETURNING id, kind, payload::text AS payload, attempts AS attempt, max_attempts,
          CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN run_at END AS run_at,
          CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN created_at END AS created_at,
          unique_key, queue, priority, limit_key, job_key, tags"""

# The queues no claim of unlimited queues may take (paused, limited or fair), re-checked by
# the update itself: a queue held a moment ago is never claimed there.
_NOT_HELD: LiteralString = """
  AND queue <> ALL(ARRAY(
      SELECT name FROM pgbeat_queues
      WHERE paused OR fair OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
         OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL))"""

# The same re-check by one probe of pgbeat_queues' primary key per claimed row, for the
# claims that run beside held queues: reading every held queue's row at every claim cost
# in proportion to them (200 limited queues).
_NOT_HELD_PROBED: LiteralString = """
  AND NOT EXISTS (
      SELECT FROM pgbeat_queues AS held
      WHERE held.name = jobs.queue
        AND (held.paused OR held.fair OR held.concurrency IS NOT NULL
             OR held.key_concurrency IS NOT NULL OR held.rate_count IS NOT NULL
             OR held.key_rate_count IS NOT NULL))"""

# The kinds the worker has handlers for (NULL: every kind).
_KINDS: LiteralString = "(%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))"

# A limited (or fair) queue's settings, read by a new statement after its row lock (so it
# sees every claim committed before), and the clock of its starts; no row when the queue is
# paused, gone, neither limited nor fair, or its row is one the constraints of migration
# 0019 would refuse (written before them: workers skip it, QUEUES_HELD names it). Starts
# older than the longest window are deleted. The budget: the claim's %(limit)s, the free
# concurrency slots (running jobs, jobs_running), the rate's starts left in the window
# (pgbeat_queue_starts_window); least() ignores the NULLs of unset limits. ``mode`` says
# which claim the queue needs now (the worker compares it with the one it ran). The
# starts' cutoff is a scalar (NULL: nothing to prune), so the index scan of
# pgbeat_queue_starts_window starts at it: joined to ``settings``, a plan kept from an
# empty table read every start of the queue and filtered them by the join, 4.9 ms a claim
# at 5,100 starts in the window and growing with them (a key_rate drain over 20,000 keys).
_SETTINGS_AND_BUDGET: LiteralString = """
settings AS MATERIALIZED (
    SELECT concurrency, rate_count, rate_period, key_concurrency, key_rate_count,
           key_rate_period, fair, clock_timestamp() AS t,
           greatest(coalesce(rate_period, interval '0'), coalesce(key_rate_period, interval '0'))
               AS keep
    FROM pgbeat_queues
    WHERE name = %(queue)s AND NOT paused
      AND (fair OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
           OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL)
      AND (rate_period IS NULL OR rate_period BETWEEN interval '1 ms' AND interval '1 day')
      AND (key_rate_period IS NULL
           OR key_rate_period BETWEEN interval '1 ms' AND interval '1 day')
),
pruned AS (
    DELETE FROM pgbeat_queue_starts AS old
    WHERE old.queue = %(queue)s
      AND old.started_at <= (SELECT t - keep FROM settings WHERE keep > interval '0')
),
budget AS MATERIALIZED (
    SELECT greatest(0, least(%(limit)s::int, q.concurrency - running.n,
                             q.rate_count - starts.n))::int AS n,
           q.rate_count - starts.n AS rate_left,
           extract(epoch FROM starts.oldest + q.rate_period - q.t)::float8 AS rate_wait,
           CASE WHEN q.fair THEN 'fair'
                WHEN q.key_concurrency IS NOT NULL OR q.key_rate_count IS NOT NULL THEN 'keyed'
                ELSE 'whole' END AS mode,
           q.rate_count IS NOT NULL OR q.key_rate_count IS NOT NULL AS record,
           q.key_concurrency, q.key_rate_count, q.key_rate_period, q.t
    FROM settings AS q,
    LATERAL (SELECT count(*) AS n FROM jobs
             WHERE status = 'running' AND queue = %(queue)s AND q.concurrency IS NOT NULL)
        AS running,
    LATERAL (SELECT count(*) AS n, min(started_at) AS oldest FROM pgbeat_queue_starts
             WHERE queue = %(queue)s AND q.rate_count IS NOT NULL
               AND started_at > q.t - q.rate_period) AS starts
)"""

# How every limited (or fair) claim opens: its settings and budget, and ``w(q)``, the queue
# queue_heads.py's reads name (a statement that reads no head leaves it unread: planned
# away). RECURSIVE for the claims that walk keys; the others read the same without.
_LIMITED_OPENING: LiteralString = (
    "WITH RECURSIVE "
    + _SETTINGS_AND_BUDGET
    + """,
w(q) AS (
    SELECT %(queue)s::text
)"""
)

# The running jobs of key ``k.limit_key`` in the queue, counted up to its key_concurrency
# (all a budget needs): one probe of
# jobs_running_key (migration 0035) per key the claim may take, so its cost does not grow
# with the jobs running elsewhere (counting every running job of the queue, read through
# jobs_running, cost a claim in proportion to the cluster's running jobs). A scalar
# subquery of the row: a kept plan cannot choose a join (with the sort penalty of the
# worker's sessions, enable_sort off, a plan kept after ANALYZE saw no due job joined the
# keys to the head by a nested loop, every head row compared with every running key:
# docs/flow-control.md). The key is matched by a range, as _PENDING_KEYS_AFTER says why.
_KEY_RUNNING: LiteralString = """(SELECT count(*) FROM (
            SELECT FROM jobs AS running
            WHERE running.status = 'running' AND running.limit_key IS NOT NULL
              AND running.queue = %(queue)s
              AND running.limit_key >= k.limit_key AND running.limit_key <= k.limit_key
            LIMIT (SELECT key_concurrency FROM budget)) AS held)"""

# The running jobs of each limit key of the queue, for a fair claim that found a free slot
# (whatever its per-key limits): the keys' running jobs order a round (claim_limited.py's
# JOBS_CLAIM_FAIR), one jsonb object of key -> count, read through jobs_running_key
# (the queue's running keyed jobs only: at most its concurrency); and, apart, the running
# jobs without a key (the key of their own), read only when unkeyed jobs are candidates:
# no index holds them by queue, so that count reads every running job of the cluster.
_RUNNING_KEYS_FAIR: LiteralString = """
running_keys AS MATERIALIZED (
    SELECT coalesce(jsonb_object_agg(limit_key, n), '{}') AS n FROM (
        SELECT limit_key, count(*) AS n FROM jobs
        WHERE status = 'running' AND limit_key IS NOT NULL AND queue = %(queue)s
          AND (SELECT n FROM budget WHERE mode = 'fair') > 0
        GROUP BY limit_key) AS per_key
),
running_unkeyed AS MATERIALIZED (
    SELECT count(*)::int AS n FROM jobs
    WHERE status = 'running' AND limit_key IS NULL AND queue = %(queue)s
)"""

# A limit key's budget: key_concurrency less its running jobs (_KEY_RUNNING), key_rate
# less its starts in the window, counted for this key alone
# (pgbeat_queue_starts_key_window: one probe, so the cost does not grow with the other
# keys' starts; in key order, read by a range on the key, as _PENDING_KEYS_AFTER says why:
# a kept plan counted every key's starts of the window through pgbeat_queue_starts_window,
# a drain over 20,000 free keys then crawled (docs/benchmarks.md, "Key-limited claims");
# at most key_rate_count of them, all the budget needs);
# _KEY_LEFT_N is NULL when the queue has no per-key limit. Joined to a row
# ``k`` carrying the key, beside ``budget AS b``.
_KEY_LEFT: LiteralString = (
    """
    CROSS JOIN LATERAL (
        SELECT CASE WHEN b.key_concurrency IS NOT NULL THEN """
    + _KEY_RUNNING
    + """ END AS n
    ) AS held
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (
            SELECT FROM pgbeat_queue_starts AS s
            WHERE b.key_rate_count IS NOT NULL AND s.queue = %(queue)s
              AND s.limit_key >= k.limit_key AND s.limit_key <= k.limit_key
              AND s.started_at > b.t - b.key_rate_period
            ORDER BY s.limit_key, s.started_at
            LIMIT b.key_rate_count) AS in_window
    ) AS started"""
)
_KEY_LEFT_N: LiteralString = "least(b.key_concurrency - held.n, b.key_rate_count - started.n)"

# A limited claim's update of the rows it picked (by id, re-checking they are pending: the
# claims of one queue are serialised by its row lock, so rows are not skipped; in a CASE:
# `status = 'pending'` there let the planner look the ids up in a partial index, a scan of
# the whole backlog, instead of the primary key), the starts it records for a rate, and
# its row: the claimed jobs (one row of NULL job columns when none) followed by the budget
# (``timed``: only time frees its keys, no completion does).
_CLAIM_PICKED: LiteralString = """
claimed AS (
    UPDATE jobs"""
_CLAIM_PICKED_WHERE: LiteralString = """
    WHERE id = ANY(ARRAY(SELECT id FROM picked))
      AND CASE status WHEN 'pending' THEN true ELSE false END"""
_CLAIM_PICKED_TAIL: LiteralString = """
),
started AS (
    INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)
    SELECT claimed.queue, claimed.limit_key, b.t FROM claimed, budget AS b WHERE b.record
)
SELECT claimed.*, b.n AS budget, b.rate_left, b.rate_wait, b.mode,
       b.key_concurrency IS NULL AS timed"""
_CLAIM_LIMITED_TAIL: LiteralString = (
    _CLAIM_PICKED + _SET_RUNNING + _CLAIM_PICKED_WHERE + _CLAIMED_COLUMNS + _CLAIM_PICKED_TAIL
)

# _CLAIM_LIMITED_TAIL for a ``picked`` that carries each row's tuple address (``tid``, read
# in this statement's snapshot): a TID scan instead of a primary-key descent per row. The
# rows are not locked, but the queue's row lock serialises its claims, and a row updated
# since the snapshot is re-checked by the update (still pending) as by id.
_CLAIM_PICKED_BY_TID: LiteralString = _CLAIM_LIMITED_TAIL.replace(
    "WHERE id = ANY(ARRAY(SELECT id FROM picked))",
    "WHERE ctid = ANY(ARRAY(SELECT tid FROM picked))",
)
assert "ctid = ANY" in _CLAIM_PICKED_BY_TID

# Limit keys with pending jobs of the queue in key order from %(after)s: a skip scan of
# jobs_claim_key, one probe per key, which stops once the statement has what it needs or
# after %(keys)s keys (the next claim goes on from there: its cost does not grow with the
# keys whose budget is spent). Each next key is the first in key order (`ORDER BY
# limit_key LIMIT 1`, not min(): a plan kept before any ANALYZE computed min() from the
# queue's whole backlog in the queue's claim order, seconds a claim at 20,000 keys
# (docs/benchmarks.md); in key order only jobs_claim_key reads it without a sort). A key's
# own jobs are matched by a range on limit_key for the same reason (claim_heads.py's
# JOBS_CLAIM_BY_QUEUE_KIND).
_PENDING_KEYS_AFTER: LiteralString = """
pending_keys(limit_key, pos) AS (
    SELECT (SELECT limit_key FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > coalesce(%(after)s::text, '')
            ORDER BY limit_key LIMIT 1), 1
    FROM budget WHERE n > 0
    UNION ALL
    SELECT (SELECT limit_key FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > pending_keys.limit_key
            ORDER BY limit_key LIMIT 1), pending_keys.pos + 1
    FROM pending_keys
    WHERE pending_keys.limit_key IS NOT NULL AND pending_keys.pos < %(keys)s::int
)"""

# The claim by queue heads (JOBS_CLAIM_BY_QUEUE; claim_heads.py's JOBS_CLAIM_BY_QUEUE_KIND
# does the same inline): of the heads a ``picked`` CTE locked (tid, priority, run_at, id),
# the best %(limit)s in claim order are taken by tuple address, held queues re-checked;
# the others are free again when the statement ends.
_TAKE_BEST_PICKED: LiteralString = (
    """UPDATE jobs"""
    + _SET_RUNNING
    + """
WHERE ctid = ANY(ARRAY(
    SELECT tid FROM picked ORDER BY priority DESC, run_at, id LIMIT %(limit)s))"""
    + _NOT_HELD_PROBED
    + _CLAIMED_COLUMNS
)

# The claims by heads, after a ``w(q)`` of the queues to read (held ones left out): every
# kind's head of each queue in both indexes of a queue's pending jobs (queue_heads.py), at
# most %(limit)s each, locked FOR UPDATE SKIP LOCKED; the best of them taken.
_TAKE_BEST_HEADS: LiteralString = (
    """
lim(n) AS (
    SELECT %(limit)s::int
),
picked AS (
    """
    + _QUEUE_HEADS_LOCKED
    + """
)
"""
    + _TAKE_BEST_PICKED
)
