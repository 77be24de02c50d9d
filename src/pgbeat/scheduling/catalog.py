"""A scheduler replica's copy of ``pgbeat_schedules``, grouped so a tick looks at due ones only.

Schedules that fire alike (same cron or interval, zone and catch-up policy) form a group: a
tick finds all of them due or none, so they share one computation of their fire times and
one next fire time. Groups wait in a heap by their next fire, so a tick with nothing due
costs a look at the heap's top, however many schedules there are.

The copy follows the table by asking for the rows written by the transactions that the
previous look could not see: those in progress then and those begun since (from that
look's ``pg_current_snapshot()``). A change is seen once it commits, also one made in a
transaction that began long before, and a long transaction elsewhere on the server does
not make every look read old rows again. Deleted schedules stay as tombstones long enough
to be seen going. A schedule that is new or changed starts in a group of its own,
with no last tick (its first tick looks back over its catch-up window, as a restarted
replica would), and joins its policy's group after that tick.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import operator
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgbeat.db.guarded import DECODE_ERRORS, guard, unreadable
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.scheduling.definition import DEFINITION_COLUMNS
from pgbeat.scheduling.groups import (
    Definition,
    Group,
    Member,
    Policy,
    Template,
    Templates,
    gaps_of,
)
from pgbeat.scheduling.schedule import is_schedule_name, timing_fields
from pgbeat.scheduling.state import validated_schedule

log = logging.getLogger("pgbeat.scheduler")


class _Validated:
    """The definitions one read of the table has validated, for the rows after them.

    A row equal to one of them in every definition column but name and payload needs no
    model once its name passes the model's rules; one that differs from one of them only
    in its cron and zone as well, once those pass their fields' rules (``timing_fields``).
    A validation per row was a large share of a start-up (docs/benchmarks.md), whose rows are
    mostly such: one report per customer, at the customer's hour, in the customer's zone.
    """

    def __init__(self) -> None:
        self.by_columns: dict[tuple[Any, ...], Definition] = {}
        self.by_rest: dict[tuple[Any, ...], Definition] = {}  # all but cron and timezone

    def known(self, row: Mapping[str, Any]) -> Definition | None:
        """A definition validated already that ``row``'s is equal to, or a retiming of."""
        definition = self.by_columns.get(_shared(row))
        if definition is not None:
            return definition
        like = self.by_rest.get(_rest_of(row))
        timing = None if like is None else timing_fields(row["cron"], row["timezone"])
        if like is None or timing is None:
            return None
        return like.retimed(*timing)

    def add(self, row: Mapping[str, Any], definition: Definition) -> None:
        self.by_columns[_shared(row)] = definition
        self.by_rest.setdefault(_rest_of(row), definition)


def _readable_schedule(
    row: Mapping[str, Any], guarded: bool, validated: _Validated
) -> tuple[Definition | None, str | None]:
    """The row's definition, or None and why: a value Python cannot hold (only a guarded
    read can return one), or a definition that does not validate (or nests too deep to)."""
    problem = unreadable(row) if guarded else None
    if problem is not None:
        return None, problem
    kind = row.get("payload_type")  # the payload travels as text (SCHEDULES_ALL says why)
    if kind is not None and kind != "object":
        return None, f"payload: must be a JSON object, not {_ARTICLE.get(kind, 'a')} {kind}"
    definition = validated.known(row)
    if definition is not None and is_schedule_name(row["name"]):
        return definition, None
    try:  # the model itself: for its one-line reason when the row is invalid
        schedule, problem = validated_schedule(row)
        if schedule is None:
            return None, problem
        definition = Definition.of(schedule)
        validated.add(row, definition)
        return definition, None
    except _ROW_ERRORS as exc:
        return None, _row_error(exc)


# The definition columns that a row's Definition depends on (all but the payload), as a
# tuple; and the same but cron and timezone, with whether cron is set (the model's rule
# of one of cron and every).
_SHARED = tuple(column for column in DEFINITION_COLUMNS if column != "payload")
_shared = operator.itemgetter(*_SHARED)
_rest = operator.itemgetter(*(c for c in _SHARED if c not in ("cron", "timezone")))


def _rest_of(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (*_rest(row), row["cron"] is None)


_ARTICLE = {"array": "an"}

# What a row whose values decoded can still raise on its way through the model and into
# a Definition (the payload is not decoded: it goes to the jobs as the text it is).
_ROW_ERRORS = (ValueError, TypeError, OverflowError, RecursionError)


def _row_error(exc: BaseException) -> str:
    return f"cannot be read: {type(exc).__name__}: {str(exc)[:200]}"


class Catalog:
    """The schedules of the table, by group, with the heap of their next fire times."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._settled: dict[Policy, Group] = {}  # groups that have ticked
        self._fresh: dict[Policy, Group] = {}  # new and changed schedules, not ticked yet
        self._group_of: dict[str, Group] = {}
        self._heap: list[tuple[datetime, int, Group]] = []
        self._order = itertools.count()
        self.templates = Templates()
        self.snapshot: tuple[str, list[str]] | None = None  # (xmax, xip) of the last look
        self.changes = getattr(self, "changes", 0) + 1  # counts every change to the copy
        self.invalid: dict[str, str] = {}  # rows that do not validate, and why
        self.buffering: set[str] = set()  # schedules with overlap = "buffer_one"
        self.deadlines: set[str] = set()  # schedules with a deadline (lateness.py)

    def __len__(self) -> int:
        return len(self._group_of)

    def __contains__(self, name: object) -> bool:
        return name in self._group_of

    def names(self) -> list[str]:
        return sorted(self._group_of)

    def member(self, name: str) -> Member | None:
        """The schedule ``name`` as this replica runs it, if it does."""
        group = self._group_of.get(name)
        return None if group is None else group.members[name]

    def kind(self, name: str) -> str | None:
        member = self.member(name)
        return None if member is None else member.kind

    def longest_catch_up_window(self) -> timedelta | None:
        """The longest catch-up window of the schedules in the copy (None: no schedule)."""
        windows = [
            policy.catch_up_window for groups in (self._settled, self._fresh) for policy in groups
        ]
        return max(windows, default=None)

    def load(self, conn: psycopg.Connection[Any]) -> None:
        """Replace the copy with every live row of the table (at start).

        A row with a value Python cannot hold (``guarded``) fails the fast read; the table
        is then read again value by value, and that row skipped by name.
        """
        try:
            self._load(conn, guarded=False)
        except DECODE_ERRORS:
            self._load(conn, guarded=True)

    def _load(self, conn: psycopg.Connection[Any], *, guarded: bool) -> None:
        self._reset()
        # streamed (a server-side cursor): the whole result at once would double the memory
        with (
            conn.transaction(),
            conn.cursor("pgbeat_schedules_load", row_factory=dict_row) as cursor,
        ):
            if guarded:
                guard(cursor)
            cursor.itersize = 2000
            cursor.execute(schedule_sql.SCHEDULES_ALL)
            self._apply_rows(cursor, guarded)

    def refresh(self, conn: psycopg.Connection[Any]) -> int:
        """Apply the rows written since the last look; return how many schedules changed.

        Read value by value (``guarded``): a few rows, and one that Python cannot hold
        is skipped by name instead of stopping the replica.
        """
        if self.snapshot is None:
            self.load(conn)
            return len(self)
        xmax, xip = self.snapshot
        with conn.cursor(row_factory=dict_row) as cursor:
            guard(cursor)
            cursor.execute(schedule_sql.SCHEDULES_CHANGED, {"xmax": xmax, "xip": xip})
            return self._apply_rows(cursor, guarded=True)

    def take_due(self, now: datetime) -> list[Group]:
        """The groups due at ``now``: new ones, and those whose next fire has come.

        They leave the heap; ``settle`` puts them back after the tick, ticked or not.
        """
        due = list(self._fresh.values())
        taken = {id(group) for group in due}
        while self._heap and self._heap[0][0] <= now:
            fire, _, group = heapq.heappop(self._heap)
            if group.alive and group.next_fire == fire and id(group) not in taken:
                taken.add(id(group))
                due.append(group)
        return due

    def settle(
        self, groups: list[Group], now: datetime | None, next_fires: dict[Policy, datetime]
    ) -> None:
        """Back into the heap after a tick at ``now`` (None: the tick failed, nothing changed).

        ``next_fires`` holds each policy's next fire time after ``now``.
        """
        for group in groups:
            if not group.alive:
                continue
            if now is not None:
                group.last_tick, group.next_fire = now, next_fires[group.policy]
                if self._fresh.get(group.policy) is group:
                    group = self._join(group)
            if group.next_fire is not None:
                heapq.heappush(self._heap, (group.next_fire, next(self._order), group))

    def peek_due(self, at: datetime) -> list[Group] | None:
        """The groups ``take_due(at)`` would return if nothing changes, without taking them.

        None when a new group waits (it ticks at once, not at ``at``).
        """
        if self._fresh:
            return None
        found: dict[int, Group] = {}
        heap, stack = self._heap, [0]
        while stack:  # the entries at or before ``at`` form a subtree at the heap's top
            index = stack.pop()
            if index < len(heap) and heap[index][0] <= at:
                if self._is_current(heap[index]):
                    found[id(heap[index][2])] = heap[index][2]
                stack += [2 * index + 1, 2 * index + 2]
        return list(found.values())

    def next_fire(self) -> datetime | None:
        """The earliest next fire time of any group (None when a new one waits to tick)."""
        if self._fresh:
            return None
        while self._heap and not self._is_current(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _is_current(self, entry: tuple[datetime, int, Group]) -> bool:
        return entry[2].alive and entry[2].next_fire == entry[0]

    def _join(self, fresh: Group) -> Group:
        """Merge a group that ticked for the first time into its policy's settled group.

        Exact: if the settled group did not tick now either, its next fire is after now,
        so no period lies between its last tick and now.
        """
        del self._fresh[fresh.policy]
        settled = self._settled.get(fresh.policy)
        if settled is None:
            self._settled[fresh.policy] = fresh
            return fresh
        for name, member in fresh.members.items():
            settled.members[name] = member
            self._group_of[name] = settled
        fresh.alive = False
        return settled

    def _apply_rows(self, rows: Iterable[dict[str, Any]], guarded: bool) -> int:
        """Bring the schedules' rows into the copy and take the snapshot's (SCHEDULES_ALL
        and SCHEDULES_CHANGED); return how many schedules changed."""
        validated, changed = _Validated(), 0
        for row in rows:
            if row["snapshot_xmax"] is not None:
                self.snapshot = (row["snapshot_xmax"], row["snapshot_xip"])
            else:
                changed += self._apply(row, guarded, validated)
        return changed

    def _apply(self, row: dict[str, Any], guarded: bool, validated: _Validated) -> int:
        """Bring one row into the copy; 1 when the schedules changed, else 0."""
        if isinstance(row.get("tags"), list):  # hashable, as _Validated's keys must be
            row["tags"] = tuple(row["tags"])
        changed = self._change(row, guarded, validated)
        self.changes += changed
        return changed

    def _change(self, row: dict[str, Any], guarded: bool, validated: _Validated) -> int:
        name = row["name"]
        group = self._group_of.get(name)
        member = None if group is None else group.members[name]
        if row["deleted_at"] is not None:
            self.invalid.pop(name, None)
            return self._remove(name) if member is not None else 0
        definition, problem = _readable_schedule(row, guarded, validated)
        if definition is None:
            if member is not None:
                self._remove(name)
            self._report_invalid(name, problem or "invalid")
            return 1
        template = definition.template(row["payload_text"])
        if member is not None and member.definition_hash == row["definition_hash"]:
            assert group is not None
            if self._same(member, group, definition, template):
                gaps = gaps_of(row)  # a pause or resume: same periods
                if gaps != member.gaps:
                    member.gaps = gaps
                    self.changes += 1
                return 0
            # The definition changed under an unchanged hash (edited with SQL): the row's
            # definition is the one to run, here as on every replica that loads it.
            log.warning(
                "schedule %r: its definition changed but its definition_hash did not "
                "(edited with SQL?); running the definition in the row",
                name,
            )
        if member is not None:
            self._remove(name)
        self._add(name, definition, template, row)
        self.invalid.pop(name, None)
        return 1

    def _same(
        self, member: Member, group: Group, definition: Definition, template: Template
    ) -> bool:
        """Whether ``definition`` has the periods and jobs that ``member`` (of ``group``) has.

        Everything ``_add`` takes from a definition is compared here.
        """
        return (
            group.policy == definition.policy
            and member.kind == definition.kind
            and member.jitter == definition.jitter
            and member.overlap == definition.overlap
            and self.templates.by_number[member.template] == template
        )

    def _add(
        self, name: str, definition: Definition, template: Template, row: Mapping[str, Any]
    ) -> None:
        group = self._fresh.get(definition.policy)
        if group is None:
            group = self._fresh[definition.policy] = Group(definition.policy)
        group.members[name] = Member(
            name,
            definition.kind,
            definition.jitter,
            definition.overlap,
            row["definition_hash"],
            self.templates.take(template),
            gaps_of(row),
            row["created_at"],
        )
        self._group_of[name] = group
        if definition.overlap == "buffer_one":
            self.buffering.add(name)
        if definition.deadline is not None:
            self.deadlines.add(name)

    def _remove(self, name: str) -> int:
        self.buffering.discard(name)
        self.deadlines.discard(name)
        group = self._group_of.pop(name)
        self.templates.release(group.members.pop(name).template)
        if not group.members:
            group.alive = False
            for groups in (self._fresh, self._settled):
                if groups.get(group.policy) is group:
                    del groups[group.policy]
        return 1

    def _report_invalid(self, name: str, problem: str) -> None:
        if self.invalid.get(name) != problem:
            log.warning("schedule %r in pgbeat_schedules is invalid, skipped: %s", name, problem)
        self.invalid[name] = problem
