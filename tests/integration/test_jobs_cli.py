"""`pgbeat jobs ...` against a real database, bad input included."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.jobs import actions
from pgbeat.worker import operations
from tests.helpers import run_cli_here, statuses


def set_status(
    conn: psycopg.Connection[Any], job_id: int | None, status: str, **extra: Any
) -> None:
    conn.execute("UPDATE jobs SET status = %s WHERE id = %s", (status, job_id))
    for column, value in extra.items():
        conn.execute(
            psycopg.sql.SQL("UPDATE jobs SET {} = %s WHERE id = %s").format(
                psycopg.sql.Identifier(column)
            ),
            (value, job_id),
        )


def one_line_error(result: Any, fragment: str) -> None:
    assert result.returncode == 1, result
    assert fragment in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_stats(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("email") for _ in range(3)])
    pgbeat.enqueue(conn, "report", {}, delay=timedelta(hours=1))
    failed = pgbeat.enqueue(conn, "report", {})
    set_status(conn, failed, "failed")
    conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (failed,))
    conn.execute("UPDATE jobs SET run_at = now() - interval '90 seconds' WHERE kind = 'email'")

    result = run_cli_here(["jobs", "stats", "--json"], database_url)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["by_status"] == {
        "pending": 4,
        "running": 0,
        "done": 0,
        "failed": 1,
        "cancelled": 0,
    }
    assert stats["by_status_and_kind"] == {
        "pending": {"email": 3, "report": 1},
        "failed": {"report": 1},
    }
    assert stats["due_unclaimed"] == 3
    assert 89 <= stats["oldest_due_age_seconds"] < 200
    assert stats["failed_last_hour"] == 1

    text = run_cli_here(["jobs", "stats"], database_url)
    assert text.returncode == 0
    assert "pending: 4" in text.stdout and "email" in text.stdout


@pytest.mark.slow
def test_list_and_show(database_url: str, conn: psycopg.Connection[Any]) -> None:
    first = pgbeat.enqueue(conn, "email", {"user_id": 1})
    second = pgbeat.enqueue(conn, "report", {"day": "2026-11-30"}, unique_key="r1")
    set_status(conn, second, "failed", last_error="ValueError: boom\n  File x")

    listed = run_cli_here(["jobs", "list", "--json"], database_url)
    assert [row["id"] for row in json.loads(listed.stdout)] == [second, first]
    failed_only = run_cli_here(["jobs", "list", "--status", "failed", "--json"], database_url)
    assert [row["id"] for row in json.loads(failed_only.stdout)] == [second]
    by_kind = run_cli_here(
        ["jobs", "list", "--kind", "email", "--limit", "1", "--json"], database_url
    )
    assert [row["id"] for row in json.loads(by_kind.stdout)] == [first]
    text = run_cli_here(["jobs", "list"], database_url)
    assert "ValueError: boom" in text.stdout and "File x" not in text.stdout

    shown = json.loads(run_cli_here(["jobs", "show", str(second), "--json"], database_url).stdout)
    assert shown["payload"] == {"day": "2026-11-30"}
    assert shown["unique_key"] == "r1"
    assert shown["last_error"].startswith("ValueError: boom")
    text_show = run_cli_here(["jobs", "show", str(second)], database_url)
    assert "status: failed" in text_show.stdout


@pytest.mark.slow
def test_retry_one_and_all_failed(database_url: str, conn: psycopg.Connection[Any]) -> None:
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("a"), pgbeat.NewJob("a"), pgbeat.NewJob("b")])
    for job_id in ids:
        set_status(conn, job_id, "failed", attempts=8)
    result = run_cli_here(["jobs", "retry", str(ids[0])], database_url)
    assert result.returncode == 0, result.stderr
    assert conn.execute(
        "SELECT status, attempts FROM jobs WHERE id = %s", (ids[0],)
    ).fetchone() == ("pending", 0)
    result = run_cli_here(["jobs", "retry", "--failed", "--kind", "b"], database_url)
    assert "1 failed jobs back to pending" in result.stdout
    result = run_cli_here(["jobs", "retry", "--failed"], database_url)
    assert "1 failed jobs back to pending" in result.stdout
    assert statuses(conn) == {"pending": 3}


@pytest.mark.slow
def test_retry_refuses_a_running_job(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue(conn, "a", {})
    (job,) = operations.claim_jobs(conn, 1, timedelta(minutes=5), None)
    one_line_error(run_cli_here(["jobs", "retry", str(job.id)], database_url), "it is running")


@pytest.mark.slow
def test_cancel(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pending = pgbeat.enqueue(conn, "a", {})
    result = run_cli_here(["jobs", "cancel", str(pending)], database_url)
    assert result.returncode == 0, result.stderr
    row = conn.execute("SELECT status, last_error FROM jobs WHERE id = %s", (pending,)).fetchone()
    assert row is not None
    status, reason = row
    assert status == "cancelled"  # not failed: stopping a job on purpose is no failure
    assert reason.startswith("cancelled: pgbeat jobs cancel, by ") and "@" in reason
    running = pgbeat.enqueue(conn, "a", {})
    operations.claim_jobs(conn, 1, timedelta(minutes=5), None)
    result = run_cli_here(["jobs", "cancel", str(running)], database_url)
    assert result.returncode == 0, result.stderr
    assert "is running: its handler is told to stop" in result.stdout
    row = conn.execute(
        "SELECT status, cancel_requested_at IS NOT NULL FROM jobs WHERE id = %s", (running,)
    ).fetchone()
    assert row == ("running", True)  # its worker ends it cancelled
    one_line_error(run_cli_here(["jobs", "cancel", str(pending)], database_url), "it is cancelled")


@pytest.mark.slow
def test_purge_keeps_young_jobs_and_guarded_scheduled_jobs(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    old_done, old_failed, young_done, guarded, pending = pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("a") for _ in range(5)]
    )
    conn.execute(
        "UPDATE jobs SET status = 'done', finished_at = now() - interval '8 days' "
        "WHERE id IN (%s, %s)",
        (old_done, guarded),
    )
    conn.execute(
        "UPDATE jobs SET status = 'failed', finished_at = now() - interval '9 days' WHERE id = %s",
        (old_failed,),
    )
    conn.execute(
        "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", (young_done,)
    )
    conn.execute(
        "UPDATE jobs SET keep_until = now() + interval '1 hour', "
        "created_at = now() - interval '30 days' WHERE id IN (%s, %s)",
        (guarded, pending),
    )

    only_done = run_cli_here(
        ["jobs", "purge", "--older-than", "7d", "--status", "done"], database_url
    )
    assert only_done.stdout.strip() == "deleted 1 jobs"
    result = run_cli_here(["jobs", "purge", "--older-than", "7d"], database_url)
    assert result.stdout.strip() == "deleted 1 jobs"
    remaining = {row[0] for row in conn.execute("SELECT id FROM jobs")}
    assert remaining == {young_done, guarded, pending}


def test_purge_in_batches(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("a") for _ in range(25)])
    conn.execute("UPDATE jobs SET status = 'done', finished_at = now() - interval '2 days'")
    assert actions.purge_jobs(conn, timedelta(days=1), batch=10) == 25
    assert statuses(conn) == {}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["jobs", "show", "999999"], "no job with id 999999"),
        (["jobs", "retry", "999999"], "no job with id 999999"),
        (["jobs", "cancel", "999999"], "no job with id 999999"),
        (["jobs", "show", "abc"], "a job id is a whole number"),
        (["jobs", "list", "--status", "exploded"], "invalid choice"),
        (["jobs", "purge", "--older-than", "a week"], "bad duration"),
        (["jobs", "purge", "--older-than", "7d", "--status", "pending"], "purge takes done"),
        (["jobs", "purge"], "--older-than"),
        (["jobs", "retry"], "one of the arguments"),
        (["jobs", "retry", "1", "--kind", "a"], "--kind goes with --failed"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line(database_url: str, args: list[str], fragment: str) -> None:
    one_line_error(run_cli_here(args, database_url), fragment)
