"""pgbeat runs with a role that can only read and write its own tables (docs/operations.md)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import pgbeat
from tests.helpers import run_cli, start_cli, statuses, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
GRANTS = (Path(ROOT) / "docs" / "least-privilege.sql").read_text()


def role_url(database_url: str, role: str) -> str:
    """``database_url`` logging in as ``role`` (the test servers trust local logins)."""
    parts = urlsplit(database_url)
    if not parts.scheme:
        return psycopg.conninfo.make_conninfo(database_url, user=role, password=None)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@pytest.fixture
def worker_role(conn: psycopg.Connection[Any]) -> Any:
    role = f"pgbeat_app_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    conn.execute(sql.SQL(GRANTS.replace("pgbeat_app", "{role}")).format(role=sql.Identifier(role)))
    yield role
    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.slow
def test_worker_scheduler_and_enqueue_run_with_least_privileges(
    database_url: str, conn: psycopg.Connection[Any], worker_role: str, tmp_path: Path
) -> None:
    url = role_url(database_url, worker_role)
    with psycopg.connect(url, autocommit=True) as limited:
        assert limited.execute("SELECT current_user").fetchone() == (worker_role,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            limited.execute("CREATE TABLE sneaky (x int)")
        pgbeat.enqueue(limited, "noop", {})
    enqueued = run_cli(["enqueue", "noop"], url)
    assert enqueued.returncode == 0, enqueued.stderr
    schedules = tmp_path / "schedules.toml"
    schedules.write_text('[schedules.beat]\nevery = "1s"\nkind = "noop"\n')
    worker = start_cli(["worker", "tests.apps.jobs_app:registry"], url, cwd=ROOT)
    scheduler = start_cli(["scheduler", "--schedules", str(schedules)], url)
    try:
        wait_for(lambda: statuses(conn).get("done", 0) >= 4, timeout=30, message="jobs done")
    finally:
        outputs = [worker.stop(), scheduler.stop()]
    assert not any("Traceback" in out or "permission denied" in out for out in outputs), outputs
    assert worker.returncode == 0 and scheduler.returncode == 0, outputs
    health = run_cli(["health"], url)
    assert health.returncode == 1 and "no worker heartbeat" in health.stdout  # cleaned up
