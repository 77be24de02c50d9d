"""The worker keeps the history of attempts that did not succeed (migration 0006)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import pgbeat
from tests.helpers import wait_for


@pytest.mark.slow
def test_each_unsuccessful_attempt_is_recorded_with_its_error_and_worker(
    conn: psycopg.Connection[Any], run_worker: Callable[..., pgbeat.Worker]
) -> None:
    registry = pgbeat.Registry()
    calls: list[int] = []

    @registry.handler("flaky")
    def flaky(payload: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) < 3:
            raise ValueError(f"boom {len(calls)}")

    @registry.handler("doomed")
    def doomed(payload: dict[str, Any]) -> None:
        raise pgbeat.PermanentError("never")

    flaky_id = pgbeat.enqueue(conn, "flaky", {})
    doomed_id = pgbeat.enqueue(conn, "doomed", {})
    run_worker(registry)
    wait_for(
        lambda: (
            conn.execute("SELECT count(*) FROM jobs WHERE status IN ('done', 'failed')").fetchone()
            == (2,)
        ),
        timeout=20,
        message="both jobs finished",
    )
    rows = conn.execute(
        "SELECT job_id, attempt, outcome, error, worker, duration_s FROM pgbeat_job_attempts"
        " ORDER BY job_id, attempt"
    ).fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (flaky_id, 1, "retry"),
        (flaky_id, 2, "retry"),
        (doomed_id, 1, "failed"),
    ]
    assert rows[0][3].startswith("ValueError: boom 1\n")  # with its traceback
    assert "PermanentError: never" in rows[2][3]
    assert all(r[4].startswith(socket.gethostname() + ":") and r[5] >= 0 for r in rows)


def test_deleting_jobs_deletes_their_attempts(conn: psycopg.Connection[Any]) -> None:
    kept, gone = (pgbeat.enqueue(conn, "k", {}) for _ in range(2))
    conn.execute(
        "INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome) VALUES (%s, 1, 'retry'),"
        " (%s, 1, 'retry')",
        (kept, gone),
    )
    conn.execute("DELETE FROM jobs WHERE id = %s", (gone,))
    left = conn.execute("SELECT job_id FROM pgbeat_job_attempts").fetchall()
    assert left == [(kept,)]
