"""The connections each pgbeat process holds, as docs/operations.md's budget table says.

Counted in pg_stat_activity by application name, on real processes: a worker holds three
(claims, outcomes, LISTEN) and two with ``--pooler transaction`` (no LISTEN); a scheduler
holds one. Heartbeats ride on the loops' own connections.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from tests.helpers import schedules_toml, start_cli, statuses, wait_for

ACTIVITY = """
SELECT application_name FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()"""


def held(conn: psycopg.Connection[Any]) -> Counter[str]:
    """The connections held. A worker's retention round (every 10 s) opens one of its own
    for the round and closes it (docs/operations.md): not held, so left out here, or a
    round that falls in the test's window fails it (it did once in CI)."""
    names = Counter(row[0] for row in conn.execute(ACTIVITY))
    del names["pgbeat-retention"]
    return names


def settled(conn: psycopg.Connection[Any], expected: Counter[str]) -> Counter[str] | None:
    """The connections, once the process registered (heartbeat) and they match ``expected``."""
    beats = conn.execute("SELECT count(*) FROM pgbeat_processes").fetchone()
    now = held(conn)
    return now if beats == (1,) and now == expected else None


@pytest.mark.parametrize(
    ("pooler", "expected"),
    [
        ("none", Counter({"pgbeat-worker": 1, "pgbeat-worker-outcomes": 1, "pgbeat-listener": 1})),
        ("transaction", Counter({"pgbeat-worker": 1, "pgbeat-worker-outcomes": 1})),
    ],
)
@pytest.mark.slow
def test_worker_connections(
    database_url: str, conn: psycopg.Connection[Any], pooler: str, expected: Counter[str]
) -> None:
    worker = start_cli(
        ["worker", "tests.apps.jobs_app:registry", "--pooler", pooler, "--poll", "100ms"],
        database_url,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    try:
        pgbeat.enqueue(conn, "noop")  # its outcome opens the outcomes connection
        wait_for(lambda: worker.popen.poll() is not None or settled(conn, expected), timeout=20)
        assert worker.popen.poll() is None, worker.output()
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop")] * 50)
        conn.execute("SELECT pg_sleep(1.2)")  # claims, outcomes, polls, a beat: nothing new
        assert held(conn) == expected
        assert statuses(conn) == {"done": 51}
    finally:
        worker.stop()


def test_scheduler_connections(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = schedules_toml(tmp_path, '[schedules.tick]\nevery = "1s"\n')
    scheduler = start_cli(["scheduler", "--schedules", str(path)], database_url)
    try:
        expected = Counter({"pgbeat-scheduler": 1})
        wait_for(lambda: scheduler.popen.poll() is not None or settled(conn, expected), timeout=20)
        assert scheduler.popen.poll() is None, scheduler.output()
    finally:
        scheduler.stop()
