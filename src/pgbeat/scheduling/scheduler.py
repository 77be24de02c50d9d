"""The scheduler loop: read the database clock, insert every due period, sleep until the next.

Any number of replicas run this loop. The schedules live in ``pgbeat_schedules``: each
replica writes its schedules file there on start and on reload (sync.py), keeps a copy
of the table in memory (catalog.py) and follows its changes (a NOTIFY wakes it; each tick
also asks). Each period is claimed in ``pgbeat_schedule_history`` and its job inserted in
one transaction (periods.py, claiming.py): the first replica to claim a period decides its
outcome, the others find it decided. No leader, no lock.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.background import BackgroundLoop
from pgbeat.collector import long_lived
from pgbeat.db import connections
from pgbeat.db.connections import Connector, Outage, ReconnectBackoff, is_connection_failure
from pgbeat.db.pooler import pooler
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.errors import ConfigError
from pgbeat.observe.heartbeat import Heartbeat
from pgbeat.observe.metrics import Metrics
from pgbeat.scheduling import claiming, deadlines, planning
from pgbeat.scheduling.catalog import Catalog
from pgbeat.scheduling.definition import file_hash
from pgbeat.scheduling.history_purge import HISTORY_RETENTION, HistoryPurge
from pgbeat.scheduling.lateness import Watch
from pgbeat.scheduling.lookback import LookBack
from pgbeat.scheduling.periods import Claims, release_buffered
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.sync import SyncResult, freed_by_code, needs_sync, sync_file

log = logging.getLogger("pgbeat.scheduler")

MAX_SLEEP = timedelta(seconds=5)  # wake at least this often, whatever the schedules say
FILE_CHECK_EVERY = 5.0  # seconds between checks that this replica's file is in effect
_WAIT_SLICE = 0.25  # seconds: how promptly a wait notices stop() and reload()


@dataclass(frozen=True)
class TickResult:
    """The keys of one tick's periods by what became of them (sorted), and the next fire."""

    inserted: list[str]
    existing: list[str]
    next_fire: datetime | None
    skipped: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    buffered: list[str] = field(default_factory=list)  # waiting behind a live job
    released: list[str] = field(default_factory=list)  # waited, enqueued now
    paused: list[str] = field(default_factory=list)  # schedules paused after failures
    late: list[str] = field(default_factory=list)  # periods this tick judged late


class Scheduler:
    """Enqueues the periods of the schedules in the database at ``url`` until ``stop()``.

    ``schedules`` is this replica's schedules file (synced into the table on the first
    tick), or None to run only the schedules already there (created from code or by other
    replicas). ``load`` re-reads the file for ``reload()`` (SIGHUP).
    """

    def __init__(
        self,
        url: str,
        schedules: Sequence[Schedule] | None,
        *,
        metrics: Metrics | None = None,
        heartbeat: bool = True,
        load: Callable[[], Sequence[Schedule]] | None = None,
        history_retention: timedelta = HISTORY_RETENTION,
    ) -> None:
        self._url = url
        self._metrics = metrics or Metrics()
        self._file = None if schedules is None else [s for s in schedules if s.enabled]
        self._file_hash = None if self._file is None else file_hash(self._file)
        self._load = load
        self._purge = HistoryPurge(history_retention)
        self._left_to_code: list[str] = []  # names of the file that code owned at the sync
        self._heartbeat = (
            Heartbeat(
                url,
                "scheduler",
                schedules_hash=self._file_hash,
                details={"schedules": [s.name for s in self._file or []]},
            )
            if heartbeat
            else None
        )
        self.replica = self._heartbeat.id if self._heartbeat else _replica_id()
        self.catalog = Catalog()
        self._started = False
        self._listening = pooler() is None  # a transaction pooler does not pass NOTIFY
        self._connector = Connector(
            url,
            "pgbeat-scheduler",
            configure=self._listen if self._listening else None,
            backoff=ReconnectBackoff(url, log, lambda: self._metrics.reconnected("scheduler")),
            # JIT compiled a large tick's claim for longer than it then ran for
            jit="off",
            # A claim acknowledged is durable, on the standby too when replication is
            # synchronous: after a failover no replica finds an "enqueued" period missing.
            synchronous_commit="on",
        )
        self._look_back = LookBack()
        self._watch = Watch()  # when this replica judges deadlines next
        self._loop = BackgroundLoop(
            "pgbeat-scheduler", self._step, on_exit=self._finish, on_failure=self._failed
        )
        self._on_failure: Callable[[BaseException], None] | None = None
        self._reload_asked = threading.Event()
        self._next_file_check = 0.0
        self._prepared: planning.Plan | None = None  # the next fire time's, made ahead
        self._heard = True  # a notification of a change came since the last refresh
        self._next_refresh = 0.0  # monotonic time of the next refresh without one
        self.prepared_ticks = 0  # ticks that claimed periods built ahead (tests, benchmarks)
        self.stopped = threading.Event()

    def stop(self) -> None:
        self._loop.stop()

    def reload(self) -> None:
        """Re-read the schedules file at the next tick (safe from a signal handler)."""
        self._reload_asked.set()

    def run(self) -> None:
        """Tick until ``stop()``; survives database outages and catches up afterwards."""
        self._log_start()
        self._loop.run()

    def start(self, on_failure: Callable[[BaseException], None] | None = None) -> None:
        """Tick on a thread of its own; an unexpected error stops it and goes to ``on_failure``."""
        self._on_failure = on_failure
        self._log_start()
        self._loop.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for ``start``'s thread to end; True once it has."""
        return self._loop.join(timeout)

    @property
    def failure(self) -> BaseException | None:
        """The unexpected error that stopped ``start``'s thread, if one did."""
        return self._loop.failure

    def _log_start(self) -> None:
        if self._file is None:
            log.info("scheduler started; no schedules file")
            return
        log.info("scheduler started; schedules file: %d schedules", len(self._file))
        log.debug("schedules of the file: %s", ", ".join(s.name for s in self._file))

    def _failed(self, exc: BaseException) -> None:
        log.error("the scheduler stopped on an unexpected error", exc_info=exc)
        if self._on_failure is not None:
            self._on_failure(exc)

    def _finish(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
        self._connector.close()
        log.info("scheduler stopped")
        self.stopped.set()

    def _step(self) -> float:
        self._pause(self._tick_safely())
        return 0.0

    def _tick_safely(self) -> float:
        """One tick; returns how long to sleep, in seconds of the monotonic clock."""
        started = time.monotonic()
        result = self._connector.run(lambda conn: self._tick_on(conn, started))
        if isinstance(result, Outage):
            self._heard = True  # notifications sent while disconnected are lost: ask
            return result.pause
        return result

    def _tick_on(self, conn: psycopg.Connection[Any], started: float) -> float:
        if self._look_back.reconnected(self._connector.opened) and self._started:
            # After an outage (perhaps a failover to a standby that lacks the last claims),
            # start over: the copy reloaded, each schedule looks back over its window.
            log.info("reconnected: looking back for missed periods, as at start")
            self._started, self._prepared = False, None
            self._watch.asked = True
        if self._reload_asked.is_set():
            self._reload(conn)
        now = connections.database_now(conn)
        result = self.tick(conn, now, refresh=self._must_refresh())
        self._housekeeping(conn)
        if self._heartbeat is not None:  # on the tick's connection: none of its own
            self._heartbeat.beat_if_due(conn, time.monotonic())
        self._prepared = planning.plan_ahead(
            self.catalog, result.next_fire, now, self.replica, self._prepared
        )
        wake = self._watch.wake_at(result.next_fire)
        sleep = _sleep_seconds(now, wake, time.monotonic() - started)
        if self._heartbeat is not None:
            sleep = min(sleep, max(self._heartbeat.next_beat - time.monotonic(), 0.0))
        return sleep

    def _pause(self, seconds: float) -> None:
        """Sleep, but wake for a change of the schedules (NOTIFY), a reload or a stop."""
        deadline = time.monotonic() + seconds
        stopping = self._loop.stopping
        while not (stopping.is_set() or self._reload_asked.is_set()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._listening and self._connector.backoff.failures == 0:
                if self._notified(min(left, _WAIT_SLICE)):
                    return
            else:
                stopping.wait(min(left, _WAIT_SLICE))

    def _notified(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a notification on the tick's (open) connection."""
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = self._connector.get()
            heard = any(True for _ in conn.notifies(timeout=seconds, stop_after=1))
        except psycopg.Error as exc:
            # The connection died while idle: an outage like any other, logged once (and its
            # end once), not a silent reconnect. The next tick reconnects.
            if is_connection_failure(exc, conn):
                self._connector.failed(exc)
            else:
                self._connector.discard()
            heard = True
        self._heard = self._heard or heard
        return heard

    def _must_refresh(self) -> bool:
        """Whether this tick asks the table for changes: after a notification, and at
        least every MAX_SLEEP (a notification can be lost; a pooler passes none)."""
        clock = time.monotonic()
        if self._listening and not self._heard and clock < self._next_refresh:
            return False
        self._heard, self._next_refresh = False, clock + MAX_SLEEP.total_seconds()
        return True

    @staticmethod
    def _listen(conn: psycopg.Connection[Any]) -> None:
        conn.execute(schedule_sql.SCHEDULES_LISTEN)

    def tick(
        self, conn: psycopg.Connection[Any], now: datetime, *, refresh: bool = True
    ) -> TickResult:
        """Insert every period due at ``now`` (the database's clock) in one transaction.

        ``refresh``: first apply the changes of the table (the loop skips it when it heard
        of none, so that a tick with nothing due touches no database).
        """
        began = time.monotonic()
        if not self._started:
            self._start(conn)
        elif refresh:
            self.catalog.refresh(conn)
        groups = self.catalog.take_due(now)
        made: planning.Plan | None = None
        claims: Claims | None = None
        released: list[str] = []
        try:
            # Before the claim: a waiting period whose job ended goes first, so that a period
            # due now waits behind it instead of being skipped for the one waiting.
            if self.catalog.buffering:
                released = release_buffered(conn, self.replica)
            if groups:
                made, self._prepared = self._prepared, None
            if made is not None and made.fits(self.catalog, groups, now):
                self.prepared_ticks += 1
            else:
                made = planning.plan(self.catalog, groups, now)
            claims = claiming.claim(conn, self.catalog, made, self.replica)
        finally:
            next_fires = {} if made is None else made.next_fires
            self.catalog.settle(groups, None if claims is None else now, next_fires)
        claims.released = released
        claiming.report(claims, self._metrics, self.catalog, time.monotonic() - began)
        late = deadlines.judge_if_due(
            conn,
            self._watch,
            now,
            deadlines=bool(self.catalog.deadlines),
            claimed=bool(groups),
            metrics=self._metrics,
        )
        next_fire = self.catalog.next_fire()
        return TickResult(
            claims.inserted,
            claims.existing,
            next_fire,
            claims.skipped,
            claims.missed,
            claims.buffered,
            claims.released,
            claims.paused,
            [period.period for period in late],
        )

    def _start(self, conn: psycopg.Connection[Any]) -> None:
        """Write this replica's file into the table (if it is the newest), then copy the table."""
        if self._file is not None:
            result = self._sync(conn)
            if not result.applied:
                log.warning(
                    "schedules file %s is older than %s, held by another live replica: "
                    "running the schedules in the database (see pgbeat status)",
                    result.file_hash,
                    result.newest,
                )
        with long_lived():  # the copy: no cycles, and it lasts (collector.py)
            self.catalog.load(conn)
        self._started = True
        log.info("scheduler runs %d schedules from the database", len(self.catalog))

    def _reload(self, conn: psycopg.Connection[Any]) -> None:
        """Re-read the schedules file; a bad one keeps the running schedules (one log line)."""
        self._reload_asked.clear()
        if self._load is None:
            log.warning("reload asked, but this scheduler has no schedules file")
            return
        try:
            schedules = [s for s in self._load() if s.enabled]
        except ConfigError as exc:
            count = len(exc.problems)
            log.error(
                "reload refused, the running schedules stay: %s%s",
                exc.problems[0] if exc.problems else exc,
                f" (and {count - 1} more problems)" if count > 1 else "",
            )
            return
        self._file, self._file_hash = schedules, file_hash(schedules)
        if self._heartbeat is not None:
            self._heartbeat.set_schedules_hash(self._file_hash)
        result = self._sync(conn)  # which beats first: the others learn of the file at once
        log.info(
            "reloaded the schedules file (%s, %d schedules): %s",
            result.file_hash,
            len(schedules),
            "in effect" if result.applied else f"a newer file is in effect ({result.newest})",
        )

    def _housekeeping(self, conn: psycopg.Connection[Any]) -> None:
        """Now and then: take over when a newer file's replicas are gone; purge history."""
        clock = time.monotonic()
        if self._file is not None and self._file_hash and clock >= self._next_file_check:
            self._next_file_check = clock + FILE_CHECK_EVERY
            if needs_sync(conn, self._file_hash, replica=self.replica) or freed_by_code(
                conn, self._left_to_code
            ):
                self._sync(conn)
        if self._purge.due(clock):
            self.purge_history(conn)

    def _sync(self, conn: psycopg.Connection[Any]) -> SyncResult:
        """Write this replica's file into the table; remember the names code holds.

        The replica beats first, so that its row holds the file before the file can be in
        effect: another replica checking the live files between the two would take the
        newer file's holder for gone and apply its own older file back (a fight, seen
        under load between a start's sync and its first beat).
        """
        assert self._file is not None
        if self._heartbeat is not None:
            self._heartbeat.beat_now(conn)
        result = sync_file(conn, self._file, replica=self.replica)
        self._left_to_code = result.left_to_code if result.applied else []
        return result

    def purge_history(self, conn: psycopg.Connection[Any]) -> int:
        """Delete history older than the retention, and old tombstones (history_purge.py)."""
        return self._purge.run(conn, self.catalog.longest_catch_up_window())


def _replica_id() -> str:
    """An id like a heartbeat's, for a scheduler that does not beat (tests, benchmarks)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _sleep_seconds(now: datetime, next_fire: datetime | None, spent: float) -> float:
    """Sleep until the next fire (by the database clock), but never longer than MAX_SLEEP."""
    if next_fire is None:
        return MAX_SLEEP.total_seconds()
    until = (next_fire - now).total_seconds() - spent
    return min(max(until, 0.0), MAX_SLEEP.total_seconds())
