"""Scenario 6, short: poison jobs end in failed while ordinary jobs keep flowing."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.registry import Handler
from tests.apps.chaos_app import HUGE_ERROR_CHARS
from tests.apps.chaos_app import registry as chaos_registry
from tests.chaos.harness import APP, ROOT
from tests.chaos.scenarios import PoisonJobs, poison_jobs
from tests.helpers import start_cli, wait_for


@pytest.mark.slow
def test_poison_jobs_fail_and_the_rest_flows(database_url: str) -> None:
    result = poison_jobs(database_url, PoisonJobs())
    print(result.figures)
    assert not result.problems, result.problems


def test_a_huge_error_is_stored_truncated(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="pgbeat")  # the log line itself is 10 MB
    with psycopg.connect(database_url, autocommit=True) as conn:
        job_id = pgbeat.enqueue(conn, "poison_huge_error", {}, max_attempts=1)
        settings = pgbeat.WorkerSettings(kinds=("poison_huge_error",), heartbeat=False)
        worker = pgbeat.Worker(database_url, chaos_registry, settings)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            wait_for(
                lambda: conn.execute(LAST_ERROR, (job_id,)).fetchone()[0] == "failed",  # type: ignore[index]
                timeout=20,
                message="the job failed",
            )
        finally:
            worker.stop()
            thread.join(timeout=30)
        _, error = conn.execute(LAST_ERROR, (job_id,)).fetchone()  # type: ignore[misc]
    assert error.startswith("RuntimeError: xxx"), error[:100]
    assert len(error) < 10_100, len(error)
    total = int(re.fullmatch(r".*\[truncated, (\d+) characters in all\]", error, re.S)[1])  # type: ignore[index]
    assert total > HUGE_ERROR_CHARS


LAST_ERROR = "SELECT status, last_error FROM jobs WHERE id = %s"
CLAIM_SEEN = "SELECT status, attempts FROM jobs WHERE id = %s"


class _HoldingRegistry(pgbeat.Registry):
    """Holds the worker's loop inside its claim (before the second job starts) until the
    first handler has looked at its own job's row from another connection."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0
        self.observed = threading.Event()

    def get(self, kind: str) -> Handler:
        self.lookups += 1
        if self.lookups == 2:
            self.observed.wait(10)
        return super().get(kind)


@pytest.mark.slow
def test_a_claim_is_committed_before_its_handler_starts(database_url: str) -> None:
    """A claim sets its lease and commits before the handler runs.

    Otherwise a handler that kills its process before the claim commits rolls the claim
    back: its attempt is never charged and the job can kill workers without end. Before
    077942c the handler saw ('pending', 0) here, and the long poison run with
    ``--instant-exit-poison`` counted 19 worker deaths for 15 attempts charged.
    """
    registry = _HoldingRegistry()
    seen: list[tuple[str, int]] = []

    def probe(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        with psycopg.connect(database_url, autocommit=True) as other:
            seen.append(other.execute(CLAIM_SEEN, (job.id,)).fetchone())  # type: ignore[arg-type]
        registry.observed.set()

    registry.register("probe", probe)
    with psycopg.connect(database_url, autocommit=True) as conn:
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("probe"), pgbeat.NewJob("probe")])
    settings = pgbeat.WorkerSettings(concurrency=2, listen=False, heartbeat=False)
    worker = pgbeat.Worker(database_url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(seen) == 2, timeout=20, message="both probes ran")
    finally:
        worker.stop()
        thread.join(timeout=30)
    assert seen[0] == ("running", 1), f"the handler saw its job as {seen[0]}, not claimed"


@pytest.mark.slow
def test_a_huge_error_message_makes_a_bounded_log_line(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        job_id = pgbeat.enqueue(conn, "poison_huge_error", {}, max_attempts=1)
        worker = start_cli(
            ["worker", APP, "--kinds", "poison_huge_error"], database_url, cwd=str(ROOT)
        )
        try:
            wait_for(
                lambda: (
                    conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
                    == ("failed",)
                ),
                timeout=30,
                message="the job failed",
            )
        finally:
            output = worker.stop()
    longest = max(len(line) for line in output.splitlines())
    assert longest < 100_000, f"a log line of {longest:,} characters"
