"""The classic PostgreSQL job-queue SQL runs unchanged against pgbeat's schema.

Claim, mark done, retry with backoff, reap and a daily report keyed by unique_key, as that
well-known design writes them (translated only from Go's $N placeholders).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

CLAIM = """
UPDATE jobs
SET status = 'running', attempts = attempts + 1, locked_until = now() + make_interval(secs => %s)
WHERE id = (
    SELECT id FROM jobs
    WHERE status = 'pending' AND run_at <= now()
    ORDER BY run_at
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
RETURNING id, kind, payload, attempts, max_attempts"""
REAP = """
UPDATE jobs SET status = 'pending', run_at = now()
WHERE status = 'running' AND locked_until < now()"""
DONE = "UPDATE jobs SET status = 'done', locked_until = NULL WHERE id = %s"
FAILED = "UPDATE jobs SET status = 'failed', last_error = %s, locked_until = NULL WHERE id = %s"
RETRY = """UPDATE jobs SET status = 'pending', last_error = %s, locked_until = NULL,
		run_at = now() + make_interval(secs => %s) WHERE id = %s"""
ENQUEUE = "INSERT INTO jobs (kind, payload) VALUES ('welcome_email', %s)"
DAILY_REPORT = """
		INSERT INTO jobs (kind, payload, unique_key, run_at)
		VALUES ('daily_report', %s, %s, %s)
		ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING"""
REQUEUE = "UPDATE jobs SET status = 'pending', attempts = 0 WHERE id = %s"


def test_lesson_statements_run_unchanged(conn: psycopg.Connection[Any]) -> None:
    for user_id in (1, 2, 3):
        conn.execute(ENQUEUE, (Jsonb({"user_id": user_id, "email": f"u{user_id}@x"}),))
    first = conn.execute(CLAIM, (30.0,)).fetchone()
    assert first is not None and first[1] == "welcome_email" and first[3] == 1
    conn.execute(DONE, (first[0],))

    second = conn.execute(CLAIM, (30.0,)).fetchone()
    assert second is not None
    conn.execute(RETRY, ("simulated provider 503", 2.0, second[0]))
    third = conn.execute(CLAIM, (0.0,)).fetchone()
    assert third is not None and third[0] not in (first[0], second[0])
    conn.execute(FAILED, ("gave up", third[0]))
    conn.execute(REQUEUE, (third[0],))

    conn.execute(
        "UPDATE jobs SET locked_until = now() - interval '1s', status = 'running' WHERE id = %s",
        (third[0],),
    )
    assert conn.execute(REAP).rowcount == 1

    day = datetime(2026, 3, 29, tzinfo=UTC)
    for _replica in range(3):
        conn.execute(DAILY_REPORT, (Jsonb({}), day.date().isoformat(), day + timedelta(hours=2)))
    rows = conn.execute("SELECT id, status, attempts, last_error FROM jobs ORDER BY id").fetchall()
    statuses = {row[0]: row[1] for row in rows}
    assert statuses[first[0]] == "done"
    assert statuses[second[0]] == "pending"
    assert statuses[third[0]] == "pending"
    assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'daily_report'").fetchone() == (1,)
