"""The dashboard's retry of failed jobs respects job keys, as ``pgbeat jobs retry`` does.

A key has at most one live job: of several failed jobs of one key only the newest comes
back, none whose key a live job holds, and a collision never aborts the other retries.
"""

from __future__ import annotations

from typing import Any

import psycopg

import pgbeat
from pgbeat.ui import jobs_data
from pgbeat.ui.filters import JobFilter


def _failed(conn: psycopg.Connection[Any], key: str | None) -> int:
    job_id: int | None = pgbeat.enqueue(conn, "remind", {}, job_key=key)
    assert job_id is not None
    conn.execute(
        "UPDATE jobs SET status = 'failed', attempts = 1, finished_at = now() WHERE id = %s",
        (job_id,),
    )
    return job_id


def _statuses(conn: psycopg.Connection[Any], ids: list[int]) -> list[str]:
    rows = conn.execute("SELECT id, status FROM jobs WHERE id = ANY(%s)", (ids,)).fetchall()
    by_id = dict(rows)
    return [by_id[i] for i in ids]


def _scenario(conn: psycopg.Connection[Any]) -> list[int]:
    older = _failed(conn, "user:1")
    newer = _failed(conn, "user:1")  # the key's newest failed job
    held = _failed(conn, "user:2")
    live = pgbeat.enqueue(conn, "remind", {}, job_key="user:2")  # user:2 is live again
    plain = _failed(conn, None)
    assert live is not None
    return [older, newer, held, live, plain]


def test_retry_of_checked_rows_keeps_one_live_job_per_key(
    conn: psycopg.Connection[Any],
) -> None:
    older, newer, held, live, plain = _scenario(conn)
    retried = jobs_data.act_on_ids(conn, "retry", [older, newer, held, plain], "test")
    assert sorted(retried) == sorted([newer, plain])
    assert _statuses(conn, [older, newer, held, live, plain]) == [
        "failed",
        "pending",
        "failed",
        "pending",
        "pending",
    ]


def test_retry_of_all_matching_keeps_one_live_job_per_key(
    conn: psycopg.Connection[Any],
) -> None:
    older, newer, held, live, plain = _scenario(conn)
    retried = jobs_data.act_on_matching(
        conn, "retry", JobFilter(status="failed"), (None, plain), None, "test"
    )
    assert sorted(retried) == sorted([newer, plain])
    assert _statuses(conn, [older, held, live]) == ["failed", "failed", "pending"]
