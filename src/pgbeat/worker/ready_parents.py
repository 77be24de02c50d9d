"""A worker's side of a large fan-out claimed where its children are held (migration 0032,
db/sql/jobs/claim_ready.py): whether a ready parent may be waiting, the claim of its next
window, and the release of one no claim moved on for READY_STALE."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg

from pgbeat.db.sql.jobs import claim_ready as ready_sql
from pgbeat.worker.claimed_rows import columns, job_columns

READY_STALE = timedelta(seconds=1)  # a fan-out's children no claim took for this long: released


class ReadyParents:
    """Whether a ready parent's children may wait: announced (``heard``, the listener's
    ``ready_heard``), seen left at the last stale release, or left by the last window."""

    def __init__(self, heard: Callable[[], bool] | None = None) -> None:
        self._heard = heard or (lambda: False)
        self._waiting = False

    def waiting(self) -> bool:
        if self._heard():
            self._waiting = True
        return self._waiting

    def claim(self, conn: psycopg.Connection[Any], params: dict[str, Any]) -> list[Any]:
        """The next window of a ready parent's children (``params``: a claim's, its limit
        the window): the ones this worker may run, claimed (in Job's order); the others
        released into their queues."""
        statement = ready_sql.JOBS_CLAIM_READY
        cursor = conn.execute(statement, params)
        found = cursor.fetchall()
        self._waiting = bool(found) and bool(columns(statement, cursor, ("more",))(found[0]))
        pick = job_columns(statement, cursor)
        return [pick(row) for row in found if row[0] is not None]

    def release_stale(self, conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
        """READY_RELEASE_STALE, sent in the caller's pipeline (read by ``noted``)."""
        return conn.execute(ready_sql.READY_RELEASE_STALE, {"stale": READY_STALE})

    def noted(self, cursor: psycopg.Cursor[Any]) -> None:
        """A ready parent is left after the stale release: claim its children when a claim
        of due jobs comes up short."""
        row = cursor.fetchone()
        if row is not None and row[1]:
            self._waiting = True
