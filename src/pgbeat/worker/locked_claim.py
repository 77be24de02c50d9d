"""A limited queue's claim under the queue's row lock, in one round trip: what
worker/claiming.py runs for each limited queue it asks, and how its budget columns come back.
"""

from __future__ import annotations

from typing import Any, LiteralString

import psycopg
from psycopg.pq import TransactionStatus

from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql import session as session_sql
from pgbeat.job import Job
from pgbeat.worker.claimed_rows import columns, job_columns

# The columns a limited claim returns beside the job's (db/sql/jobs/claim_parts.py).
BUDGET = ("budget", "rate_left", "rate_wait", "mode", "timed", "scanned", "last_key")
LIMIT_KEY = Job._fields.index("limit_key")  # of a claimed row, once in Job's order


def claim_locked(
    conn: psycopg.Connection[Any], statement: LiteralString, params: dict[str, Any]
) -> tuple[list[Any], tuple[Any, ...] | None]:
    """Run a limited queue's claim under its row lock, with a plan kept for the connection
    from its first execution (QUEUES_LOCK says why; _prepare), in one round trip.

    The lock and the claim go in one pipeline without BEGIN or COMMIT: the protocol runs
    the statements up to the pipeline's Sync as one implicit transaction (committed at the
    Sync, rolled back there if one fails), each statement with a snapshot of its own under
    READ COMMITTED, so the claim's is taken after the lock was granted. Two statements
    fewer per claim than a transaction block by hand (session.py). ``conn`` is in
    autocommit, not inside a pipeline with statements of its own waiting (psycopg syncs
    those before a nested pipeline starts).

    Returns the claimed rows (in Job's order) and the budget's columns (BUDGET; None: the
    queue is not limited now).
    """
    try:
        with conn.pipeline():
            conn.execute(queue_sql.QUEUES_LOCK, {"queue": params["queue"]})
            cursor = conn.execute(statement, params, prepare=_prepare(conn))
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
