"""Logs at scale: a scheduler writes one INFO summary line per tick (the per-period lines are
DEBUG) and a start-up line that counts its schedules instead of naming them; ``pgbeat
worker`` by default writes no line per successful job, but every failure, and a summary of
what it finished once a minute."""

from __future__ import annotations

import logging
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.worker import outcome_log
from tests.helpers import in_thread, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
T0 = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)
COUNT = 300


def test_a_tick_of_hundreds_of_periods_is_one_info_line(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    schedules = [
        Schedule(name=f"s{n}", kind="k", every=timedelta(minutes=1), catch_up="none")
        for n in range(COUNT)
    ]
    scheduler = Scheduler(database_url, schedules, heartbeat=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pgbeat.scheduler"):
        scheduler.tick(conn, T0)
    lines = [r.getMessage() for r in caplog.records if r.name == "pgbeat.scheduler"]
    ticks = [line for line in lines if line.startswith("tick: ")]
    assert len(ticks) == 1 and ticks[0].startswith(f"tick: {COUNT} enqueued in "), lines
    assert not any(line.startswith("enqueued ") for line in lines)
    assert sum(len(line) for line in lines) < 2_000  # not a line, nor a name, per schedule


def test_the_start_up_line_counts_the_schedules(
    database_url: str, tmp_path: Path, conn: psycopg.Connection[Any]
) -> None:
    path = tmp_path / "schedules.toml"
    path.write_text(
        "".join(f'[schedules.s{n}]\nevery = "1h"\nkind = "k"\n\n' for n in range(COUNT))
    )
    process = start_cli(["scheduler", "--schedules", str(path)], database_url)
    try:
        wait_for(lambda: "schedules file: " in process.output(), timeout=60)
    finally:
        output = process.stop(signal.SIGTERM)
    assert f"schedules file: {COUNT} schedules" in output
    assert "s299" not in output  # no schedule named at INFO


@pytest.mark.slow
def test_a_quiet_worker_writes_no_line_per_success(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS executions (job_id bigint, pid int)")
    ok = pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(20)])
    process = start_cli(["worker", "tests.apps.jobs_app:registry"], database_url, cwd=ROOT)
    try:
        for job_id in ok:
            assert pgbeat.wait(conn, job_id, timeout=60).status == "done"
    finally:
        output = process.stop(signal.SIGTERM)
    assert " done in " not in output, output
    assert "worker started" in output  # its failures: the test below


def test_the_worker_summarises_what_it_finished(
    database_url: str,
    conn: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outcome_log, "SUMMARY_EVERY", 0.0)  # a line at every write
    registry = pgbeat.Registry()
    registry.register("fine", lambda payload: None)

    def broken(payload: Any) -> None:
        raise pgbeat.PermanentError("no")

    registry.register("broken", broken)
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("fine"), pgbeat.NewJob("broken")])
    settings = pgbeat.WorkerSettings(heartbeat=False, poll_interval=timedelta(milliseconds=100))
    worker = pgbeat.Worker(database_url, registry, settings)
    logging.getLogger("pgbeat.worker.jobs").setLevel(logging.WARNING)  # as `pgbeat worker`
    with caplog.at_level(logging.INFO, logger="pgbeat.worker"):
        try:
            with in_thread(worker):
                for job_id in ids:
                    pgbeat.wait(conn, job_id, timeout=30)
                wait_for(lambda: any("finished" in r.getMessage() for r in caplog.records))
        finally:
            logging.getLogger("pgbeat.worker.jobs").setLevel(logging.NOTSET)
    messages = [r.getMessage() for r in caplog.records]
    assert any("failed for good" in m for m in messages), messages
    assert not any(" done in " in m for m in messages), messages
    totals = [r for r in caplog.records if r.getMessage().startswith("finished ")]
    assert sum(getattr(r, "done", 0) for r in totals) == 1
    assert sum(getattr(r, "failed", 0) for r in totals) == 1
