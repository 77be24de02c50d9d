"""One tick's periods as the columns of the claim statements, and what became of each.

One transaction: the claim (``HISTORY_CLAIM_NEW_PERIODS``, or ``HISTORY_CLAIM_PERIODS``
when some period has a history row already) decides every period's outcome in the
history, then ``PERIOD_JOBS_INSERT_NEW`` (or ``PERIOD_JOBS_INSERT`` when some job exists
already) inserts the jobs of the periods it enqueued, then the schedules it paused for
failures are paused and, under ``cancel_other``, the jobs the new ones replace are
cancelled. Two statements rather than one that joins the claim's rows
back to the periods: such a join of two CTEs is what the planner turned into a nested loop
(quadratic) when statistics promised few rows. This module writes the arrays cheaply for
10,000 periods (a key is a schedule's prefix plus a fire time's suffix, what schedules
share travels once per template, each column is one array literal) and reads the answers
back, period by period.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.db.connections import is_connection_failure
from pgbeat.db.literals import number_array, text_array
from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.db.sql.jobs import enqueue as enqueue_sql
from pgbeat.jobs import payloads
from pgbeat.scheduling.catchup import ON_TIME
from pgbeat.scheduling.groups import Group, Member, Template, outside
from pgbeat.scheduling.jitter import jitter_offset
from pgbeat.scheduling.schedule import unique_key_suffix

log = logging.getLogger("pgbeat.scheduler")


@dataclass
class Claims:
    """What the claim statement did with each period, by unique key, sorted."""

    inserted: list[str] = field(default_factory=list)  # enqueued, job inserted now
    existing: list[str] = field(default_factory=list)  # enqueued before (or by another writer)
    skipped: list[str] = field(default_factory=list)  # paused, failures, or overlap
    missed: list[str] = field(default_factory=list)  # dropped by the catch-up policy
    buffered: list[str] = field(default_factory=list)  # waiting (overlap = "buffer_one")
    paused: list[str] = field(default_factory=list)  # schedules paused after failures
    cancelled: list[int] = field(default_factory=list)  # jobs replaced (cancel_other)
    released: list[str] = field(default_factory=list)  # waited, enqueued now
    # per schedule: (inserted, existing) due periods, for the metrics
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)


class PeriodBatch:
    """The periods of one tick, member by member, in the statement's columns."""

    def __init__(self, templates: dict[int, Template]) -> None:
        self._templates = templates
        self._schedules: list[str] = []
        self._fire_epochs: list[str] = []
        self._fire_floats: list[float] = []
        self._run_epochs: list[str] = []
        self.unique_keys: list[str] = []
        self._kinds: list[str] = []
        self._hashes: list[str] = []
        self._missed: list[str] = []
        self._ranks: list[str] = []  # how many earlier due periods of its schedule are here
        self._template_of: list[int] = []
        self._used: set[int] = set()
        self._overlap: set[str] = set()  # schedules whose claims must take turns
        self._cancelling: set[str] = set()  # schedules with overlap = "cancel_other"
        self._written_params: tuple[str, dict[str, str]] | None = None
        self._jobs_columns: dict[str, str] | None = None
        self._written: dict[datetime, tuple[str, str, float]] = {}

    def __len__(self) -> int:
        return len(self.unique_keys)

    def add(self, group: Group, due: Sequence[datetime], missed: Sequence[datetime]) -> None:
        """Append each member's due periods and, flagged, the missed ones it may report."""
        if not due and not missed:
            return
        for member in group.members.values():
            self._append(member, outside(due, member.gaps), missed=False)
            if missed:
                late = [f for f in outside(missed, member.gaps) if f > member.created_at]
                self._append(member, late, missed=True)

    def _append(self, member: Member, fires: Sequence[datetime], *, missed: bool) -> None:
        flag = "t" if missed else "f"
        template = member.template
        prefix = member.name + "@"
        if not missed and fires:
            self._ranks += (
                _RANKS[: len(fires)]
                if len(fires) <= len(_RANKS)
                else [str(rank) for rank in range(len(fires))]
            )  # due fires come oldest first
        elif fires:
            self._ranks += ["0"] * len(fires)
        for fire in fires:
            suffix, epoch, seconds = self._write(fire)
            self._schedules.append(member.name)
            self._fire_epochs.append(epoch)
            self._fire_floats.append(seconds)
            if member.jitter is None:
                self._run_epochs.append(epoch)
            else:
                offset = jitter_offset(member.name, fire, member.jitter)
                self._run_epochs.append(repr((fire + offset).timestamp()))
            self.unique_keys.append(prefix + suffix)
            self._kinds.append(member.kind)
            self._hashes.append(member.definition_hash)
            self._missed.append(flag)
            self._template_of.append(template)
        self._used.add(member.template)
        if member.overlap != "allow":
            self._overlap.add(member.name)
        if member.overlap == "cancel_other":
            self._cancelling.add(member.name)

    def _write(self, fire: datetime) -> tuple[str, str, float]:
        """A fire time's key suffix, epoch literal and epoch, written once per tick."""
        if fire not in self._written:
            seconds = fire.timestamp()
            self._written[fire] = (unique_key_suffix(fire), repr(seconds), seconds)
        return self._written[fire]

    def claim(self, conn: psycopg.Connection[Any], replica: str) -> Claims:
        """Claim the periods, insert the jobs of those enqueued, then pause and cancel."""
        claims = Claims()
        if not self.unique_keys:
            return claims
        with conn.transaction():
            conn.execute(history_sql.HISTORY_CLAIM_SETTINGS)
            _take_turn(conn)
            if self._overlap:
                conn.execute(
                    history_sql.HISTORY_LOCK_OVERLAP, {"names": text_array(sorted(self._overlap))}
                )
            rows = _claim_rows(conn, self._params(replica))
            decided = {(name, epoch): (out, job, why) for name, epoch, out, job, why in rows}
            answers = [decided.get(period, _NONE) for period in self._periods()]
            inserted = self._insert_jobs(conn, answers)
            self._sort_out(conn, claims, answers, inserted)
            _apart(
                conn,
                "pause after failures",
                lambda: self._pause_failing(conn, claims, decided, replica),
            )
            _apart(conn, "cancel_other", lambda: self._cancel_others(conn, claims, decided))
        return claims

    def _periods(self) -> zip[tuple[str, float]]:
        """Each period as the claim statement returns it: (schedule, fire time's epoch)."""
        return zip(self._schedules, self._fire_floats, strict=True)

    def _insert_jobs(
        self, conn: psycopg.Connection[Any], answers: list[_Decision]
    ) -> set[int] | None:
        """Insert the jobs of the periods this claim enqueued; return their ids, or None
        when it inserted every one (all but a rare case: see PERIOD_JOBS_INSERT). First as
        new jobs only (no speculative insertion), then, if some period's job exists
        already, with ON CONFLICT."""
        ids = [job_id if outcome == "enqueued" else None for outcome, job_id, _ in answers]
        wanted = [job_id for job_id in ids if job_id is not None]
        if not wanted:
            return set()
        params = self.jobs_params(ids)
        try:
            with conn.transaction():  # a savepoint: the refused first try writes nothing
                conn.execute(enqueue_sql.PERIOD_JOBS_INSERT_NEW, params, prepare=False)
            return None
        except psycopg.errors.UniqueViolation:
            pass
        row = conn.execute(enqueue_sql.PERIOD_JOBS_INSERT, params, prepare=False)
        (count,) = row.fetchone() or (0,)
        if count == len(wanted):
            return None
        present = conn.execute(
            enqueue_sql.PERIOD_JOBS_PRESENT, {"ids": number_array(map(str, wanted))}
        )
        return {job_id for (job_id,) in present}

    def jobs_params(self, ids: list[int | None]) -> dict[str, str]:
        """``PERIOD_JOBS_INSERT``'s parameters: each period's job id (None: no job now)
        beside the columns of every period, which ``prepare`` writes ahead of time."""
        if self._jobs_columns is None:
            self._jobs_columns = self._write_jobs_columns()
        shown = ["NULL" if job_id is None else str(job_id) for job_id in ids]
        return {"ids": number_array(shown), **self._jobs_columns}

    def _write_jobs_columns(self) -> dict[str, str]:
        position = {number: str(n + 1) for n, number in enumerate(sorted(self._used))}
        return {
            "kinds": text_array(self._kinds),
            "run_epochs": number_array(self._run_epochs),
            "unique_keys": text_array(self.unique_keys),
            "templates": number_array(position[number] for number in self._template_of),
            **self._template_params(),
        }

    def _sort_out(
        self,
        conn: psycopg.Connection[Any],
        claims: Claims,
        answers: list[_Decision],
        inserted: set[int] | None,
    ) -> None:
        """File each period by what the statement decided (``answers``, in period order;
        ``inserted``: the jobs inserted, None for all); link the jobs others inserted."""
        unlinked: list[int] = []
        filed = {"skipped": claims.skipped, "buffered": claims.buffered, "missed": claims.missed}
        for index, (outcome, job_id, _) in enumerate(answers):
            key = self.unique_keys[index]
            if outcome is not None and outcome in filed:
                filed[outcome].append(key)
            elif outcome is not None or self._missed[index] == "f":
                new = job_id is not None and (inserted is None or job_id in inserted)
                if outcome == "enqueued" and not new:
                    unlinked.append(index)
                self._count(claims, self._schedules[index], key, new)
        if unlinked:
            self._link(conn, unlinked)
        for keys in (claims.inserted, claims.existing, claims.skipped, claims.missed):
            keys.sort()
        claims.buffered.sort()

    def _pause_failing(
        self,
        conn: psycopg.Connection[Any],
        claims: Claims,
        decided: dict[tuple[str, float], _Decision],
        replica: str,
    ) -> None:
        """Pause the schedules whose period this claim skipped for failures."""
        names = sorted({name for (name, _), (_, _, why) in decided.items() if why == "failures"})
        if names:
            params = {"names": text_array(names), "by": replica}
            rows = conn.execute(schedule_sql.SCHEDULES_PAUSE_AFTER_FAILURES, params).fetchall()
            claims.paused = sorted(name for name, _ in rows)

    def _cancel_others(
        self,
        conn: psycopg.Connection[Any],
        claims: Claims,
        decided: dict[tuple[str, float], _Decision],
    ) -> None:
        """overlap = "cancel_other": the live jobs that this claim's new periods replace."""
        if not self._cancelling:
            return
        new = {
            name: job_id
            for (name, _), (outcome, job_id, _) in decided.items()
            if outcome == "enqueued" and job_id is not None and name in self._cancelling
        }
        if not new:
            return
        names = sorted(new)
        kinds = {self._schedules[i]: self._kinds[i] for i in range(len(self._schedules))}
        params = {
            "schedules": text_array(names),
            "kinds": text_array([kinds[name] for name in names]),
            "keep": number_array(str(job_id) for job_id in new.values()),
            "reason": "cancelled: a later period of its schedule replaced it (cancel_other)",
        }
        rows = conn.execute(enqueue_sql.PERIOD_JOBS_CANCEL_OTHERS, params, prepare=False)
        claims.cancelled = sorted(job_id for job_id, _ in rows)

    @staticmethod
    def _count(claims: Claims, name: str, key: str, inserted: bool) -> None:
        """File one due period enqueued now or before (by this or another writer)."""
        new, old = claims.counts.get(name, (0, 0))
        if inserted:
            claims.inserted.append(key)
            claims.counts[name] = (new + 1, old)
        else:
            claims.existing.append(key)
            claims.counts[name] = (new, old + 1)

    def _link(self, conn: psycopg.Connection[Any], indexes: list[int]) -> None:
        """Point history rows at the jobs another writer inserted for their periods."""
        conn.execute(
            history_sql.HISTORY_LINK_EXISTING_JOBS,
            {
                "schedules": text_array([self._schedules[i] for i in indexes]),
                "fire_epochs": number_array(self._fire_epochs[i] for i in indexes),
                "kinds": text_array([self._kinds[i] for i in indexes]),
                "unique_keys": text_array([self.unique_keys[i] for i in indexes]),
            },
            prepare=False,
        )

    def prepare(self, replica: str) -> None:
        """Write the statements' parameters now (ahead of the fire time), not at claim time."""
        self._written_params = (replica, self._params(replica))
        self._jobs_columns = self._write_jobs_columns()

    def _params(self, replica: str) -> dict[str, str]:
        if self._written_params is not None and self._written_params[0] == replica:
            return self._written_params[1]
        return {
            "schedules": text_array(self._schedules),
            "fire_epochs": number_array(self._fire_epochs),
            "kinds": text_array(self._kinds),
            "hashes": text_array(self._hashes),
            "missed": number_array(self._missed),
            "ranks": number_array(self._ranks),
            "by": replica,
        }

    def _template_params(self) -> dict[str, str]:
        """What the templates in use hold, by position (1, 2, ...) in template number order."""
        used = [self._templates[number] for number in sorted(self._used)]
        return {  # payloads and queues as JSON arrays (PERIOD_JOBS_INSERT says why)
            "payloads": "[" + ",".join(t.payload for t in used) + "]",
            "max_attempts": number_array([str(t.max_attempts) for t in used]),
            "keep_seconds": number_array([repr(t.keep_seconds) for t in used]),
            "queues": json.dumps([t.queue for t in used]),
            "priorities": number_array([str(t.priority) for t in used]),
            "tags": json.dumps([None if t.tags is None else text_array(t.tags) for t in used]),
        }


_Decision = tuple[str | None, int | None, str | None]  # (outcome, job id, reason)
_NONE: _Decision = (None, None, None)
_RANKS = [str(rank) for rank in range(64)]


def _claim_rows(conn: psycopg.Connection[Any], params: dict[str, str]) -> list[Any]:
    """The claim's history rows: first as new periods only (no speculative insertion), then,
    if some period has a row already (a race, a missed period found on time), with ON
    CONFLICT. Either way the rows this claim wrote; never prepared (a generic plan cannot
    see how many periods there are)."""
    try:
        with conn.transaction():  # a savepoint: the refused first try writes nothing
            first = history_sql.HISTORY_CLAIM_NEW_PERIODS
            return conn.execute(first, params, prepare=False).fetchall()
    except psycopg.errors.UniqueViolation:
        pass
    return conn.execute(history_sql.HISTORY_CLAIM_PERIODS, params, prepare=False).fetchall()


def _take_turn(conn: psycopg.Connection[Any]) -> None:
    """Wait (2 s at most) for other replicas' claims to end; past that, claim alongside."""
    try:
        with conn.transaction():  # a savepoint: a wait that times out must not end the claim
            conn.execute(history_sql.HISTORY_WAIT_TURN)
    except psycopg.errors.LockNotAvailable:
        pass


def release_buffered(conn: psycopg.Connection[Any], replica: str) -> list[str]:
    """Enqueue each waiting period (``buffer_one``) whose schedule's live jobs have ended.

    Returns the unique keys of the jobs inserted. Safe on every replica at once: the history
    row is taken by one of them.
    """
    params = {
        "by": replica,
        "default_max_attempts": payloads.DEFAULT_MAX_ATTEMPTS,
        "keep_extra": ON_TIME + timedelta(minutes=1),
    }
    with conn.transaction():
        rows = conn.execute(history_sql.HISTORY_RELEASE_BUFFERED, params).fetchall()
    return sorted(key for _, key in rows)


def _apart(conn: psycopg.Connection[Any], rule: str, step: Callable[[], None]) -> None:
    """Run a rule's statement in a savepoint of the claim: refused (a role without the
    grant, a row-level policy), it is logged and tried again next tick, and the periods of
    every schedule are still claimed; a lost connection still ends the tick."""
    try:
        with conn.transaction():
            step()
    except psycopg.Error as exc:
        if is_connection_failure(exc, conn):
            raise
        first = str(exc).strip().partition("\n")[0][:500]
        log.error("%s was refused this tick, the periods kept: %s", rule, first)
