"""Retention in real worker processes: what it deletes, what it never deletes, one holder.

An audit plants jobs of every status (pending, running, keep_until-protected, young and
old finished ones) and checks that exactly the right ones go; several workers share one
turn, and another takes it when its holder is killed with -9.
"""

from __future__ import annotations

import json
import re
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client import generate_latest

import pgbeat
from pgbeat.jobs import actions
from pgbeat.observe.metrics import PrometheusMetrics, read_depth
from pgbeat.worker.retention import Retention
from pgbeat.worker.retention_policy import RetentionPolicy
from tests.helpers import PROCESS_START, CliProcess, in_thread, run_cli, start_cli, wait_for
from tests.pgbouncer import Pgbouncer, unavailable_reason

ROOT = str(Path(__file__).resolve().parents[2])
APP = "tests.apps.jobs_app:registry"
FAST = ["--retention-every", "200ms"]

# label: (status, finished this long ago, keep_until from now, kept by the defaults 7d/30d)
PLANTED: dict[str, tuple[str, str | None, str | None, bool]] = {
    "pending_old": ("pending", "100 days", None, True),
    "running_old": ("running", "100 days", None, True),
    "done_old": ("done", "8 days", None, False),
    "cancelled_old": ("cancelled", "8 days", None, False),
    "failed_old": ("failed", "31 days", None, False),
    "failed_mid": ("failed", "8 days", None, True),
    "done_young": ("done", "1 day", None, True),
    "cancelled_young": ("cancelled", "6 days", None, True),
    "failed_young": ("failed", "29 days", None, True),
    "done_protected": ("done", "8 days", "1 hour", True),
    "failed_protected": ("failed", "31 days", "1 hour", True),
    "done_protection_over": ("done", "8 days", "-1 minute", False),
    "done_unfinished": ("done", None, None, True),  # no finished_at: never judged by age
}
BULK = 2500  # old done jobs beyond the labelled ones: more than one batch


def plant(conn: psycopg.Connection[Any]) -> None:
    for label, (status, age, keep, _) in PLANTED.items():
        conn.execute(
            "INSERT INTO jobs (kind, payload, status, run_at, locked_until, finished_at,"
            " keep_until, unique_key) VALUES ('planted', '{}', %s, now() + interval '1 day',"
            " now() + interval '1 day', now() - %s::interval, now() + %s::interval, %s)",
            (status, age, keep, label),
        )
    conn.execute(
        "INSERT INTO jobs (kind, payload, status, finished_at)"
        " SELECT 'bulk', '{}', 'done', now() - interval '9 days' FROM generate_series(1, %s)",
        (BULK,),
    )


def survivors(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute("SELECT unique_key FROM jobs WHERE kind = 'planted'").fetchall()
    return {str(r[0]) for r in rows}


def retention_row(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        row = cursor.execute(
            "SELECT holder, held_until > now() AS held, last_run_at, total_deleted"
            " FROM pgbeat_retention"
        ).fetchone()
    assert row is not None
    return row


def worker(database_url: str, *flags: str) -> CliProcess:
    return start_cli(["worker", APP, *FAST, *flags], database_url, cwd=ROOT)


@pytest.mark.slow
def test_audit_deletes_exactly_the_old_finished_jobs(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    plant(conn)
    expected = {label for label, (_, _, _, kept) in PLANTED.items() if kept}
    gone = len(PLANTED) - len(expected) + BULK
    process = worker(database_url)
    try:
        wait_for(
            lambda: retention_row(conn)["total_deleted"] >= gone,
            timeout=PROCESS_START,
            message="a retention round",
            watching=[process],
        )
        # one more round finds nothing further to delete
        first = retention_row(conn)["last_run_at"]
        wait_for(lambda: retention_row(conn)["last_run_at"] > first, timeout=30, message="round")
    finally:
        output = process.stop()
    assert "Traceback" not in output, output
    assert survivors(conn) == expected
    assert retention_row(conn)["total_deleted"] == gone
    assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'bulk'").fetchone() == (0,)
    status = run_cli(["status"], database_url, cwd=ROOT)
    assert status.returncode == 0, status.stderr
    assert re.search(r"retention: last round .* deleted 0 \(\d+ in all\)", status.stdout)
    assert "oldest finished job: finished" in status.stdout
    shown = json.loads(run_cli(["status", "--json"], database_url, cwd=ROOT).stdout)
    assert shown["retention"]["total_deleted"] == gone and shown["retention"]["held"] is False


@pytest.mark.slow
def test_a_worker_with_the_defaults_deletes_soon_after_it_starts(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    plant(conn)
    process = start_cli(["worker", APP], database_url, cwd=ROOT)  # --retention 7d, 30d
    try:
        wait_for(
            lambda: (
                conn.execute("SELECT count(*) FROM jobs WHERE kind = 'bulk'").fetchone() == (0,)
            ),
            timeout=PROCESS_START,
            message="the first round",
            watching=[process],
        )
    finally:
        process.stop()
    assert survivors(conn) == {label for label, (_, _, _, kept) in PLANTED.items() if kept}


@pytest.mark.slow
def test_off_keeps_what_it_names(database_url: str, conn: psycopg.Connection[Any]) -> None:
    plant(conn)
    process = worker(database_url, "--retention", "off", "--failed-retention", "2d")
    try:
        wait_for(
            lambda: retention_row(conn)["last_run_at"] is not None,
            timeout=30,
            message="round",
            watching=[process],
        )
    finally:
        output = process.stop()
    assert "Traceback" not in output, output
    left = survivors(conn)
    assert {"done_old", "cancelled_old", "done_young", "done_protection_over"} <= left
    assert not {"failed_old", "failed_mid", "failed_young"} & left
    assert {"failed_protected", "pending_old", "running_old"} <= left


def holder_pid(conn: psycopg.Connection[Any]) -> int | None:
    row = retention_row(conn)
    return int(str(row["holder"]).split(":")[1]) if row["held"] else None


@pytest.mark.slow
def test_one_holder_among_workers_and_another_after_kill_9(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    processes = [worker(database_url, "--retention-every", "300ms") for _ in range(3)]
    try:
        first = wait_for(lambda: holder_pid(conn), timeout=PROCESS_START, message="a holder")
        by_pid = {p.pid: p for p in processes}
        assert first in by_pid
        # the turn stays with its holder while it lives: many rounds, one holder
        seen = {retention_row(conn)["last_run_at"]}
        for _ in range(3):
            wait_for(lambda: retention_row(conn)["last_run_at"] not in seen, timeout=10)
            seen.add(retention_row(conn)["last_run_at"])
            assert holder_pid(conn) == first
        took = [p.pid for p in processes if "retention: took the turn" in p.output()]
        assert took == [first]
        by_pid[first].send_signal(signal.SIGKILL)
        by_pid[first].wait()
        conn.execute(
            "INSERT INTO jobs (kind, payload, status, finished_at)"
            " SELECT 'bulk', '{}', 'done', now() - interval '9 days' FROM generate_series(1, 10)"
        )
        second = wait_for(
            lambda: (pid := holder_pid(conn)) not in (None, first) and pid,
            timeout=30,
            message="another holder",
        )
        assert second in by_pid
        wait_for(
            lambda: conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,),
            timeout=30,
            message="the new holder's deletes",
        )
    finally:
        outputs = [p.stop() for p in processes]
    assert not any("Traceback" in out for out in outputs), outputs


def test_a_batch_skips_a_locked_row_and_counts_by_status(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    plant(conn)
    metrics = PrometheusMetrics()
    service = Retention(database_url, RetentionPolicy(), metrics=metrics)
    with psycopg.connect(database_url) as other:  # holds done_old locked, in a transaction
        other.execute("SELECT FROM jobs WHERE unique_key = 'done_old' FOR UPDATE")
        with psycopg.connect(database_url, autocommit=True) as mine:
            deleted = service.run_round(mine)
    assert deleted == len(PLANTED) - 1 - sum(kept for *_, kept in PLANTED.values()) + BULK
    assert "done_old" in survivors(conn)  # skipped, not waited for
    text = generate_latest(metrics.registry).decode()
    assert 'pgbeat_retention_deleted_jobs_total{status="failed"} 1.0' in text
    assert f'pgbeat_retention_deleted_jobs_total{{status="done"}} {BULK + 1}.0' in text
    age = read_depth(conn, 10_000).oldest_finished_age
    assert timedelta(seconds=age) > timedelta(days=30)  # failed_protected, still kept


def test_purge_shares_the_statement_and_its_guards(conn: psycopg.Connection[Any]) -> None:
    plant(conn)
    deleted = actions.purge_jobs(conn, timedelta(days=2), ("done", "failed"), batch=100)
    assert deleted == BULK + 5  # the 2 old done, the 3 failed older than 2d
    left = survivors(conn)
    assert {"pending_old", "running_old", "done_protected", "failed_protected"} <= left
    assert {"cancelled_old", "done_young", "done_unfinished"} <= left


@pytest.mark.slow
def test_retention_through_pgbouncer_in_transaction_mode(
    server_url: str,
    database_url: str,
    conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The turn is a row, not a session lock: behind a transaction pooler two workers
    still share one turn, and the old jobs go."""
    reason = unavailable_reason(server_url)
    if reason:
        pytest.skip(reason)
    plant(conn)
    monkeypatch.setenv("PGBEAT_POOLER", "transaction")
    bouncer = Pgbouncer(server_url, pool_size=4)
    policy = RetentionPolicy(every=timedelta(milliseconds=200))
    settings = pgbeat.WorkerSettings(retention=policy, poll_interval=timedelta(milliseconds=200))
    workers = [
        pgbeat.Worker(bouncer.url(database_url), pgbeat.Registry(), settings) for _ in range(2)
    ]
    try:
        with in_thread(workers[0]), in_thread(workers[1]):
            expected = {label for label, (_, _, _, kept) in PLANTED.items() if kept}
            wait_for(lambda: survivors(conn) == expected, timeout=30, message="retention's deletes")
            wait_for(lambda: holder_pid(conn), timeout=10, message="a holder")

            def one_holder() -> bool:
                # A worker learns it lost the turn at its next round: on a loaded machine a
                # round late past the hold (3 rounds) lets the other take it while the first
                # still believes it holds. A turn that two sessions behind the pooler held
                # at once (a session lock) would never settle on one.
                holding = [w for w in workers if w._retention is not None and w._retention.holding]
                return len(holding) == 1

            wait_for(one_holder, timeout=30, message="exactly one worker holding the turn")
    finally:
        bouncer.close()
