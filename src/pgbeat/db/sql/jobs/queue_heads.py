"""How a statement reads one queue's pending jobs: the fragments every claim by queue, the
held queues' probe and the queue listing are composed from, at import.

A queue's pending jobs are in two partial indexes (migration 0023), split by whether the
job has a limit key, each ordered ``(queue, kind, priority DESC, run_at, id)``: a plain
job enters one index of its queue and no other (docs/flow-control.md, "The index set").
So a statement reads a queue in claim order as the merge of its kinds' heads in both
indexes (each head in its index's order, at most the claim's size; the one sort is of
those heads, never of the backlog), a queue's jobs of some kinds without stepping over
other kinds' (a rolling deploy's new kind), and its unkeyed jobs alone (a fair queue's
unkeyed head) without stepping over the keyed backlog. The queues with pending jobs are
the smaller of each index's next queue (a skip scan: one probe per index and queue).

Each read names its index's predicate (``limit_key IS NULL`` or ``IS NOT NULL``) and
matches the kind by a range, not ``=``: a kept generic plan drops a ``kind = $n`` from
the index order and may read another index filtering; in the range, only these give it.

The fragments read the names their statement gives them: ``prev.q`` (the queue before),
``w.q`` (the queue read), ``lim.n`` (the most rows of a head), ``k.kind`` (_KINDS_OF's).
"""

from __future__ import annotations

from typing import LiteralString

# The next queue with pending jobs in one index after ``prev.q`` (NULL: none), one probe:
# of the unkeyed jobs' index, and of the keyed jobs'. A walk that keeps each index's next
# queue (claim_heads.py's JOBS_DUE_QUEUES) probes again only the index whose queue it just
# visited, and knows which of the two indexes hold the queue.
_NEXT_IN_INDEX: LiteralString = """(SELECT queue FROM jobs WHERE status = 'pending' AND """
_NEXT_IN_INDEX_END: LiteralString = """
             AND queue > coalesce(prev.q, '') ORDER BY queue LIMIT 1)"""
_NEXT_UNKEYED: LiteralString = _NEXT_IN_INDEX + "limit_key IS NULL" + _NEXT_IN_INDEX_END
_NEXT_KEYED: LiteralString = _NEXT_IN_INDEX + "limit_key IS NOT NULL" + _NEXT_IN_INDEX_END

# The next queue with pending jobs after ``prev.q`` (NULL: the first of all), or NULL: the
# smaller of both indexes' next queue, one probe each.
_NEXT_QUEUE: LiteralString = "least(\n        " + _NEXT_UNKEYED + ",\n        " + _NEXT_KEYED + ")"

# The next kind with pending jobs in queue ``w.q`` after ``present.kind`` (NULL: the first).
_NEXT_KIND: LiteralString = """least(
            (SELECT kind FROM jobs WHERE status = 'pending' AND limit_key IS NULL
               AND queue = w.q AND kind > coalesce(present.kind, '') ORDER BY kind LIMIT 1),
            (SELECT kind FROM jobs WHERE status = 'pending' AND limit_key IS NOT NULL
               AND queue = w.q AND kind > coalesce(present.kind, '') ORDER BY kind LIMIT 1))"""

# The kinds a claim reads in queue ``w.q``, as ``k(kind)``: the worker's (%(kinds)s), or,
# for a claim of every kind (NULL), the kinds with pending jobs there (a skip scan, one
# probe per index and kind; evaluated only then).
_KINDS_OF: LiteralString = (
    """unnest(coalesce(%(kinds)s::text[], ARRAY(
        WITH RECURSIVE present(kind) AS (
            SELECT """
    + _NEXT_KIND
    + """ FROM (SELECT NULL::text AS kind) AS present
            UNION ALL
            SELECT """
    + _NEXT_KIND
    + """ FROM present WHERE present.kind IS NOT NULL
        )
        SELECT kind FROM present WHERE kind IS NOT NULL))) AS k(kind)"""
)

# Where a head reads: the first ``lim.n`` due jobs of kind ``k.kind`` in queue ``w.q``, in
# claim order (its index's: no sort). After the columns; then the index's predicate.
_HEAD: LiteralString = """ FROM jobs
        WHERE status = 'pending' AND queue = w.q AND kind >= k.kind AND kind <= k.kind
          AND run_at <= now() AND """
_HEAD_ORDER: LiteralString = """
        ORDER BY kind, priority DESC, run_at, id
        LIMIT lim.n"""
_LOCKED: LiteralString = """
        FOR UPDATE SKIP LOCKED"""
_EACH_KIND: LiteralString = "SELECT h.* FROM w CROSS JOIN lim CROSS JOIN " + _KINDS_OF
_LATERAL: LiteralString = "\n    CROSS JOIN LATERAL (\n        SELECT "
# A head's columns. Unlocked, the unkeyed index's head names no column outside the index,
# so it may be read from the index alone (where the visibility map allows).
_UNKEYED_COLUMNS: LiteralString = "id, NULL::text AS limit_key, priority, run_at"
_KEYED_COLUMNS: LiteralString = "id, limit_key, priority, run_at"
_TID: LiteralString = "ctid AS tid, "

# The heads of queue ``w.q``'s unkeyed jobs: each kind's (a fair queue's unkeyed "key").
_UNKEYED_HEADS: LiteralString = (
    _EACH_KIND
    + _LATERAL
    + _UNKEYED_COLUMNS
    + _HEAD
    + "limit_key IS NULL"
    + _HEAD_ORDER
    + "\n    ) AS h"
)

# The heads of every kind of queue ``w.q`` (of each queue of ``w``) in both indexes, as
# ``id, limit_key, priority, run_at``: at most ``lim.n`` per queue, kind and index, not in
# order (the caller takes the best of them).
_QUEUE_HEADS: LiteralString = (
    _UNKEYED_HEADS
    + "\n    UNION ALL\n    "
    + _EACH_KIND
    + _LATERAL
    + _KEYED_COLUMNS
    + _HEAD
    + "limit_key IS NOT NULL"
    + _HEAD_ORDER
    + "\n    ) AS h"
)

# _QUEUE_HEADS with each row's tuple address first (``tid``), unlocked: for a claim whose
# queue's row lock serialises it (the limited claims), which updates the rows it picked by
# that address.
_QUEUE_HEADS_TID: LiteralString = (
    _EACH_KIND
    + _LATERAL
    + _TID
    + _KEYED_COLUMNS.replace("limit_key", "NULL::text AS limit_key")
    + _HEAD
    + "limit_key IS NULL"
    + _HEAD_ORDER
    + "\n    ) AS h\n    UNION ALL\n    "
    + _EACH_KIND
    + _LATERAL
    + _TID
    + _KEYED_COLUMNS
    + _HEAD
    + "limit_key IS NOT NULL"
    + _HEAD_ORDER
    + "\n    ) AS h"
)

# _QUEUE_HEADS with each row's tuple address first (``tid``) and each head's rows locked,
# FOR UPDATE SKIP LOCKED (workers claiming at once pass over each other's rows).
_QUEUE_HEADS_LOCKED: LiteralString = (
    _EACH_KIND
    + _LATERAL
    + _TID
    + _KEYED_COLUMNS
    + _HEAD
    + "limit_key IS NULL"
    + _HEAD_ORDER
    + _LOCKED
    + "\n    ) AS h\n    UNION ALL\n    "
    + _EACH_KIND
    + _LATERAL
    + _TID
    + _KEYED_COLUMNS
    + _HEAD
    + "limit_key IS NOT NULL"
    + _HEAD_ORDER
    + _LOCKED
    + "\n    ) AS h"
)

# How many pending jobs the held queue ``name`` (QUEUES_HELD's row) holds, counted up to
# %(ahead)s: a bounded probe of each index, in its order (without the order a plan read
# jobs_ready whole for an empty queue).
_HELD_AHEAD: LiteralString = """least(%(ahead)s,
       (SELECT count(*) FROM (SELECT 1 FROM jobs
                              WHERE status = 'pending' AND limit_key IS NULL AND queue = name
                              ORDER BY kind, priority DESC, run_at, id LIMIT %(ahead)s) AS few)
       + (SELECT count(*) FROM (SELECT 1 FROM jobs
                                WHERE status = 'pending' AND limit_key IS NOT NULL
                                  AND queue = name
                                ORDER BY kind, priority DESC, run_at, id LIMIT %(ahead)s)
              AS few))"""

# How many pending jobs the listed queue ``queue_name`` holds (each index's rows of it).
_PENDING_OF: LiteralString = """(
       (SELECT count(*) FROM jobs
        WHERE status = 'pending' AND limit_key IS NULL AND queue = queue_name)
       + (SELECT count(*) FROM jobs
          WHERE status = 'pending' AND limit_key IS NOT NULL AND queue = queue_name))"""
