"""The claim of one limited or fair queue, and what the worker remembers between two of
them: which statement the queue needs (its ``mode`` as the last claim or read of the held
queues saw it), how much of a keyed queue's backlog head a claim reads, where a key-by-key
walk and a fair round go on, and a fair queue's pace (fair_steps.py).

worker/claiming.py decides which queues are asked and in what order; each limit is decided
inside the claim's transaction from durable rows (db/sql/jobs/claim_limited.py), and this
module only picks the statement and reads its budget columns to know when to ask again
(rests.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import psycopg

from pgbeat.db.kept_cursor import KeptCursor
from pgbeat.db.named_statements import NamedStatements
from pgbeat.db.sql.jobs import claim_after
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.worker.claim_cursor import ClaimCursor
from pgbeat.worker.fair_steps import FairSteps
from pgbeat.worker.locked_claim import claim_keys, claim_locked
from pgbeat.worker.rests import LIMITED_RECHECK, Rests

HEAD_SCAN_MIN = 128  # rows of a key-limited queue's backlog head a claim looks at, at least
HEAD_SCAN_FACTOR = 2  # ... or this many per job it may claim
HEAD_SCAN_SLACK = 16  # rows beyond what the queue's last head claim needed, when it filled


class LimitedClaims:
    """The claims of a worker's limited and fair queues, one queue at a time.

    ``stepped`` says the last claim stopped at a fair queue's step (fair_steps.py): the
    worker claims again at its loop's next turn. ``kept`` and ``named`` are the claiming
    connection's cursor and named statements (db/kept_cursor.py, db/named_statements.py).
    """

    def __init__(self, rests: Rests, kept: KeptCursor, named: NamedStatements) -> None:
        self._rests = rests
        self._kept = kept
        self._named = named
        self._mode: dict[str, str] = {}  # per limited queue: 'whole', 'keyed' or 'fair'
        self._after_key: dict[str, str] = {}  # per queue: where the key-by-key claim goes on
        self._head_need: dict[str, float] = {}  # per keyed queue: head rows per job it took
        self._fair_after: dict[str, str] = {}  # per fair queue: where its round goes on
        self._cursors: dict[str, ClaimCursor] = {}  # per keyed queue: where its head goes on
        self._steps = FairSteps()  # per fair queue: in how many claims its slots go out
        self.stepped = False

    def noted(self, queue: str, mode: str) -> None:
        """The claim ``queue`` needs, as the read of the held queues saw it."""
        self._mode[queue] = mode

    def jobs_arrived(self) -> None:
        """New jobs (or settings) were announced: one may come before a keyed queue's
        position, and its next claim reads from the head."""
        for cursor in self._cursors.values():
            cursor.reset()

    def ran(self, queues: Mapping[str, float]) -> None:
        """Jobs of these queues ended, each with its jobs' longest run (a fair queue's pace)."""
        self._steps.ran(queues)

    def claim(
        self, conn: psycopg.Connection[Any], queue: str, params: dict[str, Any]
    ) -> list[Any] | None:
        """Claim up to ``params["limit"]`` jobs of ``queue`` from its budget: from the head,
        key by key, or fair. None: the queue is not limited now (paused, gone or unlimited
        since), and the caller reads the held queues again."""
        limit = params["limit"]
        mode = self._mode.get(queue, "keyed")
        params = {**params, "queue": queue}
        params["scan"] = params["keys"] = max(HEAD_SCAN_MIN, HEAD_SCAN_FACTOR * limit)
        need = self._head_need.pop(queue, None)
        if need is not None and mode == "keyed":  # most keys free: a head the size it needs
            params["scan"] = min(params["scan"], math.ceil(need * limit) + HEAD_SCAN_SLACK)
        if mode == "fair":
            params["after"] = self._fair_after.get(queue)
            params["steps"] = steps = self._steps.steps(queue)
            statement = limited_sql.JOBS_CLAIM_FAIR
        elif mode == "keyed":
            statement = self._cursors.setdefault(queue, ClaimCursor()).statement(
                limited_sql.JOBS_CLAIM_LIMITED_HEAD,
                claim_after.JOBS_CLAIM_LIMITED_HEAD_AFTER,
                params,
                time.monotonic(),
            )
        else:
            statement = limited_sql.JOBS_CLAIM_LIMITED
        began = time.monotonic()
        rows, budget = claim_locked(conn, statement, params, self._kept, self._named)
        if mode == "fair":
            self._steps.claimed(queue, began, time.monotonic())
        if budget is None:
            return None
        granted, rate_left, rate_wait, mode_now, timed, scanned, last_key = budget
        self._mode[queue] = mode_now
        now = time.monotonic()
        if mode_now != mode:
            self._rests.held_back(now + LIMITED_RECHECK)  # claimed with the other statement next
            return rows
        if mode == "fair" and rows:  # a claim that took nothing stopped nowhere: keep the
            self._fair_after[queue] = last_key  # round (reset, key order's first key won)
        if granted == 0:
            spent = rate_left is not None and rate_left <= 0 and rate_wait is not None
            pause = max(LIMITED_RECHECK, float(rate_wait)) if spent else LIMITED_RECHECK
            self._rests.rest(queue, now + pause, full=not spent)
            return rows
        keyed = mode == "keyed"
        if keyed:
            if rows and len(rows) >= granted:  # filled: ``scanned`` is the rows it needed
                self._head_need[queue] = scanned / len(rows)
            went_on = statement is not limited_sql.JOBS_CLAIM_LIMITED_HEAD
            if self._note_position(queue, rows, granted, scanned, now, went_on, params["scan"]):
                return rows
            if scanned == params["scan"] and len(rows) < granted:
                rows += claim_keys(
                    conn,
                    self._rests,
                    self._after_key,
                    params,
                    granted - len(rows),
                    self._kept,
                    self._named,
                )
                if not rows:  # every key it looked at is full: a completion or a window frees one
                    self._rests.fruitless_walk(queue, now, timed)  # the walk goes on from there
                    return rows
        if rows:
            self._rests.fruitful(queue)
        if mode == "fair" and rows:  # ``scanned``: the step's size (claim_limited.py)
            free = min(granted, limit)
            stepped = steps > 1 and scanned is not None and scanned <= len(rows) < free
            self._steps.took(queue, free, stepped=stepped)
            if stepped:
                self.stepped = True  # a step's worth: the next step at the loop's next turn
                self._rests.held_back(now)
                return rows
        if len(rows) >= limit:
            return rows
        if not rows and (not keyed or scanned == 0):
            self._rests.went_dry(queue, now)  # out of due jobs: until jobs or its next due one
        else:  # its limits, or saturated keys: a completion may free a slot
            self._rests.held_back(now + LIMITED_RECHECK)
        return rows

    def _note_position(
        self,
        queue: str,
        rows: list[Any],
        granted: int,
        scanned: int,
        now: float,
        went_on: bool,
        scan: int,
    ) -> bool:
        """Keep where a keyed queue's head claim stopped, when every head row up to its last
        was taken (``scanned``, claim_limited.py: no saturated key's row passed over before
        it): its next claim goes on from there (claim_cursor.py), past the entries of the
        jobs claimed since the last vacuum, which a claim from the head steps over. True: a
        claim that went on found the rows after the position run out before its budget (of
        that priority, or due ones): not dry, the queue is claimed from the head at once."""
        whole = bool(rows) and scanned == len(rows)
        self._cursors[queue].claimed(rows if whole else [], granted, now, not went_on)
        if went_on and len(rows) < granted and scanned < scan:
            if rows:
                self._rests.fruitful(queue)
            self._rests.held_back(now)
            return True
        return False
