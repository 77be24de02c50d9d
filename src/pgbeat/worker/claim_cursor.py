"""Where the worker's last claim stopped in its index, so the next claim of the same
statement starts there (db/sql/jobs/claim_after.py says why: the entries of the jobs
claimed since the last vacuum, which a claim from the index's head steps over).

The position is a hint, kept only while nothing says a job may have come before it: a
claim that came back short, new jobs or settings announced, the held queues changed, or
another statement (or head) claimed. And it is dropped ``CURSOR_MAX`` seconds after the
claim from the head that began it, whatever happened, so a job made pending before it
without a notification (a reclaimed lease, a row locked by a steering statement at that
claim, a worker without LISTEN behind a transaction pooler) waits that long at most.
Pure logic: the caller gives the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString, NamedTuple

from pgbeat.job import Job

CURSOR_MAX = 0.1  # seconds a chain of claims goes on from a position before one from the head

_ID, _RUN_AT, _PRIORITY = (Job._fields.index(name) for name in ("id", "run_at", "priority"))


class _Position(NamedTuple):
    key: tuple[str, Any, Any]  # the statement, and the head it read (queue, kind) if one
    priority: int
    run_at: datetime
    id: int
    began: float  # monotonic: the claim from the head that began this chain


def last_in_claim_order(rows: Sequence[Sequence[Any]]) -> tuple[int, datetime, int] | None:
    """The (priority, run_at, id) of the last of claimed ``rows`` (Job's columns, in
    Job's order) in claim order (higher priority first, then run_at, then id); None if a
    row's run_at could not be read."""
    if any(row[_RUN_AT] is None for row in rows):
        return None
    last = max(rows, key=lambda row: (-row[_PRIORITY], row[_RUN_AT], row[_ID]))
    return int(last[_PRIORITY]), last[_RUN_AT], int(last[_ID])


class ClaimCursor:
    """The position after the last row one claim statement took, while it holds."""

    def __init__(self) -> None:
        self._at: _Position | None = None
        self._key: tuple[str, Any, Any] | None = None  # the claim being run's (None: no twin)

    def statement(
        self,
        statement: LiteralString,
        twin: LiteralString | None,
        params: dict[str, Any],
        now: float,
    ) -> LiteralString:
        """The claim to run for ``statement``: its ``twin`` (None: it has none), going on
        from the position (its parameters set in ``params``) while the position holds,
        else ``statement``; the rows it takes go to ``claimed``."""
        self._key = None if twin is None else (statement, params.get("queue"), params.get("kind"))
        after = None if self._key is None else self.after(self._key, now)
        if twin is None or after is None:
            return statement
        params.update(after)
        return twin

    def claimed(
        self, rows: Sequence[Sequence[Any]], limit: int, now: float, from_head: bool
    ) -> None:
        """The rows the claim of the last ``statement`` took, of the ``limit`` it asked,
        read from the head (or from the position only); none kept after a reset since."""
        self.took(self._key, rows, limit, now, not from_head)

    def after(self, key: tuple[str, Any, Any], now: float) -> dict[str, Any] | None:
        """The parameters that start a claim of ``key`` after the last row taken (the
        statement's twin's), or None: claim from the head."""
        at = self._at
        if at is None or at.key != key or now - at.began >= CURSOR_MAX:
            return None
        return {"after_priority": at.priority, "after_run_at": at.run_at, "after_id": at.id}

    def took(
        self,
        key: tuple[str, Any, Any] | None,
        rows: Sequence[Sequence[Any]],
        limit: int,
        now: float,
        went_on: bool,
    ) -> None:
        """A claim of ``key`` (None: a statement without a twin) took ``rows`` of the
        ``limit`` it asked, from the position only (``went_on``) or from the head: the
        next goes on after the last of them if it filled, in the same chain if it went on."""
        last = last_in_claim_order(rows) if key is not None and len(rows) >= limit > 0 else None
        if key is None or last is None:
            self._at = None
            return
        began = self._at.began if went_on and self._at is not None else now
        self._at = _Position(key, *last, began)

    def reset(self) -> None:
        """A job may have come before the position: the next claim reads from the head, and
        the claim running now (if one is) leaves no position: what it read may miss it."""
        self._at = None
        self._key = None
