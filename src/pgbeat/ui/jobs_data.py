"""The jobs pages' reads and writes: one filtered page, capped counts, bulk actions.

Each function takes one connection and runs a fixed statement of ``db/sql/``.
Actions carry their own status test in the statement, so a job whose status changed
between the page and the click is skipped and counted, never acted on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from pgbeat.db.guarded import one, rows
from pgbeat.db.sql.jobs import dashboard as dashboard_sql
from pgbeat.jobs import actions
from pgbeat.ui.filters import SEARCH_WINDOW, JobFilter

PAGE_SIZE = 50
COUNT_CAP = 10_000


@dataclass(frozen=True)
class JobsPage:
    rows: list[dict[str, Any]]
    count: int  # capped at COUNT_CAP + 1
    floor: int | None  # the lowest id searched, when the search was bounded
    next_before: int | None  # cursor of the next page
    search_older: int | None  # cursor to search the ids below the bound


def clock(conn: psycopg.Connection[Any]) -> tuple[Any, int]:
    """The database's now() and the largest job id (0 for an empty table)."""
    row = conn.execute(dashboard_sql.UI_NOW).fetchone()
    assert row is not None
    return row[0], int(row[1] or 0)


def jobs_page(
    conn: psycopg.Connection[Any],
    job_filter: JobFilter,
    before: int | None,
    max_id: int,
    kind_of_schedule: str | None,
) -> JobsPage:
    """One page of jobs matching the filter, newest first, below the ``before`` cursor."""
    params = job_filter.params(kind_of_schedule)
    floor = window_floor(job_filter, before if before is not None else max_id + 1)
    params.update(floor=floor, before=before, limit=PAGE_SIZE + 1, cap=COUNT_CAP)
    found = rows(conn, dashboard_sql.JOBS_PAGE, params)
    count_row = one(conn, dashboard_sql.JOBS_COUNT_MATCHING, params)
    count = int(count_row["count"]) if count_row else 0
    next_before = found[PAGE_SIZE - 1]["id"] if len(found) > PAGE_SIZE else None
    search_older = floor if floor is not None and floor > 1 and next_before is None else None
    return JobsPage(found[:PAGE_SIZE], count, floor, next_before, search_older)


def window_floor(job_filter: JobFilter, below: int) -> int | None:
    """The lowest id a bounded search reads when it starts below id ``below``, if bounded."""
    return max(1, below - SEARCH_WINDOW) if job_filter.searches_window() else None


def count_matching(
    conn: psycopg.Connection[Any],
    job_filter: JobFilter,
    max_id: int,
    floor: int | None,
    kind_of_schedule: str | None,
) -> int:
    """How many jobs with ids in [floor, max_id] match, capped at ``COUNT_CAP + 1``."""
    params = job_filter.params(kind_of_schedule)
    params.update(max_id=max_id, floor=floor, cap=COUNT_CAP)
    row = one(conn, dashboard_sql.JOBS_COUNT_MATCHING, params)
    return int(row["count"]) if row else 0


def act_on_ids(
    conn: psycopg.Connection[Any], action: str, ids: list[int], reason: str
) -> list[int]:
    """Apply ``action`` (jobs/actions.py, as the CLI does) to these jobs where their status
    still allows it; the ids acted on (for a cancel, running jobs told to stop too)."""
    if action == "cancel":
        cancelled = actions.cancel(conn, ids, reason)
        return cancelled.ids + cancelled.stopping
    if action == "retry":
        return actions.retry(conn, ids)
    if action == "run_now":
        return actions.run_now(conn, ids)
    if action == "delete":
        return actions.delete(conn, ids)
    raise ValueError(f"no action {action!r}")


def act_on_matching(
    conn: psycopg.Connection[Any],
    action: str,
    job_filter: JobFilter,
    id_range: tuple[int | None, int],
    kind_of_schedule: str | None,
    reason: str,
) -> list[int]:
    """Apply ``action`` to every job with an id in [floor, max_id] the filter matches now,
    in one transaction."""
    params = job_filter.params(kind_of_schedule)
    params.update(floor=id_range[0], max_id=id_range[1])
    with conn.transaction():
        ids = [int(r[0]) for r in conn.execute(dashboard_sql.JOBS_MATCHING_IDS, params).fetchall()]
        return act_on_ids(conn, action, ids, reason)
