"""A limited queue's claim under the queue's row lock, in one round trip: what
worker/claiming.py runs for each limited queue it asks, how its budget columns come back,
and the key-by-key claim past a head of saturated keys (where its walk goes on).
"""

from __future__ import annotations

import time
from typing import Any, LiteralString

import psycopg
from psycopg.pq import TransactionStatus

from pgbeat.db.kept_cursor import KeptCursor
from pgbeat.db.named_statements import NamedStatements
from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql import session as session_sql
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.job import Job
from pgbeat.worker.claimed_rows import columns, job_columns
from pgbeat.worker.rests import Rests

# The columns a limited claim returns beside the job's (db/sql/jobs/claim_parts.py).
BUDGET = ("budget", "rate_left", "rate_wait", "mode", "timed", "scanned", "last_key")
LIMIT_KEY = Job._fields.index("limit_key")  # of a claimed row, once in Job's order


def claim_locked(
    conn: psycopg.Connection[Any],
    statement: LiteralString,
    params: dict[str, Any],
    kept: KeptCursor | None = None,
    named: NamedStatements | None = None,
) -> tuple[list[Any], tuple[Any, ...] | None]:
    """Run a limited queue's claim under its row lock, with a plan kept for the connection
    from its first execution (QUEUES_LOCK says why; _prepare), in one round trip.

    The lock and the claim go together without BEGIN or COMMIT, as one implicit
    transaction (committed at its end, rolled back if one fails), each statement with a
    snapshot of its own under READ COMMITTED, so the claim's is taken after the lock was
    granted: two statements fewer per claim than a transaction block by hand (session.py).
    With ``named`` (and a connection that may keep them: NamedStatements.usable) both are
    named statements run in one simple query; otherwise they go in a pipeline (the
    protocol's Sync ends its implicit transaction). ``conn`` is in autocommit, not inside
    a pipeline with statements of its own waiting (psycopg syncs those before a nested
    pipeline starts).

    Returns the claimed rows (in Job's order) and the budget's columns (BUDGET; None: the
    queue is not limited now). ``kept``: the claim's cursor, kept by the caller
    (db/kept_cursor.py); ``named``: the caller's named statements (db/named_statements.py).
    """
    lock_params = {"queue": params["queue"]}
    try:
        if named is not None and named.usable(conn):
            cursor = named.run(
                conn,
                conn.cursor() if kept is None else kept.on(conn),
                ((queue_sql.QUEUES_LOCK, lock_params), (statement, params)),
            )
        else:
            with conn.pipeline():
                conn.execute(queue_sql.QUEUES_LOCK, lock_params)
                on = conn if kept is None else kept.on(conn)
                cursor = on.execute(statement, params, prepare=_prepare(conn))
    except BaseException:
        if not conn.closed and conn.info.transaction_status == TransactionStatus.INERROR:
            conn.execute(session_sql.TRANSACTION_ROLLBACK, prepare=False)  # start clean
        raise
    found = cursor.fetchall()
    if not found:
        return [], None
    budget = columns(statement, cursor, BUDGET)(found[0])
    pick = job_columns(statement, cursor)
    return [pick(row) for row in found if row[0] is not None], tuple(budget)


def _prepare(conn: psycopg.Connection[Any]) -> bool | None:
    """Keep a limited claim's plan from its first execution, where statements are kept at
    all (not behind a transaction pooler: prepare_threshold None). Planned at each of the
    first five executions (psycopg's threshold), a key-limited claim cost 4-8 ms instead of
    1.3, and a queue claimed a few times a minute never got past them."""
    return True if conn.prepare_threshold is not None else None


def claim_keys(
    conn: psycopg.Connection[Any],
    rests: Rests,
    after_key: dict[str, str],
    params: dict[str, Any],
    limit: int,
    kept: KeptCursor | None = None,
    named: NamedStatements | None = None,
) -> list[Any]:
    """Past a head clogged by saturated keys of queue ``params["queue"]``: key by key, in a
    transaction of its own, from where the queue's last walk stopped (``after_key``, per
    queue, kept here); a walk that found every key saturated rests the walks (``rests``)."""
    now, queue = time.monotonic(), params["queue"]
    if rests.keys_resting(queue, now):
        return []
    params = {**params, "limit": limit, "after": after_key.pop(queue, None)}
    more, budget = claim_locked(conn, limited_sql.JOBS_CLAIM_LIMITED_KEYS, params, kept, named)
    walked, last_key = budget[-2:] if budget else (0, None)
    if more and len(more) == limit:
        after_key[queue] = max(row[LIMIT_KEY] for row in more)
    elif walked and walked >= params["keys"] and last_key is not None:
        after_key[queue] = last_key  # a bounded walk: the next goes on from here
    elif not more:  # every key with jobs is saturated: no need to look again at once
        rests.keys_found_none(queue, now)
    return more
