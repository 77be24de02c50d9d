"""Retention: deletes old finished jobs, from one worker at a time, in small batches.

Every worker looks for the turn (a row of ``pgbeat_retention`` with a hold time, which works
behind a transaction pooler and which a holder killed with -9 loses one hold later) every
10 seconds, on a connection opened for that round; the holder deletes finished rows
only, locked with SKIP LOCKED, so a claim never waits on a batch.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
import uuid
from collections import Counter
from typing import Any

import psycopg

from pgbeat.background import BackgroundLoop
from pgbeat.db.connections import Connector, Outage, ReconnectBackoff
from pgbeat.db.sql import retention as retention_sql
from pgbeat.db.sql.jobs import retention as purge_sql
from pgbeat.observe.metrics import Metrics
from pgbeat.worker.retention_policy import RetentionPolicy

log = logging.getLogger("pgbeat.retention")

FIRST_LOOK_WITHIN = 2.0  # seconds after the start


class Retention:
    """The retention service of one worker process; ``start`` it, ``stop`` it at exit."""

    def __init__(
        self,
        url: str,
        policy: RetentionPolicy,
        *,
        metrics: Metrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.policy = policy
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._metrics = metrics or Metrics()
        self._connector = Connector(url, "pgbeat-retention", backoff=ReconnectBackoff(url, log))
        self._loop = BackgroundLoop("pgbeat-retention", self._step, on_exit=self._connector.close)
        # The first look comes soon after the start (old rows go at once), spread a little
        # so that workers started together do not all ask at the same instant.
        first = min(policy.every.total_seconds(), FIRST_LOOK_WITHIN)
        self._first_pause = first * (rng or random.Random()).random()
        self._started = False
        self._allowed = False
        self.holding = False

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        """End the rounds; a holder gives up the turn so another worker takes it soon."""
        self._loop.stop()
        self._loop.join(timeout=10)
        if not self.holding:
            return
        try:
            self._connector.run(self._release)
        except psycopg.Error:
            pass  # the hold runs out by itself
        finally:
            self._connector.close()

    def _step(self) -> float | None:
        if not self._started:
            self._started = True
            return self._first_pause
        try:
            result = self._connector.run(self.run_round)
        except psycopg.errors.InsufficientPrivilege:
            result = False
        finally:
            # idle between rounds, so not held open: a worker keeps its 3 connections
            self._connector.close()
        if isinstance(result, Outage):
            return result.pause
        if result is False:
            log.warning(
                "retention off in this worker: its role may not delete jobs (grant it DELETE "
                "on jobs and UPDATE on pgbeat_retention, or run `pgbeat jobs purge` instead)"
            )
            return None
        return self.policy.every.total_seconds()

    def run_round(self, conn: psycopg.Connection[Any]) -> int | bool | None:
        """One round on ``conn`` (autocommit): the rows deleted, None without the turn,
        False when this role may not delete jobs."""
        if not self._allowed:
            row = conn.execute(retention_sql.RETENTION_ALLOWED).fetchone()
            if row is None or not row[0]:
                return False
            self._allowed = True
        if not self._take_turn(conn):
            return None
        deleted: Counter[str] = Counter()
        passes = self.policy.passes()
        budget = self.policy.round_budget().total_seconds() / max(len(passes), 1)
        for statuses, older_than in passes:
            deadline = time.monotonic() + budget
            while not self._loop.stopping.is_set():
                rows = conn.execute(
                    purge_sql.JOBS_DELETE_FINISHED,
                    {
                        "statuses": list(statuses),
                        "older_than": older_than,
                        "batch": self.policy.batch,
                    },
                ).fetchall()
                batch = Counter(str(row[0]) for row in rows)
                deleted.update(batch)
                for status, count in batch.items():
                    self._metrics.retention_deleted(status, count)
                if len(rows) < self.policy.batch or time.monotonic() >= deadline:
                    break
                if not self._take_turn(conn):  # renewed before every further batch
                    return sum(deleted.values())
        total = sum(deleted.values())
        conn.execute(retention_sql.RETENTION_RECORD_ROUND, {"me": self.id, "deleted": total})
        if total:
            log.info(
                "retention: deleted %d finished jobs (%s)",
                total,
                ", ".join(f"{n} {s}" for s, n in sorted(deleted.items())),
            )
        return total

    def _release(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(retention_sql.RETENTION_RELEASE_TURN, {"me": self.id})
        self.holding = False

    def _take_turn(self, conn: psycopg.Connection[Any]) -> bool:
        held = (
            conn.execute(
                retention_sql.RETENTION_TAKE_TURN, {"me": self.id, "hold": self.policy.hold()}
            ).fetchone()
            is not None
        )
        if held != self.holding:
            log.info("retention: %s the turn", "took" if held else "lost")
            self.holding = held
        return held
