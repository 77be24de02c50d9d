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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg

from pgbeat import queries, queue
from pgbeat.catchup import due_periods, keep_for
from pgbeat.db import Connector, OutageLog, is_connection_failure
from pgbeat.heartbeat import Heartbeat
from pgbeat.metrics import Metrics
from pgbeat.schedule import Schedule, fire_times_between, next_fire_after, unique_key

log = logging.getLogger("pgbeat.scheduler")

MAX_SLEEP = timedelta(seconds=5)  # wake at least this often, whatever the schedules say


@dataclass
class _State:
    schedule: Schedule
    last_tick: datetime | None = None
    next_fire: datetime | None = None


class Period(NamedTuple):
    """One period of one schedule: the job to insert."""

    schedule: Schedule
    fire_at: datetime
    unique_key: str


@dataclass(frozen=True)
class TickResult:
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
        self._states = [_State(s) for s in schedules if s.enabled]
        self._connector = Connector(url, "pgbeat-scheduler")
        self._stopping = threading.Event()
        self._outage = OutageLog(url, log, lambda: self._metrics.reconnected("scheduler"))
        self.stopped = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        """Tick until ``stop()``; survives database outages and catches up afterwards."""
        if self._heartbeat is not None:
            self._heartbeat.start()
        names = ", ".join(s.schedule.name for s in self._states) or "none"
        log.info("scheduler started with %d schedules: %s", len(self._states), names)
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
            now = queue.database_now(conn)
            result = self.tick(conn, now)
        except Exception as exc:
            if not is_connection_failure(exc):
                raise
            self._connector.discard()
            return self._outage.failed(exc)
        self._outage.succeeded()
        return _sleep_seconds(now, result.next_fire, time.monotonic() - started)

    def tick(self, conn: psycopg.Connection[Any], now: datetime) -> TickResult:
        """Insert every period due at ``now`` (the database's clock) in one statement."""
        memo = _FireMemo()
        due_states = [s for s in self._states if _is_due(s, now)]
        periods = [
            Period(state.schedule, fire, unique_key(state.schedule, fire))
            for state in due_states
            for fire in due_periods(state.schedule, state.last_tick, now, memo.between)
        ]
        inserted = insert_periods(conn, periods)
        existing = self._report(periods, inserted)
        for state in due_states:
            state.last_tick = now
            state.next_fire = memo.next_after(state.schedule, now)
        fires = [s.next_fire for s in self._states if s.next_fire is not None]
        return TickResult(sorted(inserted), existing, min(fires) if fires else None)

    def _report(self, periods: Sequence[Period], inserted: set[str]) -> list[str]:
        """Log and count each period as new or already present; return the present keys."""
        existing = [p.unique_key for p in periods if p.unique_key not in inserted]
        for schedule, _, key in periods:
            is_new = key in inserted
            if log.isEnabledFor(logging.INFO if is_new else logging.DEBUG):
                fields = {"schedule": schedule.name, "kind": schedule.kind, "unique_key": key}
                if is_new:
                    log.info("enqueued %s", key, extra=fields)
                else:
                    log.debug("already enqueued %s", key, extra=fields)
            self._metrics.periods(schedule.name, int(is_new), int(not is_new))
        return existing


class _FireMemo:
    """Fire times within one tick, shared by schedules with the same timing.

    They depend only on (cron, every, timezone), and every schedule ticks with the same
    bounds, so 10,000 schedules on a handful of expressions cost a handful of computations.
    """

    def __init__(self) -> None:
        self._between: dict[tuple[Any, ...], list[datetime]] = {}
        self._next: dict[tuple[Any, ...], datetime] = {}

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


def _is_due(state: _State, now: datetime) -> bool:
    """First tick, or the cached next fire time has come (by the database clock)."""
    return state.last_tick is None or (state.next_fire is not None and state.next_fire <= now)


def insert_periods(conn: psycopg.Connection[Any], periods: Sequence[Period]) -> set[str]:
    """Insert the jobs of these periods at once; return the unique keys that were new."""
    if not periods:
        return set()
    params: dict[str, list[Any]] = {
        "kinds": [],
        "payloads": [],
        "fire_epochs": [],
        "unique_keys": [],
        "max_attempts": [],
        "keep_seconds": [],
    }
    payload_json: dict[str, str] = {}  # one serialisation per schedule, not per period
    for schedule, fire, key in periods:
        if schedule.name not in payload_json:
            payload_json[schedule.name] = json.dumps(schedule.payload)
        params["kinds"].append(schedule.kind)
        params["payloads"].append(payload_json[schedule.name])
        params["fire_epochs"].append(fire.timestamp())
        params["unique_keys"].append(key)
        params["max_attempts"].append(schedule.max_attempts or queue.DEFAULT_MAX_ATTEMPTS)
        params["keep_seconds"].append(keep_for(schedule).total_seconds())
    rows = conn.execute(queries.JOBS_INSERT_PERIODS, params).fetchall()
    return {row[0] for row in rows}


def _sleep_seconds(now: datetime, next_fire: datetime | None, spent: float) -> float:
    """Sleep until the next fire (by the database clock), but never longer than MAX_SLEEP."""
    if next_fire is None:
        return MAX_SLEEP.total_seconds()
    until = (next_fire - now).total_seconds() - spent
    return min(max(until, 0.0), MAX_SLEEP.total_seconds())
