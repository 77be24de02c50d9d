"""Snooze, exactly (DESIGN.md, fourth round): a snoozed run gives its attempt back,
``attempts`` counts every run but the snoozed ones, ``max_attempts`` never changes (so a job
with ``max_attempts = 2147483647`` snoozes without overflow), and ``snoozes`` counts them,
shown by ``pgbeat jobs list --json`` and the dashboard's job page. A run whose job was reaped
and claimed again cannot write its outcome over a snoozed job that holds its attempt number
again."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import psycopg

import pgbeat
from pgbeat.worker import operations
from pgbeat.worker.claiming import Claimer
from tests.helpers import run_cli
from tests.integration.ui_support import dashboard

LEASE = timedelta(minutes=5)


def claim_one(url: str) -> Any:
    with psycopg.connect(url, autocommit=True) as worker:
        (job,) = Claimer(LEASE, None, None).claim(worker, 1)
        return job


def row(conn: psycopg.Connection[Any], job_id: int) -> tuple[Any, ...]:
    found = conn.execute(
        "SELECT status, attempts, max_attempts, snoozes FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert found is not None
    return tuple(found)


def test_two_snoozes_and_a_run_read_one_attempt(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    job_id = pgbeat.enqueue(conn, "report", {}, max_attempts=3)
    assert job_id is not None
    for _ in range(2):
        job = claim_one(database_url)
        with psycopg.connect(database_url, autocommit=True) as worker:
            assert operations.snooze_jobs(worker, [(job, timedelta(0))]) == set()
    assert row(conn, job_id) == ("pending", 0, 3, 2)
    job = claim_one(database_url)
    assert job.attempt == 1
    with psycopg.connect(database_url, autocommit=True) as worker:
        operations.complete_jobs(worker, [job])
    assert row(conn, job_id) == ("done", 1, 3, 2)
    listed = run_cli(["jobs", "list", "--json"], database_url)
    assert listed.returncode == 0, listed.stderr
    (shown,) = json.loads(listed.stdout)
    assert (shown["attempts"], shown["max_attempts"], shown["snoozes"]) == (1, 3, 2)


def test_a_job_with_the_largest_max_attempts_snoozes(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    job_id = pgbeat.enqueue(conn, "report", {}, max_attempts=2_147_483_647)
    assert job_id is not None
    job = claim_one(database_url)
    with psycopg.connect(database_url, autocommit=True) as worker:
        assert operations.snooze_jobs(worker, [(job, timedelta(0))]) == set()
    assert row(conn, job_id) == ("pending", 0, 2_147_483_647, 1)


def test_a_stale_run_cannot_write_over_a_snoozed_job(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Run A's lease lapses and the reaper takes its job back; run B claims it and snoozes,
    which gives the attempt back: the job holds A's attempt number again. A's late outcome
    must not complete it."""
    job_id = pgbeat.enqueue(conn, "report", {})
    assert job_id is not None
    stale = claim_one(database_url)
    conn.execute("UPDATE jobs SET locked_until = now() - interval '1 second'")
    with psycopg.connect(database_url, autocommit=True) as worker:
        operations.reap_expired(worker)
    fresh = claim_one(database_url)
    with psycopg.connect(database_url, autocommit=True) as worker:
        operations.snooze_jobs(worker, [(fresh, timedelta(hours=1))])
        assert row(conn, job_id)[:2] == ("pending", stale.attempt)
        operations.complete_jobs(worker, [stale])
    assert row(conn, job_id) == ("pending", 1, 8, 1)


def test_the_job_page_shows_the_snoozes(database_url: str, conn: psycopg.Connection[Any]) -> None:
    job_id = pgbeat.enqueue(conn, "report", {})
    assert job_id is not None
    for _ in range(2):
        job = claim_one(database_url)
        with psycopg.connect(database_url, autocommit=True) as worker:
            operations.snooze_jobs(worker, [(job, timedelta(0))])
    with dashboard(database_url) as ui, httpx.Client(timeout=30) as client:
        page = client.get(f"{ui.url}/jobs/{job_id}")
    assert page.status_code == 200, page.text[-500:]
    assert "<dt>Snoozes</dt><dd>2</dd>" in page.text
    assert "<dt>Attempts</dt><dd>0 of 8</dd>" in page.text
