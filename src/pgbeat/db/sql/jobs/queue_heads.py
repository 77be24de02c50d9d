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
"""

from __future__ import annotations

from typing import LiteralString

# The predicates of the two indexes of a queue's pending jobs (migration 0023).
_UNKEYED: LiteralString = "limit_key IS NULL"
_KEYED: LiteralString = "limit_key IS NOT NULL"


def first_queue(after: LiteralString) -> LiteralString:
    """The first queue with pending jobs after ``after`` (an SQL expression; NULL: the
    first of all), or NULL: the smaller of both indexes' next queue."""
    return (
        """least(
        (SELECT queue FROM jobs WHERE status = 'pending' AND """
        + _UNKEYED
        + """
           AND queue > coalesce("""
        + after
        + """, '') ORDER BY queue LIMIT 1),
        (SELECT queue FROM jobs WHERE status = 'pending' AND """
        + _KEYED
        + """
           AND queue > coalesce("""
        + after
        + """, '') ORDER BY queue LIMIT 1))"""
    )


def _first_kind(queue: LiteralString, after: LiteralString) -> LiteralString:
    """The first kind with pending jobs in ``queue`` after ``after`` (NULL: the first)."""
    return (
        """least(
            (SELECT kind FROM jobs WHERE status = 'pending' AND """
        + _UNKEYED
        + " AND queue = "
        + queue
        + """
               AND kind > coalesce("""
        + after
        + """, '') ORDER BY kind LIMIT 1),
            (SELECT kind FROM jobs WHERE status = 'pending' AND """
        + _KEYED
        + " AND queue = "
        + queue
        + """
               AND kind > coalesce("""
        + after
        + """, '') ORDER BY kind LIMIT 1))"""
    )


def kinds_of(queue: LiteralString) -> LiteralString:
    """The kinds a claim reads in ``queue``, as ``k(kind)``: the worker's (%(kinds)s), or,
    for a claim of every kind (NULL), the kinds with pending jobs there (a skip scan, one
    probe per index and kind; evaluated only then)."""
    return (
        """unnest(coalesce(%(kinds)s::text[], ARRAY(
        WITH RECURSIVE present(kind) AS (
            SELECT """
        + _first_kind(queue, "NULL::text")
        + """
            UNION ALL
            SELECT """
        + _first_kind(queue, "present.kind")
        + """
            FROM present WHERE present.kind IS NOT NULL
        )
        SELECT kind FROM present WHERE kind IS NOT NULL))) AS k(kind)"""
    )


def kind_head(
    columns: LiteralString, split: LiteralString, queue: LiteralString, limit: LiteralString
) -> LiteralString:
    """The first ``limit`` due jobs of kind ``k.kind`` in ``queue`` in the index ``split``
    names, in claim order (that index's: no sort), as ``columns``."""
    return (
        """SELECT """
        + columns
        + """ FROM jobs
        WHERE status = 'pending' AND """
        + split
        + " AND queue = "
        + queue
        + """
          AND kind >= k.kind AND kind <= k.kind AND run_at <= now()
        ORDER BY kind, priority DESC, run_at, id
        LIMIT """
        + limit
    )


def queue_heads(
    columns: LiteralString,
    source: LiteralString,
    queue: LiteralString,
    limit: LiteralString,
    lock: LiteralString = "",
    where: LiteralString = "",
    splits: tuple[LiteralString, ...] = (_UNKEYED, _KEYED),
) -> LiteralString:
    """The heads of every kind (kinds_of) of ``queue`` in the indexes ``splits``: rows of
    ``columns`` (as ``h``), at most ``limit`` per kind and index, each ``lock``ed (``FOR
    UPDATE SKIP LOCKED`` or nothing), from ``source`` (a FROM item that gives ``queue``, or
    nothing) filtered by ``where``. Not in order: the caller takes the best of them."""
    branches = [
        "SELECT h.* FROM "
        + source
        + kinds_of(queue)
        + "\n    CROSS JOIN LATERAL (\n        "
        + kind_head(columns, split, queue, limit)
        + lock
        + "\n    ) AS h"
        + where
        for split in splits
    ]
    return "\n    UNION ALL\n    ".join(branches)


def pending_up_to(queue: LiteralString, most: LiteralString) -> LiteralString:
    """How many pending jobs ``queue`` holds, counted up to ``most`` (a bounded probe of
    each index, in its order: without the order a plan read jobs_ready whole)."""
    counts = [
        "(SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'pending' AND "
        + split
        + " AND queue = "
        + queue
        + "\n ORDER BY kind, priority DESC, run_at, id LIMIT "
        + most
        + ") AS few)"
        for split in (_UNKEYED, _KEYED)
    ]
    return "least(" + most + ", " + " + ".join(counts) + ")"


def pending_in(queue: LiteralString) -> LiteralString:
    """How many pending jobs ``queue`` holds (each index's rows of that queue only)."""
    counts = [
        "(SELECT count(*) FROM jobs WHERE status = 'pending' AND "
        + split
        + " AND queue = "
        + queue
        + ")"
        for split in (_UNKEYED, _KEYED)
    ]
    return "(" + " + ".join(counts) + ")"
