"""The claims of a limited or fair queue, and when a limited queue's next job falls due.

A limited queue is claimed in a transaction of its own: first its ``pgbeat_queues`` row is
locked (QUEUES_LOCK), then a claim statement reads its settings and counts its running jobs
and recent starts, in one round trip. The claim is a new statement, so under READ COMMITTED
its snapshot is taken after the lock was granted: it sees every claim committed before.
Composed at import from claim_parts.py's fragments and queue_heads.py's reads, as claim.py's
statements are; claim.py names them beside the others.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs.claim_parts import (
    _CLAIM_LIMITED_TAIL,
    _CLAIM_PICKED_BY_TID,
    _KEY_LEFT,
    _KEY_LEFT_N,
    _KEY_RUNNING,
    _KINDS,
    _LIMITED_OPENING,
    _PENDING_KEYS_AFTER,
    _RUNNING_KEYS_FAIR,
)
from pgbeat.db.sql.jobs.queue_heads import (
    _QUEUE_HEADS,
    _QUEUE_HEADS_TID,
    _UNKEYED_HEADS,
)

# -- the claims of a limited or fair queue --------------------------------------------------

# Each runs right after QUEUES_LOCK in the transaction that holds the queue's row lock, the
# two sent together in one round trip, and returns no row when the queue is not limited or
# fair now (_SETTINGS_AND_BUDGET, in _LIMITED_OPENING); otherwise the claimed jobs followed
# by the budget, the rate's starts left, the seconds until its oldest start leaves the
# window, the claim the queue needs now (``mode``), and a statement's own last columns.

# The claim of a queue with whole-queue limits only: its budget in claim order (the best of
# its kinds' heads, queue_heads.py). Claims nothing when the queue needs another claim now
# (``mode``). The heads are read unlocked (the queue's row lock serialises its claims; the
# update re-checks that each row is pending): locked, every kind's head would be.
JOBS_CLAIM_LIMITED: LiteralString = (
    _LIMITED_OPENING
    + """,
lim(n) AS (
    SELECT coalesce((SELECT n FROM budget WHERE mode = 'whole'), 0)
),
picked AS (
    SELECT id FROM (
    """
    + _QUEUE_HEADS
    + """
    ) AS heads
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT n FROM lim)
),"""
    + _CLAIM_LIMITED_TAIL
    + """, NULL::bigint AS scanned, NULL::text AS last_key
FROM budget AS b LEFT JOIN claimed ON true"""
)

# The claim of a queue with per-key limits, from the head of its backlog: the first
# %(scan)s due jobs in claim order (the best of its kinds' heads, queue_heads.py; the worker
# asks for about what the queue's last head claim needed, claiming.py), numbered in that
# order (``pos``) and per key (``nth``); a row is taken while its key's budget allows:
# ``nth`` at most key_concurrency less the key's running jobs (one probe of jobs_running_key
# per head row, claim_parts.py's _KEY_RUNNING) and at most
# key_rate less the key's starts in the window (one probe of pgbeat_queue_starts_key_window
# per head row, in key order, at most key_rate_count entries: only for a queue with a
# key_rate). A saturated key gets none, so a batch never holds more of a key than it may
# run. Jobs without a limit_key count against the queue's limits only. Up to the queue's
# budget are taken in claim order. ``scanned`` is the head rows up to the last job taken
# when the budget was met, else the whole head: a full head that gave less than the budget
# means saturated keys clog it, and the worker goes on with JOBS_CLAIM_LIMITED_KEYS. Nothing
# is joined to the head: each budget is a scalar subquery of the row (a kept plan cannot
# choose a join: with the sort penalty of the worker's sessions, enable_sort off, a kept
# plan joined the keys to the head by a nested loop, every head row compared with every
# key: docs/flow-control.md).
JOBS_CLAIM_LIMITED_HEAD: LiteralString = (
    _LIMITED_OPENING
    + """,
lim(n) AS (
    SELECT coalesce(
        (SELECT CASE WHEN n > 0 AND mode = 'keyed' THEN %(scan)s::int END FROM budget), 0)
),
head AS (
    SELECT tid, id, limit_key, row_number() OVER (ORDER BY priority DESC, run_at, id) AS pos
    FROM (SELECT tid, id, limit_key, priority, run_at FROM (
    """
    + _QUEUE_HEADS_TID
    + """
    ) AS heads
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT n FROM lim)) AS first
),
ranked AS (
    SELECT tid, id, limit_key, pos,
           row_number() OVER (PARTITION BY limit_key ORDER BY pos) AS nth
    FROM head
),
picked AS (
    SELECT k.tid, k.id, k.pos FROM ranked AS k
    WHERE k.limit_key IS NULL
       OR (CASE WHEN (SELECT key_concurrency FROM budget) IS NULL THEN true
                ELSE k.nth <= (SELECT key_concurrency FROM budget) - """
    + _KEY_RUNNING
    + """ END
           AND CASE WHEN (SELECT key_rate_count FROM budget) IS NULL THEN true
                    ELSE k.nth <= (SELECT key_rate_count FROM budget) - (SELECT count(*) FROM (
                        SELECT FROM pgbeat_queue_starts AS s
                        WHERE s.queue = %(queue)s
                          AND s.limit_key >= k.limit_key AND s.limit_key <= k.limit_key
                          AND s.started_at > (SELECT t - key_rate_period FROM budget)
                        ORDER BY s.limit_key, s.started_at
                        LIMIT (SELECT key_rate_count FROM budget)) AS in_window) END)
    ORDER BY k.pos
    LIMIT coalesce((SELECT n FROM budget), 0)
),"""
    + _CLAIM_PICKED_BY_TID
    + """,
       CASE WHEN b.n > 0 AND (SELECT count(*) FROM picked) >= b.n
            THEN (SELECT max(pos) FROM picked) ELSE (SELECT count(*) FROM head) END AS scanned,
       NULL::text AS last_key
FROM budget AS b LEFT JOIN claimed ON true"""
)

# The per-key claim when saturated keys clog the head of the backlog: the limit keys with
# pending jobs from %(after)s (_PENDING_KEYS_AFTER, at most %(keys)s), each giving the first
# jobs of its own budget as in JOBS_CLAIM_LIMITED_HEAD. Key order, not priority, across
# keys: the head claim took the best jobs already. ``scanned`` is how many keys the walk
# visited and ``last_key`` the last of them, where the next walk goes on.
JOBS_CLAIM_LIMITED_KEYS: LiteralString = (
    _LIMITED_OPENING
    + ","
    + _PENDING_KEYS_AFTER
    + """,
picked AS (
    SELECT head.id
    FROM pending_keys AS k
    CROSS JOIN budget AS b"""
    + _KEY_LEFT
    + """
    CROSS JOIN LATERAL (
        SELECT id FROM jobs
        WHERE status = 'pending' AND queue = %(queue)s
          AND limit_key >= k.limit_key AND limit_key <= k.limit_key
          AND run_at <= now() AND """
    + _KINDS
    + """
        ORDER BY limit_key, priority DESC, run_at, id
        LIMIT greatest(0, coalesce("""
    + _KEY_LEFT_N
    + """, b.n))
    ) AS head
    WHERE k.limit_key IS NOT NULL AND b.mode = 'keyed'
    LIMIT coalesce((SELECT n FROM budget), 0)
),"""
    + _CLAIM_LIMITED_TAIL
    + """, (SELECT count(*) FROM pending_keys WHERE limit_key IS NOT NULL) AS scanned,
       (SELECT max(limit_key) FROM pending_keys) AS last_key
FROM budget AS b LEFT JOIN claimed ON true"""
)

# The claim of a fair queue: its limit keys in turn. The walk visits up to %(keys)s limit
# keys with pending jobs, in key order from the one after %(after)s (where the worker's last
# claim of the queue stopped), then from the first key up to %(after)s itself, last (it had
# its turn, and still takes the slots no other key wants: skipped, a backlog of one key
# read as dry every other claim): the round goes on
# from claim to claim, and each claim's cost is bounded by %(keys)s probes, whatever the
# number of keys. Jobs without a limit key form one key of their own (the best of its
# kinds' heads in the index of unkeyed jobs, queue_heads.py), first in a round. Each
# visited key gives its first due jobs (at most its own budget when the queue has per-key
# limits, _KEY_LEFT), numbered in the key's own order (its index's:
# no sort); the claim takes them by priority, then round (the first job of every key, then
# the second...), then the key's running jobs (running_keys: fewer first, so a key with
# none takes a lone freed slot whatever the worker's round), then the key's place in the
# walk: among jobs of one priority, one key's backlog does not delay another key's job by
# more than a round. ``last_key`` is the key
# of the last job taken, where the next claim goes on ('' for the unkeyed jobs: next from
# the first key). Keys and their jobs are read as in _PENDING_KEYS_AFTER (it says why).
# With a concurrency, one claim takes at most 1/%(steps)s of it, rounded up (the worker's
# pace for the queue, worker/fair_steps.py: 1 for jobs shorter than a few round trips):
# jobs claimed together end together, and a new key's job would wait for a whole wave.
# ``scanned`` is that step's size (NULL without a concurrency): a claim that took fewer
# stopped at the keys' budgets or the due jobs, not at the step, and is no step to go on.
_FAIR_STEP: LiteralString = "(SELECT ceil(concurrency / %(steps)s::numeric)::int FROM settings)"
JOBS_CLAIM_FAIR: LiteralString = (
    _LIMITED_OPENING
    + """,
walk_after(limit_key, pos) AS (
    SELECT (SELECT limit_key FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > %(after)s::text
            ORDER BY limit_key LIMIT 1), 1
    FROM budget WHERE n > 0 AND mode = 'fair' AND %(after)s::text IS NOT NULL
    UNION ALL
    SELECT (SELECT limit_key FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > w.limit_key
            ORDER BY limit_key LIMIT 1), w.pos + 1
    FROM walk_after AS w WHERE w.limit_key IS NOT NULL AND w.pos < %(keys)s::int
),
after_keys AS MATERIALIZED (
    SELECT limit_key, pos FROM walk_after WHERE limit_key IS NOT NULL
),
walk_start(limit_key, pos) AS (
    SELECT (SELECT limit_key FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
            ORDER BY limit_key LIMIT 1), 1
    FROM budget WHERE n > 0 AND mode = 'fair'
      AND (SELECT count(*) FROM after_keys) < %(keys)s::int
    UNION ALL
    SELECT (SELECT limit_key FROM jobs
            WHERE status = 'pending' AND queue = %(queue)s AND limit_key IS NOT NULL
              AND limit_key > w.limit_key
            ORDER BY limit_key LIMIT 1), w.pos + 1
    FROM walk_start AS w
    WHERE w.limit_key IS NOT NULL AND (%(after)s::text IS NULL OR w.limit_key < %(after)s)
      AND w.pos + (SELECT count(*) FROM after_keys) < %(keys)s::int
),
lim(n) AS (
    SELECT n FROM budget WHERE n > 0 AND mode = 'fair'
),
keys AS MATERIALIZED (
    SELECT limit_key, pos FROM after_keys
    UNION ALL
    SELECT limit_key, %(keys)s::int + 1 + pos FROM walk_start
    WHERE limit_key IS NOT NULL AND (%(after)s::text IS NULL OR limit_key <= %(after)s)
),"""
    + _RUNNING_KEYS_FAIR
    + """,
candidates AS (
    SELECT c.id, c.priority, c.nth, coalesce((r.n ->> k.limit_key)::int, 0) AS running,
           k.pos, k.limit_key
    FROM keys AS k CROSS JOIN budget AS b CROSS JOIN running_keys AS r"""
    + _KEY_LEFT
    + """
    CROSS JOIN LATERAL (
        SELECT id, priority, row_number() OVER (ORDER BY priority DESC, run_at, id) AS nth
        FROM (SELECT id, priority, run_at FROM jobs
              WHERE status = 'pending' AND queue = %(queue)s
                AND limit_key >= k.limit_key AND limit_key <= k.limit_key
                AND run_at <= now() AND """
    + _KINDS
    + """
              ORDER BY limit_key, priority DESC, run_at, id
              LIMIT greatest(0, coalesce("""
    + _KEY_LEFT_N
    + """, b.n))) AS j
    ) AS c
    UNION ALL
    SELECT c.id, c.priority, c.nth, (SELECT n FROM running_unkeyed), %(keys)s::int + 1, NULL
    FROM (SELECT id, priority, row_number() OVER (ORDER BY priority DESC, run_at, id) AS nth
          FROM (SELECT id, priority, run_at FROM (
                """
    + _UNKEYED_HEADS
    + """
                ) AS unkeyed
                ORDER BY priority DESC, run_at, id
                LIMIT (SELECT n FROM lim)) AS j
    ) AS c
),
picked AS MATERIALIZED (
    SELECT id, limit_key, priority, nth, running, pos FROM candidates
    ORDER BY priority DESC, nth, running, pos
    LIMIT least(coalesce((SELECT n FROM budget WHERE mode = 'fair'), 0),
                """
    + _FAIR_STEP
    + """)
),"""
    + _CLAIM_LIMITED_TAIL
    + ", "
    + _FAIR_STEP
    + """::bigint AS scanned,
       (SELECT coalesce(limit_key, '') FROM picked
        ORDER BY priority, nth DESC, running DESC, pos DESC LIMIT 1) AS last_key
FROM budget AS b LEFT JOIN claimed ON true"""
)

# Seconds until the earliest pending job of the worker's limited queues falls due
# (jobs_ready, filtered), so an idle worker wakes for a delayed job of a limited queue too.
# Never kept (prepare=False): a plan kept from a small table walks all of jobs_claim_order.
JOBS_SECONDS_TO_NEXT_LIMITED: LiteralString = """
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM jobs
WHERE status = 'pending' AND queue = ANY(%(queues)s::text[])
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))"""
