"""The worker's two connections (claims, outcomes) and the session settings they run with,
and why: durability traded for speed where at-least-once allows it, and plans kept stable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg

from pgbeat.db.connections import Connector, ReconnectBackoff
from pgbeat.db.sql.jobs import outcomes as outcome_sql

log = logging.getLogger("pgbeat.worker")

# The session settings of the worker's two connections (claims, outcomes); worker_session says why.
SESSION_SETTINGS = {
    "synchronous_commit": "off",
    "enable_bitmapscan": "off",
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
    "enable_sort": "off",  # a plan kept after ANALYZE saw no due job must not sort the backlog
    "enable_incremental_sort": "off",  # ... nor a claim's cursor sort a run_at's jobs by id
    "jit": "off",
    "TimeZone": "UTC",  # claimed rows' dates decode at a third of the cost (worker_session)
}


def worker_session(
    url: str,
    name: str,
    backoff: ReconnectBackoff,
    configure: Callable[[psycopg.Connection[Any]], None] | None = None,
) -> Connector:
    """A worker connection (claims, or outcomes), with the session settings they need.

    They commit without waiting for the WAL flush: a database crash can then forget the
    last few hundred milliseconds of claims and outcomes, which only means those jobs run
    again (at-least-once, as always); enqueues stay fully durable.
    Bitmap scans are off because they never mark dead index entries: every status change
    leaves one in each index, and plain index scans clean them up as they pass.
    Plans are kept: each statement is planned once per connection (a generic plan, from
    psycopg's fifth execution, when it prepares the statement), since planning the claim
    and the completion was a noticeable share of their work (docs/benchmarks.md).
    Sequential scans are off so that a plan made while the table was small reads the
    indexes as one made at a million rows does: a kept plan made on a small table (a
    sequential scan) once stayed in use as the table grew, no ANALYZE replaced it, and
    claims slowed by orders of magnitude (tests/integration/test_worker_plans.py makes each
    statement's plan on an empty table and reads it at 140,000 jobs). JIT is off: with
    sequential scans off, a scan of a small table that has no usable index costs more than
    jit_above_cost, and a kept plan would be compiled at every execution.
    The time zone is UTC: psycopg reads a ``timestamptz`` into a datetime in the session's
    zone, and for any zone but ``UTC`` (``Etc/UTC`` included, the usual server default) that
    is a ``ZoneInfo`` conversion, 340 ns a date against 120: the two dates of each claimed
    row were two thirds of the cost of reading a claim's rows. An interval added to a date
    on these sessions (a retry's delay, a rate's window) is then exact elapsed time, never
    a day made 23 or 25 hours by a server zone's daylight saving change.
    """
    return Connector(url, name, configure=configure, backoff=backoff, **SESSION_SETTINGS)


def warm_outcome_session(conn: psycopg.Connection[Any]) -> None:
    """Compile the workflow advance on a new outcome connection (outcomes.JOBS_WARM_ADVANCE
    says why); a database that refuses it (an older schema, a role without the function)
    only leaves the first step's end to compile it."""
    try:
        conn.execute(outcome_sql.JOBS_WARM_ADVANCE)
    except psycopg.DatabaseError as exc:
        if conn.broken:
            raise
        log.debug("did not warm the workflow advance: %s", exc)
