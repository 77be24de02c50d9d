"""Which periods a tick claims: worked out at the tick, or ahead of it while the loop waits.

A plan is the claim statement's batch and, for each due group, its due and missed periods
and its next fire. Planning the next fire time ahead moves the Python work of 10,000
periods before the fire instead of after it, on every replica at once; a plan made ahead
is used only when the tick finds exactly what it was made for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pgbeat.scheduling.catalog import Catalog
from pgbeat.scheduling.catchup import ON_TIME, due_periods, missed_periods
from pgbeat.scheduling.fires import ScanStarts, fire_times_between, next_fire_after
from pgbeat.scheduling.groups import Group, Policy
from pgbeat.scheduling.periods import PeriodBatch
from pgbeat.scheduling.timing import Timed

AHEAD = timedelta(seconds=2)  # plan the next fire time when at least this far ahead
MISSED_LIMIT = 100  # missed periods recorded per schedule and tick, the latest ones

GroupPeriods = tuple[Group, Sequence[datetime], Sequence[datetime]]  # (group, due, missed)


@dataclass(frozen=True)
class Plan:
    """The periods of one tick, ready to claim."""

    at: datetime  # the time they were worked out for
    changes: int  # the catalog's change count then
    groups: list[Group]
    batch: PeriodBatch
    periods: list[GroupPeriods]  # the groups with due or missed periods
    next_fires: dict[Policy, datetime]  # each group's next fire after ``at``

    def fits(self, catalog: Catalog, groups: list[Group], now: datetime) -> bool:
        """Whether a tick at ``now`` with these due ``groups`` would make this same plan.

        True when nothing changed, the groups are the same, and ``now`` is still before
        each group's following fire and within the on-time margin of ``at``.
        """
        if self.changes != catalog.changes:
            return False
        until = min([self.at + ON_TIME, *self.next_fires.values()])
        same = {id(g) for g in groups} == {id(g) for g in self.groups}
        return same and self.at <= now < until


def plan(catalog: Catalog, groups: list[Group], at: datetime) -> Plan:
    """The periods of ``groups`` due at ``at``."""
    memo, batch = _FireMemo(), PeriodBatch(catalog.templates.by_number)
    periods: list[GroupPeriods] = []
    next_fires: dict[Policy, datetime] = {}
    for group in groups:
        due, missed, next_fires[group.policy] = _periods_of(group, at, memo)
        if due or missed:
            batch.add(group, due, missed)
            periods.append((group, due, missed))
    return Plan(at, catalog.changes, groups, batch, periods, next_fires)


def plan_ahead(
    catalog: Catalog, fire: datetime | None, now: datetime, replica: str, made: Plan | None
) -> Plan | None:
    """A plan for the next fire time ``fire``, if it is far enough ahead; ``made`` if it fits.

    Only with ``AHEAD`` to spare, so that planning never makes a period late. The claim
    statement's parameters are written now too.
    """
    if made is not None and made.at == fire and made.changes == catalog.changes:
        return made  # also when the fire time is near now: it was made in time
    if fire is None or fire - now < AHEAD:
        return None
    groups = catalog.peek_due(fire)
    if not groups:
        return None
    ahead = plan(catalog, groups, fire)
    ahead.batch.prepare(replica)
    return ahead


def _periods_of(
    group: Group, now: datetime, memo: _FireMemo
) -> tuple[Sequence[datetime], Sequence[datetime], datetime]:
    """A group's due and missed periods at ``now``, and its next fire after ``now``.

    One fire-time computation when its window holds no period: the common case for a
    group that has not ticked yet (a replica's start: tens of thousands of them).
    """
    timing = group.policy
    window_start = now - timing.catch_up_window
    since = window_start if group.last_tick is None else max(group.last_tick, window_start)
    first = memo.next_after(timing, since)
    if first > now:
        return (), (), first  # no list: tens of thousands of them at a start
    due = due_periods(timing, group.last_tick, now, memo.between)
    missed = missed_periods(timing, group.last_tick, now, due, MISSED_LIMIT, memo.between)
    return due, missed, memo.next_after(timing, now)


class _FireMemo:
    """Fire times within one tick, shared by groups with the same timing.

    They depend only on the timing (cron or every, zone), and every schedule ticks with
    the same bounds, so groups that differ only in their catch-up policy compute them once.
    """

    def __init__(self) -> None:
        self._between: dict[tuple[Any, ...], list[datetime]] = {}
        self._next: dict[tuple[Any, ...], datetime] = {}
        self._scan_starts: ScanStarts = {}  # shared by every timing: one per zone

    def between(self, timing: Timed, start: datetime, end: datetime) -> list[datetime]:
        key = (timing.cron, timing.every, timing.zone, start, end)
        if key not in self._between:
            self._between[key] = fire_times_between(timing, start, end)
        return self._between[key]

    def next_after(self, timing: Timed, after: datetime) -> datetime:
        key = (timing.cron, timing.every, timing.zone, after)
        if key not in self._next:
            self._next[key] = next_fire_after(timing, after, self._scan_starts)
        return self._next[key]
