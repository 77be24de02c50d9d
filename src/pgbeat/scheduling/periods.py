"""One tick's periods as the columns of the claim statement, and what became of each.

The statement (``HISTORY_CLAIM_PERIODS``) decides every period's outcome and inserts the
jobs; this module writes its arrays cheaply for 10,000 periods (a key is a schedule's
prefix plus a fire time's suffix, what schedules share travels once per template, each
column is one array literal) and reads its answer back, period by period.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from pgbeat.db import schedule_queries as q
from pgbeat.db.literals import number_array, text_array
from pgbeat.scheduling.catalog import Group, Member, Template, outside
from pgbeat.scheduling.jitter import jitter_offset
from pgbeat.scheduling.schedule import unique_key_suffix


@dataclass
class Claims:
    """What the claim statement did with each period, by unique key, sorted."""

    inserted: list[str] = field(default_factory=list)  # enqueued, job inserted now
    existing: list[str] = field(default_factory=list)  # enqueued before (or by another writer)
    skipped: list[str] = field(default_factory=list)  # paused, or overlap
    missed: list[str] = field(default_factory=list)  # dropped by the catch-up policy
    # per schedule: (inserted, existing) due periods, for the metrics
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)


class PeriodBatch:
    """The periods of one tick, member by member, in the statement's columns."""

    def __init__(self, templates: dict[int, Template]) -> None:
        self._templates = templates
        self._schedules: list[str] = []
        self._fire_epochs: list[str] = []
        self._run_epochs: list[str] = []
        self.unique_keys: list[str] = []
        self._kinds: list[str] = []
        self._hashes: list[str] = []
        self._missed: list[str] = []
        self._later: list[str] = []  # "t": an earlier due period of its schedule is in the batch
        self._template_of: list[str] = []
        self._used: set[int] = set()
        self._overlap: set[str] = set()  # schedules whose claims must take turns
        self._written_params: tuple[str, dict[str, str]] | None = None
        self._written: dict[datetime, tuple[str, str]] = {}

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
        template = str(member.template)
        prefix = member.name + "@"
        if not missed and fires:
            self._later += ["f"] + ["t"] * (len(fires) - 1)  # due fires come oldest first
        elif fires:
            self._later += ["f"] * len(fires)
        for fire in fires:
            suffix, epoch = self._write(fire)
            self._schedules.append(member.name)
            self._fire_epochs.append(epoch)
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
        if member.overlap == "skip":
            self._overlap.add(member.name)

    def _write(self, fire: datetime) -> tuple[str, str]:
        """A fire time's key suffix and epoch literal, written once per tick."""
        if fire not in self._written:
            self._written[fire] = (unique_key_suffix(fire), repr(fire.timestamp()))
        return self._written[fire]

    def claim(self, conn: psycopg.Connection[Any], replica: str) -> Claims:
        """Run the claim statement; link periods whose job another writer inserted.

        Never prepared: a generic plan cannot see how many periods there are.
        """
        claims = Claims()
        if not self.unique_keys:
            return claims
        with conn.transaction():
            _take_turn(conn)
            if self._overlap:
                conn.execute(q.HISTORY_LOCK_OVERLAP, {"names": text_array(sorted(self._overlap))})
            rows = conn.execute(q.HISTORY_CLAIM_PERIODS, self._params(replica), prepare=False)
            decided = {(name, epoch): (out, new) for name, epoch, out, _, new in rows}
            self._sort_out(conn, claims, decided)
        return claims

    def _sort_out(
        self,
        conn: psycopg.Connection[Any],
        claims: Claims,
        decided: dict[tuple[str, float], tuple[str, bool]],
    ) -> None:
        """File each period by what the statement decided; link the jobs others inserted."""
        unlinked: list[int] = []
        for index, key in enumerate(self.unique_keys):
            name = self._schedules[index]
            outcome, inserted = decided.get((name, float(self._fire_epochs[index])), (None, False))
            if outcome == "enqueued" and not inserted:
                unlinked.append(index)
            self._count(claims, index, key, outcome, inserted)
        if unlinked:
            self._link(conn, unlinked)
        for keys in (claims.inserted, claims.existing, claims.skipped, claims.missed):
            keys.sort()

    def _count(
        self, claims: Claims, index: int, key: str, outcome: str | None, inserted: bool
    ) -> None:
        """File one period of the answer; ``outcome`` None: another writer decided it."""
        if outcome == "skipped":
            claims.skipped.append(key)
        elif outcome == "missed":
            claims.missed.append(key)
        elif outcome is not None or self._missed[index] == "f":
            name = self._schedules[index]
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
            q.HISTORY_LINK_EXISTING_JOBS,
            {
                "schedules": text_array([self._schedules[i] for i in indexes]),
                "fire_epochs": number_array(self._fire_epochs[i] for i in indexes),
                "kinds": text_array([self._kinds[i] for i in indexes]),
                "unique_keys": text_array([self.unique_keys[i] for i in indexes]),
            },
            prepare=False,
        )

    def prepare(self, replica: str) -> None:
        """Write the statement's parameters now (ahead of the fire time), not at claim time."""
        self._written_params = (replica, self._params(replica))

    def _params(self, replica: str) -> dict[str, str]:
        if self._written_params is not None and self._written_params[0] == replica:
            return self._written_params[1]
        numbers = sorted(self._used)
        used = [self._templates[number] for number in numbers]
        return {
            "schedules": text_array(self._schedules),
            "fire_epochs": number_array(self._fire_epochs),
            "run_epochs": number_array(self._run_epochs),
            "unique_keys": text_array(self.unique_keys),
            "kinds": text_array(self._kinds),
            "hashes": text_array(self._hashes),
            "missed": number_array(self._missed),
            "later": number_array(self._later),
            "templates": number_array(self._template_of),
            "template_numbers": number_array([str(number) for number in numbers]),
            "payloads": text_array([t.payload for t in used]),
            "max_attempts": number_array([str(t.max_attempts) for t in used]),
            "keep_seconds": number_array([repr(t.keep_seconds) for t in used]),
            "by": replica,
        }


def _take_turn(conn: psycopg.Connection[Any]) -> None:
    """Wait (2 s at most) for other replicas' claims to end; past that, claim alongside."""
    try:
        with conn.transaction():  # a savepoint: a wait that times out must not end the claim
            conn.execute(q.HISTORY_WAIT_TURN)
    except psycopg.errors.LockNotAvailable:
        pass
