"""The claim: limited queues each in a short locked transaction, then the fast path for the rest.

Every limit is decided inside the claim's transaction from durable rows (db/sql/jobs/claim.py
says how); this module only orders the statements and remembers which queues were held,
dry or spent on the last claims (hints: each statement re-reads the settings); claimed
rows are decoded by claimed_rows.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, LiteralString

import psycopg

from pgbeat.db.kept_cursor import KeptCursor
from pgbeat.db.literals import names_array
from pgbeat.db.named_statements import NamedStatements
from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import claim_after
from pgbeat.db.sql.jobs import claim_heads as heads_sql
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.job import Job
from pgbeat.worker.claim_cursor import ClaimCursor
from pgbeat.worker.claimed_rows import decode_rows, fetch_jobs
from pgbeat.worker.due_queues import DueQueues, kinds_ahead
from pgbeat.worker.limited_claims import LimitedClaims
from pgbeat.worker.ready_parents import ReadyParents
from pgbeat.worker.rests import LIMITED_RECHECK, Rests

log = logging.getLogger("pgbeat.worker")

FAST_RECHECK = 0.05  # seconds a fast path found short is not asked first again, unless notified
HELD_REFRESH = 0.5  # seconds between two reads of which queues are paused or limited
HELD_AHEAD = 100  # held queues' pending jobs the fast claim may step over, at most
KINDS_AHEAD = 50  # foreign kinds' jobs among the first HELD_AHEAD due: claim by queue and kind
# The claims of due jobs that may go on from where the last one stopped (claim_cursor.py).
TWINS: dict[str, LiteralString] = {
    claim_sql.JOBS_CLAIM: claim_after.JOBS_CLAIM_AFTER,
    claim_sql.JOBS_CLAIM_SKIPPING: claim_after.JOBS_CLAIM_SKIPPING_AFTER,
    heads_sql.JOBS_CLAIM_ONE_HEAD: claim_after.JOBS_CLAIM_ONE_HEAD_AFTER,
    heads_sql.JOBS_CLAIM_ONE_KEYED_HEAD: claim_after.JOBS_CLAIM_ONE_KEYED_HEAD_AFTER,
}


class Claimer:
    """Claims for one worker: its kinds and queues, its lease.

    ``limited`` is the worker's limited and fair queues as the last claim saw them (None
    before the first, or after a notification that settings changed): they are claimed in
    turn, each from its own budget, and the fast path takes the other slots; every other
    claim the fast path goes first. Which limited queues rest, and until when, is kept by
    rests.py; a change of a queue's settings (a notification, or its ``updated_at`` at the
    next read of the held queues, every HELD_REFRESH seconds) ends its rests.
    ``limited_short`` says a limited queue gave fewer jobs than asked: the loop then asks
    ``seconds_to_next`` soon. ``watched`` is the limited queues, whose written outcomes the
    worker reports to slots_freed. A large fan-out's children are claimed where they are
    held when a claim of due jobs came up short and a ready parent was announced
    (``ready_heard``, the listener's) or seen at the last read of the held queues.
    """

    def __init__(
        self,
        lease: timedelta,
        kinds: Sequence[str] | None = None,
        queues: Sequence[str] | None = None,
        ready_heard: Callable[[], bool] | None = None,
    ) -> None:
        self.lease = lease
        self.kinds = None if kinds is None else list(kinds)  # [] claims nothing
        self.queues = list(queues) if queues else None
        self.limited: list[str] | None = None
        self.watched: frozenset[str] = frozenset()
        self.held: list[str] = []  # paused, limited or fair: not for the fast path
        self._held_pending: list[str] = []  # ... of them, those with pending jobs at the last read
        self._limited_pending: list[str] = []  # the limited ones with pending jobs, likewise
        self._rests = Rests()
        self._turn = 0
        self._held_until = 0.0  # monotonic: when to read the held queues again
        self._fast_short_until = 0.0  # monotonic: the fast path gave too few a moment ago
        self._due_short_until = 0.0  # ... the same, whatever was announced since
        self._updated: dict[str, Any] = {}  # per held queue: its settings' updated_at
        self._invalid: set[str] = set()  # rows the constraints refuse, logged once
        self._held_ahead = 0  # the held queues' pending jobs (each counted to HELD_AHEAD)
        self._foreign_ahead = 0  # foreign kinds' jobs among the first HELD_AHEAD due ones
        self._due = DueQueues()  # the claim by queue and kind's hint
        self._empty: set[str] = set()  # held queues without a pending job at the last read
        self._ready = ReadyParents(ready_heard)  # a fan-out's children claimed where held
        self._cursor = ClaimCursor()  # where the last claim of due jobs stopped in its index
        self._kept = KeptCursor()  # the claims' own cursor (db/kept_cursor.py)
        # Each limited queue's claim, with what it remembers between two (limited_claims.py).
        self._limited_claims = LimitedClaims(self._rests, self._kept, NamedStatements())

    @property
    def stepped(self) -> bool:
        """The last claim stopped at a fair queue's step: claim again now."""
        return self._limited_claims.stepped

    @property
    def limited_short(self) -> bool:
        return self._rests.short

    @property
    def listening(self) -> bool:
        return self._rests.listening

    @listening.setter
    def listening(self, heard: bool) -> None:
        self._rests.listening = heard  # notifications are heard: a dry queue rests until one

    def claim(self, conn: psycopg.Connection[Any], limit: int) -> list[Job]:
        """Lease up to ``limit`` due jobs (``conn`` in autocommit); unreadable rows are failed."""
        if self.limited is None:
            with conn.pipeline():
                held = self._read_held(conn)
            self._note_held(*held)
        rows: list[Any] = []
        self._rests.begin()
        self._limited_claims.stepped = False
        self._turn += 1
        # Every other claim the unlimited queues go first: limited queues with room for
        # every slot do not starve them, nor they the limited ones.
        now = time.monotonic()
        fast_first = bool(self.limited) and self._turn % 2 == 0
        if fast_first and now >= self._fast_short_until:
            rows.extend(self._claim_fast(conn, limit))
        for queue in self._rests.awake(self._limited_in_turn(), now):
            if self._rests.spent(queue, now) or self._rests.resting(queue, now):
                continue
            if len(rows) >= limit:
                self._rests.held_back(now + LIMITED_RECHECK)  # not every limited queue had its turn
                break
            rows.extend(self._claim_limited(conn, queue, limit - len(rows)))
        if not fast_first and len(rows) < limit:
            rows.extend(self._claim_fast(conn, limit - len(rows)))
        jobs, unreadable = decode_rows(rows)
        if unreadable:
            conn.execute(
                claim_sql.JOBS_FAIL_UNREADABLE,
                {"ids": [i for i, _ in unreadable], "errors": [e for _, e in unreadable]},
                prepare=False,  # never kept (its comment says why)
            )
        return jobs

    def jobs_arrived(self) -> None:
        """New jobs were announced: the next fast-first turn asks the fast path again, the
        dry limited queues are asked again, the empty ones looked at again with the next
        fast claim (QUEUES_HELD, no round trip more), the claim by queue's hint walked soon."""
        self._fast_short_until = 0.0
        self._rests.jobs_arrived()
        self._due.stale()
        self._cursor.reset()
        self._limited_claims.jobs_arrived()
        if self._empty:
            self._held_until = 0.0

    def slots_freed(self, queues: Mapping[str, float]) -> None:
        """Jobs of these limited queues left running (their outcomes are written here), each
        with its jobs' longest run: the ones that rest because their slots were full are
        asked again (a claim whose budget is 0 is one cheap round trip: no key is walked)."""
        self._rests.slots_freed(queues.keys())
        self._limited_claims.ran(queues)

    def settings_changed(self) -> None:
        """A queue's settings changed (a notification): the next claim reads the held
        queues first, and every rest ends."""
        self.limited = None
        self._rests.settings_changed()
        self.jobs_arrived()

    def seconds_to_next(self, conn: psycopg.Connection[Any], fast: bool = True) -> float | None:
        """Seconds until a pending job may be due: of the fast queues (``fast``), and of the
        limited ones after a short limited claim (<= 0 while limits hold due jobs back)."""
        found: list[float] = []
        if fast:
            row = conn.execute(claim_sql.JOBS_SECONDS_TO_NEXT, self._params(0)).fetchone()
            if row is not None and row[0] is not None:
                found.append(float(row[0]))
                if self._by_kind():  # a due queue outside the hint waits for the next walk
                    found[-1] = max(found[-1], self._due.wait(time.monotonic()))
        if self._rests.short:
            now = time.monotonic()
            wake = self._rests.wakes(lambda queue: self._next_due(conn, queue, now), now)
            if wake is not None:
                found.append(wake - now)
        return min(found) if found else None

    def _next_due(self, conn: psycopg.Connection[Any], queue: str, now: float) -> float | None:
        """When the next pending job of a limited queue falls due (monotonic), or None."""
        row = conn.execute(
            limited_sql.JOBS_SECONDS_TO_NEXT_LIMITED,
            {"queues": [queue], "kinds": self.kinds},
            prepare=False,  # never kept (its comment says why)
        ).fetchone()
        return None if row is None or row[0] is None else now + float(row[0])

    def _limited_in_turn(self) -> list[str]:
        """The limited queues with pending jobs at the last read, the first one rotating
        from claim to claim (kept by _note_held: 200 empty queues cost a claim nothing)."""
        queues = self._limited_pending
        if not queues:
            return []
        turn = (self._turn // 2) % len(queues)
        return queues[turn:] + queues[:turn]

    def _by_kind(self) -> bool:
        """Whether the fast claim goes by queue and kind: the head of the claim order is
        full of foreign kinds, or held backlogs (with a worker's kinds known)."""
        if self.kinds is None:
            return False
        return self._foreign_ahead >= KINDS_AHEAD or (
            not self.queues and self._held_ahead >= HELD_AHEAD
        )

    def _claim_fast(self, conn: psycopg.Connection[Any], limit: int) -> list[Any]:
        """The unlimited queues' claim: due jobs, then a ready parent's children when the
        claim of due jobs came up short (nothing of this worker's is due ahead of them).
        Within FAST_RECHECK of a short claim of due jobs the children go first: that claim
        would walk their held entries again for nothing (so a job due meanwhile waits for
        its claim up to FAST_RECHECK more, while a fan-out's children fill the slots)."""
        now = time.monotonic()
        rows: list[Any] = []
        if self._ready.waiting() and now < self._due_short_until:
            rows = self._ready.claim(conn, self._params(limit))
        if len(rows) < limit:
            due = self._claim_due(conn, limit - len(rows), now)
            if len(due) < limit - len(rows) and self._ready.waiting():
                due += self._ready.claim(conn, self._params(limit - len(rows) - len(due)))
            rows += due
        return rows

    def _claim_due(self, conn: psycopg.Connection[Any], limit: int, now: float) -> list[Any]:
        """The unlimited queues' due jobs, with the held queues read for the next claim."""
        statement = claim_sql.JOBS_CLAIM
        params = self._params(limit)
        if self._by_kind():  # each (queue, kind)'s head: never step over what it cannot take
            statement = heads_sql.JOBS_CLAIM_BY_QUEUE_KIND
            assert self.kinds is not None
            if not self.queues:  # the hint's queues, or its one head alone
                statement = self._due.claim_of(conn, self.kinds, self._held_pending, params)
        elif self.queues or self._held_ahead >= HELD_AHEAD:
            statement = claim_sql.JOBS_CLAIM_BY_QUEUE  # never step over a held backlog
        elif self.held:
            statement = claim_sql.JOBS_CLAIM_SKIPPING  # the held queues' few jobs
        head = statement  # or its twin, on from where the last claim stopped (claim_after.py)
        statement = self._cursor.statement(head, TWINS.get(head), params, now)
        if now < self._held_until:
            rows = fetch_jobs(statement, self._kept.on(conn).execute(statement, params))
        else:
            with conn.pipeline():
                fast = self._kept.on(conn).execute(statement, params)
                held = self._read_held(conn)
            rows = fetch_jobs(statement, fast)
            self._note_held(*held)
        from_head = statement is head
        if not from_head and len(rows) < limit:  # its priority ran out, or the backlog
            params["limit"], from_head = limit - len(rows), True
            rows += fetch_jobs(head, self._kept.on(conn).execute(head, params))
        self._cursor.claimed(rows, limit, now, from_head)
        self._fast_short_until = now + FAST_RECHECK if len(rows) < limit else 0.0
        self._due_short_until = self._fast_short_until  # not ended by jobs_arrived
        if len(rows) < limit:
            self._due.stale()  # a queue of the hint ran out, or one outside it has jobs
        return rows

    def _params(self, limit: int) -> dict[str, Any]:
        """A claim's parameters, the lists of names as array literals (names_array)."""
        return {
            "limit": limit,
            "lease": self.lease,
            "kinds": names_array(self.kinds),
            "queues": names_array(self.queues),
            "held": names_array(self._held_pending),
        }

    def _read_held(
        self, conn: psycopg.Connection[Any]
    ) -> tuple[psycopg.Cursor[Any], psycopg.Cursor[Any] | None, psycopg.Cursor[Any]]:
        """QUEUES_HELD, the foreign kinds ahead, and the release of a fan-out's children
        no claim took for a while (ready_parents.py), sent in the caller's pipeline (their
        rows read by _note_held once it ends)."""
        held = conn.execute(queue_sql.QUEUES_HELD, {"queues": self.queues, "ahead": HELD_AHEAD})
        ahead = kinds_ahead(conn, self.kinds, HELD_AHEAD)
        return held, ahead, self._ready.release_stale(conn)

    def _note_held(
        self,
        cursor: psycopg.Cursor[Any],
        ahead: psycopg.Cursor[Any] | None,
        ready: psycopg.Cursor[Any],
    ) -> None:
        """Remember the held queues of QUEUES_HELD's rows and the foreign kinds ahead; a
        queue whose settings changed since the last read ends its rests; one without a
        pending job is not claimed until jobs are announced or the next read; a row the
        constraints refuse is skipped (its jobs wait) and named once. Whether a ready
        parent is left (READY_RELEASE_STALE): its children are claimed after a short claim."""
        self._held_until = time.monotonic() + HELD_REFRESH
        self._ready.noted(ready)
        rows = cursor.fetchall()
        foreign = ahead.fetchone() if ahead is not None else None
        self._foreign_ahead = int(foreign[0]) if foreign is not None else 0
        self.held = [name for name, *_ in rows]
        self.limited = []
        self.watched = frozenset(name for name, paused, *_ in rows if not paused)
        self._held_ahead = sum(int(row[-1]) for row in rows)
        empty = {row[0] for row in rows if int(row[-1]) == 0}
        if self._empty - empty:  # jobs came to a queue that had none: claim again soon
            self._rests.held_back(time.monotonic())
        self._empty = empty
        pending = [name for name in self.held if name not in empty]
        if pending != self._held_pending:  # a claim may take what it skipped: from the head
            self._cursor.reset()
        self._held_pending = pending
        for name, paused, mode, problem, updated_at, _ in rows:
            if self._updated.get(name, updated_at) != updated_at:
                self._rests.forget(name)
            self._updated[name] = updated_at
            self._limited_claims.noted(name, mode)
            if problem is not None:
                if name not in self._invalid:
                    self._invalid.add(name)
                    log.error("queue %r: %s; its jobs wait until it is set again", name, problem)
            elif not paused:
                self.limited.append(name)
        self._limited_pending = [name for name in self.limited if name not in empty]

    def _claim_limited(self, conn: psycopg.Connection[Any], queue: str, limit: int) -> list[Any]:
        """Claim from one limited queue (limited_claims.py); one that is not limited now
        (paused, gone or unlimited since) has the held queues read again."""
        rows = self._limited_claims.claim(conn, queue, self._params(limit))
        if rows is None:
            self._held_until = 0.0
            return []
        return rows
