"""The scheduler loop: read the database clock, insert every due period, sleep until the next.

Any number of replicas run this loop on the same file. They share no state but the jobs
table: each period is inserted with ``ON CONFLICT (kind, unique_key) DO NOTHING``, so the
first replica wins and the others find it present. No leader, no lock.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg

from pgbeat import client
from pgbeat.db import connections, queries
from pgbeat.db.connections import Connector, ReconnectBackoff, is_connection_failure
from pgbeat.db.literals import number_array, text_array
from pgbeat.observe.heartbeat import Heartbeat
from pgbeat.observe.metrics import Metrics
from pgbeat.scheduling.catchup import due_periods, keep_for
from pgbeat.scheduling.schedule import (
    Schedule,
    fire_times_between,
    next_fire_after,
    unique_key_prefix,
    unique_key_suffix,
)

log = logging.getLogger("pgbeat.scheduler")

MAX_SLEEP = timedelta(seconds=5)  # wake at least this often, whatever the schedules say


class _Template(NamedTuple):
    """What a schedule's jobs have in common with other schedules' (often all of it)."""

    payload: str  # JSON
    max_attempts: int
    keep_seconds: float

    @classmethod
    def of(cls, schedule: Schedule) -> _Template:
        return cls(
            json.dumps(schedule.payload),
            schedule.max_attempts or client.DEFAULT_MAX_ATTEMPTS,
            keep_for(schedule).total_seconds(),
        )


@dataclass(eq=False)
class _Group:
    """Schedules that fire alike: the same timing and catch-up policy.

    A tick finds all of them due or none, so they share the last tick and the next fire,
    and one computation of the due periods serves them all.
    """

    schedules: list[Schedule] = field(default_factory=list)
    key_prefixes: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)  # each schedule's template number
    template_numbers: set[int] = field(default_factory=set)
    last_tick: datetime | None = None
    next_fire: datetime | None = None

    def add(self, schedule: Schedule, template: int) -> None:
        self.schedules.append(schedule)
        self.key_prefixes.append(unique_key_prefix(schedule))
        self.kinds.append(schedule.kind)
        self.templates.append(str(template))
        self.template_numbers.add(template)


@dataclass(frozen=True)
class TickResult:
    """The keys a tick inserted (sorted) and found present (by timing, then file order)."""

    inserted: list[str]
    existing: list[str]
    next_fire: datetime | None


class Scheduler:
    """Enqueues the periods of ``schedules`` into the database at ``url`` until ``stop()``."""

    def __init__(
        self,
        url: str,
        schedules: Sequence[Schedule],
        *,
        schedules_hash: str | None = None,
        metrics: Metrics | None = None,
        heartbeat: bool = True,
    ) -> None:
        self._url = url
        self._metrics = metrics or Metrics()
        self._heartbeat = (
            Heartbeat(
                url,
                "scheduler",
                schedules_hash=schedules_hash,
                details={"schedules": [s.name for s in schedules]},
            )
            if heartbeat
            else None
        )
        self._schedules = [s for s in schedules if s.enabled]
        self._groups, self._templates = _group(self._schedules)
        self._connector = Connector(url, "pgbeat-scheduler")
        self._stopping = threading.Event()
        self._outage = ReconnectBackoff(url, log, lambda: self._metrics.reconnected("scheduler"))
        self.stopped = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        """Tick until ``stop()``; survives database outages and catches up afterwards."""
        names = ", ".join(s.name for s in self._schedules) or "none"
        log.info("scheduler started with %d schedules: %s", len(self._schedules), names)
        try:
            while not self._stopping.is_set():
                self._stopping.wait(self._tick_safely())
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop()
            self._connector.close()
            log.info("scheduler stopped")
            self.stopped.set()

    def _tick_safely(self) -> float:
        """One tick; returns how long to sleep, in seconds of the monotonic clock."""
        started = time.monotonic()
        try:
            conn = self._connector.get()
            now = connections.database_now(conn)
            result = self.tick(conn, now)
            if self._heartbeat is not None:  # on the tick's connection: none of its own
                self._heartbeat.beat_if_due(conn, time.monotonic())
        except Exception as exc:
            if not is_connection_failure(exc):
                raise
            self._connector.discard()
            return self._outage.failed(exc)
        self._outage.succeeded()
        sleep = _sleep_seconds(now, result.next_fire, time.monotonic() - started)
        if self._heartbeat is not None:
            sleep = min(sleep, max(self._heartbeat.next_beat - time.monotonic(), 0.0))
        return sleep

    def tick(self, conn: psycopg.Connection[Any], now: datetime) -> TickResult:
        """Insert every period due at ``now`` (the database's clock) in one statement."""
        memo = _FireMemo()
        due_groups = [g for g in self._groups if _is_due(g, now)]
        batch = _PeriodBatch(self._templates)
        for group in due_groups:
            batch.add(group, memo.due(group, now))
        inserted = batch.insert(conn)
        existing = self._report(batch, inserted)
        for group in due_groups:
            group.last_tick = now
            group.next_fire = memo.next_after(group.schedules[0], now)
        fires = [g.next_fire for g in self._groups if g.next_fire is not None]
        return TickResult(sorted(inserted), existing, min(fires) if fires else None)

    def _report(self, batch: _PeriodBatch, inserted: set[str]) -> list[str]:
        """Log and count each period as new or already present; return the present keys.

        Metrics get one call per schedule; the loop over periods runs only when the
        logger would print them or a tick found some present and some new.
        """
        keys = batch.unique_keys
        if len(inserted) == len(keys):
            existing = []  # the keys are distinct and every one is new
        else:
            existing = [key for key in keys if key not in inserted] if inserted else keys
        verbose = log.isEnabledFor(logging.INFO) or log.isEnabledFor(logging.DEBUG)
        each_period = verbose or (bool(inserted) and bool(existing))
        for group, start, count in batch.spans:
            if each_period:
                self._report_each(group, keys, start, count, inserted, verbose=verbose)
                continue
            new = 0 if existing else count
            for schedule in group.schedules:
                self._metrics.periods(schedule.name, new, count - new)
        return existing

    def _report_each(
        self,
        group: _Group,
        keys: Sequence[str],
        start: int,
        count: int,
        inserted: set[str],
        *,
        verbose: bool,
    ) -> None:
        """Count (and log) the ``count`` periods of each schedule of ``group``, from ``start``."""
        for index, schedule in enumerate(group.schedules):
            first = start + index * count
            own = keys[first : first + count]
            new = sum(1 for key in own if key in inserted)
            self._metrics.periods(schedule.name, new, count - new)
            if verbose:
                _log_periods(schedule, own, inserted)


def _group(schedules: Iterable[Schedule]) -> tuple[list[_Group], list[_Template]]:
    """The schedules grouped by what their fire times depend on, and their distinct templates.

    A template's number is its position in the list, from 1.
    """
    groups: dict[tuple[Any, ...], _Group] = {}
    numbers: dict[_Template, int] = {}
    for s in schedules:
        policy = (s.cron, s.every, s.timezone, s.catch_up, s.catch_up_window)
        number = numbers.setdefault(_Template.of(s), len(numbers) + 1)
        groups.setdefault(policy, _Group()).add(s, number)
    return list(groups.values()), list(numbers)


def _log_periods(schedule: Schedule, keys: Sequence[str], inserted: set[str]) -> None:
    """One line per period: INFO when it was enqueued now, DEBUG when it already was."""
    for key in keys:
        is_new = key in inserted
        if log.isEnabledFor(logging.INFO if is_new else logging.DEBUG):
            fields = {"schedule": schedule.name, "kind": schedule.kind, "unique_key": key}
            if is_new:
                log.info("enqueued %s", key, extra=fields)
            else:
                log.debug("already enqueued %s", key, extra=fields)


class _Fires(NamedTuple):
    """A group's due fire times, written as its keys and the statement need them."""

    key_suffixes: list[str]
    epochs: list[str]  # Unix seconds, as float8 array elements


class _FireMemo:
    """Fire times within one tick, shared by groups with the same timing.

    They depend only on (cron, every, timezone), and every schedule ticks with the same
    bounds, so groups that differ only in their catch-up policy compute them once.
    """

    def __init__(self) -> None:
        self._between: dict[tuple[Any, ...], list[datetime]] = {}
        self._next: dict[tuple[Any, ...], datetime] = {}
        self._written: dict[datetime, tuple[str, str]] = {}

    @staticmethod
    def _timing(schedule: Schedule) -> tuple[Any, ...]:
        return (schedule.cron, schedule.every, schedule.timezone)

    def between(self, schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
        key = (*self._timing(schedule), start, end)
        if key not in self._between:
            self._between[key] = fire_times_between(schedule, start, end)
        return self._between[key]

    def next_after(self, schedule: Schedule, after: datetime) -> datetime:
        key = (*self._timing(schedule), after)
        if key not in self._next:
            self._next[key] = next_fire_after(schedule, after)
        return self._next[key]

    def due(self, group: _Group, now: datetime) -> _Fires:
        """The periods each of the group's schedules enqueues at ``now`` (``due_periods``)."""
        fires = due_periods(group.schedules[0], group.last_tick, now, self.between)
        written = [self._write(fire) for fire in fires]
        return _Fires([suffix for suffix, _ in written], [epoch for _, epoch in written])

    def _write(self, fire: datetime) -> tuple[str, str]:
        if fire not in self._written:
            self._written[fire] = (unique_key_suffix(fire), repr(fire.timestamp()))
        return self._written[fire]


def _is_due(group: _Group, now: datetime) -> bool:
    """First tick, or the cached next fire time has come (by the database clock)."""
    return group.last_tick is None or (group.next_fire is not None and group.next_fire <= now)


class _PeriodBatch:
    """The periods of one tick, as the columns of JOBS_INSERT_PERIODS.

    Cheap for 10,000 periods: a key is a schedule's prefix plus a fire time's suffix,
    what schedules share travels once per template, and each column is one array literal
    (psycopg would encode a list element by element).
    """

    def __init__(self, templates: Sequence[_Template]) -> None:
        self._templates = templates
        self.unique_keys: list[str] = []  # each group's schedules in turn, their fires in order
        self.spans: list[tuple[_Group, int, int]] = []  # (group, first key, keys per schedule)
        self._kinds: list[str] = []
        self._epochs: list[str] = []
        self._template_of_period: list[str] = []
        self._used: set[int] = set()

    def add(self, group: _Group, fires: _Fires) -> None:
        """Append the periods ``fires`` of each of the group's schedules."""
        count = len(fires.key_suffixes)
        if not count:
            return
        self.spans.append((group, len(self.unique_keys), count))
        self.unique_keys += [p + s for p in group.key_prefixes for s in fires.key_suffixes]
        self._kinds += _repeat_each(group.kinds, count)
        self._epochs += fires.epochs * len(group.schedules)
        self._template_of_period += _repeat_each(group.templates, count)
        self._used |= group.template_numbers

    def insert(self, conn: psycopg.Connection[Any]) -> set[str]:
        """Insert the jobs of these periods at once; return the unique keys that were new.

        Never prepared: a generic plan cannot see how many periods and templates there
        are, and a nested loop joining many of both would be quadratic.
        """
        if not self.unique_keys:
            return set()
        cursor = conn.execute(queries.JOBS_INSERT_PERIODS, self._params(), prepare=False)
        return {row[0] for row in cursor}

    def _params(self) -> dict[str, str]:
        numbers = sorted(self._used)
        used = [self._templates[number - 1] for number in numbers]
        return {
            "unique_keys": text_array(self.unique_keys),
            "kinds": text_array(self._kinds),
            "fire_epochs": number_array(self._epochs),
            "templates": number_array(self._template_of_period),
            "template_numbers": number_array([str(number) for number in numbers]),
            "payloads": text_array([t.payload for t in used]),
            "max_attempts": number_array([str(t.max_attempts) for t in used]),
            "keep_seconds": number_array([repr(t.keep_seconds) for t in used]),
        }


def _repeat_each(values: list[str], count: int) -> list[str]:
    """Each value ``count`` times in a row (a schedule's column for each of its periods)."""
    return values if count == 1 else [value for value in values for _ in range(count)]


def _sleep_seconds(now: datetime, next_fire: datetime | None, spent: float) -> float:
    """Sleep until the next fire (by the database clock), but never longer than MAX_SLEEP."""
    if next_fire is None:
        return MAX_SLEEP.total_seconds()
    until = (next_fire - now).total_seconds() - spent
    return min(max(until, 0.0), MAX_SLEEP.total_seconds())
