"""The workflow repair pass: every worker, now and then, releases or cancels the held steps
whose parents have all ended, should the advance ever have left one behind.

Leaderless: any worker repairs any workflow, and two repairing at once act once (the
statement re-checks each row it changes). The advance is a trigger in the transaction that
ends a step (migrations/0017_workflows.sql), so in a healthy database this finds nothing.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import psycopg

from pgbeat.background import BackgroundLoop
from pgbeat.db import runner
from pgbeat.db.connections import Connector, Outage, ReconnectBackoff
from pgbeat.jobs.workflows import repair_plan

log = logging.getLogger("pgbeat.workflows")


class WorkflowRepair:
    """The repair pass of one worker process, every ``every`` seconds (with jitter)."""

    def __init__(self, url: str, every: float, *, rng: random.Random | None = None) -> None:
        self.every = every
        self._rng = rng or random.Random()
        self._connector = Connector(url, "pgbeat-workflows", backoff=ReconnectBackoff(url, log))
        self._loop = BackgroundLoop("pgbeat-workflows", self._step, on_exit=self._connector.close)
        self._started = False

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        self._loop.join(timeout=10)

    def _pause(self) -> float:
        return self.every * (0.5 + self._rng.random())

    def _step(self) -> float | None:
        if not self._started:
            self._started = True
            return self._pause()
        try:
            result = self._connector.run(self.run_round)
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedTable):
            log.warning("workflow repair off in this worker: its role may not run it")
            return None
        finally:
            self._connector.close()  # idle between rounds, so not held open
        if isinstance(result, Outage):
            return result.pause
        return self._pause()

    def run_round(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        """One pass on ``conn``: (released, cancelled) steps."""
        released, cancelled = runner.run(conn, repair_plan(1000))
        if released or cancelled:
            log.warning(
                "workflow repair: released %d and cancelled %d steps whose parents had ended",
                released,
                cancelled,
            )
        return released, cancelled
