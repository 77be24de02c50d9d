"""Every claim records when its run started (migration 0013), by the clock of its lease, and
a job put back to pending keeps its last start until its next claim replaces it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.db.sql.jobs import testing as testing_sql
from pgbeat.worker import operations
from tests.helpers import claim_statements, run_cli
from tests.integration.ui_support import dashboard

LEASE = timedelta(minutes=5)
CLAIMS: dict[str, LiteralString] = {
    **claim_statements(),
    "JOBS_CLAIM_NEXT_DUE": testing_sql.JOBS_CLAIM_NEXT_DUE,
}
# Every parameter any of them takes: the default queue, without limits for the fast claims
# and with room for the limited ones (set by the test), no rate and no starts recorded; the
# claims from a position (claim_after.py) from before the test's job.
PARAMS: dict[str, Any] = {
    "limit": 10, "lease": LEASE, "kinds": None, "queues": None, "held": [],
    "queue": "default", "now": None, "scan": 256, "keys": 256, "after": None, "steps": 1,
    "kind": "k", "after_priority": 0, "after_run_at": "-infinity", "after_id": 0,
}  # fmt: skip


def _started(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT status, started_at, locked_until - started_at, started_at - run_at"
        " FROM jobs ORDER BY id"
    ).fetchall()


def _clock(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_each_claim_statement_sets_started_at_with_its_lease(
    conn: psycopg.Connection[Any], name: str
) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, limit_key)"
        " VALUES ('k', '{}', now() - interval '1 minute', 'key-a')"
    )
    assert _started(conn)[0][1] is None  # never run
    if name == "JOBS_CLAIM_ONE_HEAD_AFTER":  # the head of the queue's jobs without a key
        conn.execute("UPDATE jobs SET limit_key = NULL")
    if name == "JOBS_CLAIM_LIMITED":  # the limited claims read the queue's own settings
        pgbeat.configure_queue(conn, "default", concurrency=5)
    elif name.startswith("JOBS_CLAIM_LIMITED"):
        pgbeat.configure_queue(conn, "default", key_concurrency=5)
    elif name == "JOBS_CLAIM_FAIR":
        pgbeat.configure_queue(conn, "default", fair=True)
    before = _clock(conn)
    claimed = conn.execute(CLAIMS[name], PARAMS).fetchall()
    after = _clock(conn)
    assert len(claimed) == 1
    [(status, started, lease, wait)] = _started(conn)
    assert status == "running" and before <= started <= after
    assert lease == LEASE  # the lease's clock, to the microsecond
    assert wait >= timedelta(minutes=1)


def test_the_testing_drain_starts_its_runs_at_the_time_it_is_given(
    conn: psycopg.Connection[Any],
) -> None:
    later = datetime(2031, 1, 1, tzinfo=UTC)
    conn.execute("INSERT INTO jobs (kind, payload, run_at) VALUES ('k', '{}', %s)", (later,))
    conn.execute(testing_sql.JOBS_CLAIM_NEXT_DUE, {**PARAMS, "now": later})
    [(_, started, lease, wait)] = _started(conn)
    assert started == later and lease == LEASE and wait == timedelta(0)


def test_a_retried_job_keeps_its_last_start_until_its_next_claim(
    conn: psycopg.Connection[Any],
) -> None:
    pgbeat.enqueue(conn, "k", {})
    [job] = operations.claim_jobs(conn, 1, LEASE, None)
    [(_, first, _, _)] = _started(conn)
    operations.retry_jobs(conn, [(job, "boom", timedelta(0))])
    [(status, kept, _, _)] = _started(conn)
    assert status == "pending" and kept == first
    [again] = operations.claim_jobs(conn, 1, LEASE, None)
    operations.complete_jobs(conn, [again])
    [(status, second, _, _)] = _started(conn)
    assert status == "done" and second > first


def test_a_done_jobs_run_is_shown_by_the_cli_and_the_dashboard(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """`pgbeat jobs show` prints started_at; the job's page gives its run's duration."""
    job_id = pgbeat.enqueue(conn, "k", {})
    conn.execute(
        "UPDATE jobs SET status = 'done', attempts = 1,"
        " started_at = now() - interval '2.5 s', finished_at = now() WHERE id = %s",
        (job_id,),
    )
    shown = run_cli(["jobs", "show", str(job_id), "--json"], database_url)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["started_at"] is not None
    with dashboard(database_url) as ui:
        page = httpx.get(f"{ui.url}/jobs/{job_id}", timeout=10)
    assert page.status_code == 200
    done_row = page.text.split('id="attempts-h"', 1)[1].split("</tbody>", 1)[0]
    assert "2.5s" in done_row, done_row
