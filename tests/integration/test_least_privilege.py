"""The roles of docs/least-privilege.sql, against a real server: what each must do succeeds,
what it must not do is refused, and no role but a worker can pass for a live worker.

Every action runs pgbeat's own code (the API, the worker's operations, the scheduler's
tick, the admin functions) on a connection logged in as a member of one group role, in a
transaction that is rolled back, so each starts from the same jobs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import pgbeat
from pgbeat import admin
from pgbeat.db import queries
from pgbeat.job import Job
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.worker import operations
from tests.helpers import run_cli, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
GRANTS = (Path(ROOT) / "docs" / "least-privilege.sql").read_text()
GROUPS = ("enqueue", "keys", "worker", "scheduler", "admin")
GROUP_NAME = re.compile(r"\bpgbeat_(enqueue|keys|worker|scheduler|admin)\b")


def role_url(database_url: str, role: str) -> str:
    """``database_url`` logging in as ``role`` (the test servers trust local logins)."""
    parts = urlsplit(database_url)
    if not parts.scheme:
        return psycopg.conninfo.make_conninfo(database_url, user=role, password=None)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@pytest.fixture
def logins(database_url: str, conn: psycopg.Connection[Any]) -> Iterator[dict[str, str]]:
    """docs/least-privilege.sql applied (with this test's own role names), and one login
    role in each group: group -> URL logging in as it."""
    suffix = uuid.uuid4().hex[:8]
    conn.execute(GROUP_NAME.sub(lambda m: f"{m.group(0)}_{suffix}", GRANTS).encode())
    urls = {}
    for group in GROUPS:
        login = f"login_{group}_{suffix}"
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(login), sql.Identifier(f"pgbeat_{group}_{suffix}")
            )
        )
        urls[group] = role_url(database_url, login)
    yield urls
    for role in [f"login_{g}_{suffix}" for g in GROUPS] + [f"pgbeat_{g}_{suffix}" for g in GROUPS]:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# -- the actions ---------------------------------------------------------------------------------

NOW = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)


def _job(conn: psycopg.Connection[Any], status: str) -> Job:
    row = conn.execute(
        "SELECT id, kind, payload, attempts, max_attempts, run_at, created_at, unique_key "
        "FROM jobs WHERE status = %s ORDER BY id LIMIT 1",
        (status,),
    ).fetchone()
    assert row is not None, status
    return Job._make(row)


def _beat(role: str) -> Callable[[psycopg.Connection[Any]], object]:
    def beat(conn: psycopg.Connection[Any]) -> object:
        row = {"id": f"forged-{role}", "role": role, "host": "h", "pid": 1, "version": "0"}
        return conn.execute(
            queries.PROCESSES_UPSERT, {**row, "schedules_hash": None, "details": "{}"}
        )

    return beat


def _tick(conn: psycopg.Connection[Any]) -> object:
    schedule = Schedule(name="beat", kind="noop", every=timedelta(minutes=1))
    scheduler = Scheduler(conn.info.dsn, [schedule], heartbeat=False)
    return scheduler.tick(conn, NOW)


ACTIONS: dict[str, Callable[[psycopg.Connection[Any]], object]] = {
    "enqueue": lambda c: pgbeat.enqueue(c, "noop", {}, unique_key=uuid.uuid4().hex),
    "enqueue_many": lambda c: pgbeat.enqueue_many(c, [pgbeat.NewJob("noop"), pgbeat.NewJob("x")]),
    "enqueue by key, ignore": lambda c: pgbeat.enqueue(c, "noop", {}, job_key="k"),
    "enqueue by key, replace": lambda c: pgbeat.enqueue(
        c, "noop", {}, job_key="k", on_conflict="replace"
    ),
    "cancel by key": lambda c: pgbeat.cancel(c, "noop", "live-key"),
    "read payloads": lambda c: c.execute("SELECT payload FROM jobs").fetchall(),
    "claim": lambda c: operations.claim_jobs(c, 10, timedelta(minutes=5), None),
    "complete": lambda c: operations.complete_jobs(c, [_job(c, "running")]),
    "fail": lambda c: operations.fail_jobs(c, [(_job(c, "running"), "boom")]),
    "reap": operations.reap_expired,
    "record attempts": lambda c: operations.record_attempts(
        c, [(_job(c, "running"), "retry", "boom", 0.1)]
    ),
    "worker heartbeat": _beat("worker"),
    "scheduler heartbeat": _beat("scheduler"),
    "insert periods (scheduler tick)": _tick,
    "upsert a schedule": lambda c: pgbeat.upsert_schedule(c, "api", every="1h", kind="noop"),
    "retry a failed job": lambda c: admin.retry_job(c, _job(c, "failed").id),
    "cancel a pending job": lambda c: admin.cancel_job(c, _job(c, "pending").id, "test"),
    "purge (delete jobs)": lambda c: admin.purge_jobs(c, timedelta(0)),
    "migrate (alter jobs)": lambda c: c.execute("ALTER TABLE jobs ADD COLUMN probe int"),
    "create a table": lambda c: c.execute("CREATE TABLE sneaky (x int)"),
}

# The matrix: group -> the actions it may take; every other action must be refused.
ALLOWED = {
    "enqueue": {"enqueue", "enqueue_many", "enqueue by key, ignore"},
    "keys": {
        "enqueue", "enqueue_many", "enqueue by key, ignore", "enqueue by key, replace",
        "cancel by key", "read payloads", "cancel a pending job",
    },
    "worker": {
        "read payloads", "claim", "complete", "fail", "reap", "record attempts",
        "worker heartbeat", "cancel a pending job",
    },
    "scheduler": {
        "enqueue", "enqueue_many", "scheduler heartbeat",
        "insert periods (scheduler tick)", "upsert a schedule",
    },
    "admin": set(ACTIONS),
}  # fmt: skip


def _setup_jobs(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        """
        INSERT INTO jobs (kind, payload, status, attempts, locked_until, finished_at, job_key)
        VALUES ('noop', '{"secret": 1}', 'pending', 0, NULL, NULL, 'live-key'),
               ('noop', '{}', 'running', 1, now() - interval '1 minute', NULL, NULL),
               ('noop', '{}', 'failed', 8, NULL, now() - interval '1 day', NULL),
               ('noop', '{}', 'done', 1, NULL, now() - interval '1 day', NULL)"""
    )


def _attempt(url: str, action: Callable[[psycopg.Connection[Any]], object]) -> str:
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction(force_rollback=True):
        try:
            with conn.transaction():
                action(conn)
        except psycopg.errors.InsufficientPrivilege:
            return "refused"
    return "allowed"


@pytest.mark.parametrize("group", GROUPS)
def test_each_role_may_do_its_job_and_nothing_else(
    group: str, logins: dict[str, str], conn: psycopg.Connection[Any]
) -> None:
    _setup_jobs(conn)
    found = {name: _attempt(logins[group], action) for name, action in ACTIONS.items()}
    expected = {name: "allowed" if name in ALLOWED[group] else "refused" for name in ACTIONS}
    assert found == expected


@pytest.mark.slow
def test_no_role_but_a_worker_can_pass_for_a_live_worker(
    logins: dict[str, str], database_url: str, conn: psycopg.Connection[Any]
) -> None:
    for group in ("enqueue", "keys", "scheduler"):
        with (
            psycopg.connect(logins[group], autocommit=True) as forger,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            _beat("worker")(forger)
    health = run_cli(["health"], logins["admin"])
    assert health.returncode == 1 and "no worker heartbeat" in health.stdout, health
    # A scheduler cannot take over a live worker's row either.
    with psycopg.connect(logins["worker"], autocommit=True) as worker:
        _beat("worker")(worker)
    with psycopg.connect(logins["scheduler"], autocommit=True) as scheduler:
        touched = scheduler.execute(
            "UPDATE pgbeat_processes SET heartbeat_at = now() WHERE role = 'worker' RETURNING id"
        ).fetchall()
        assert touched == []  # the worker's row is out of a scheduler's reach
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _beat("worker")(scheduler)
    health = run_cli(["health"], logins["admin"])  # positive control: a worker's beat counts
    assert health.returncode == 0 and "1 live worker" in health.stdout, health


def _done_by_source(conn: psycopg.Connection[Any]) -> tuple[int, bool]:
    """Done jobs: how many enqueued (no key); whether a scheduled period (key beat@...) is."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE unique_key IS NULL), "
        "coalesce(bool_or(unique_key LIKE 'beat@%%'), false) FROM jobs WHERE status = 'done'"
    ).fetchone()
    assert row is not None
    return int(row[0]), bool(row[1])


@pytest.mark.slow
def test_real_processes_run_with_their_roles(
    logins: dict[str, str], conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    enqueued = run_cli(["enqueue", "noop"], logins["enqueue"])
    assert enqueued.returncode == 0, enqueued.stderr
    schedules = tmp_path / "schedules.toml"
    schedules.write_text('[schedules.beat]\nevery = "1s"\nkind = "noop"\n')
    worker = start_cli(["worker", "tests.apps.jobs_app:registry"], logins["worker"], cwd=ROOT)
    scheduler = start_cli(["scheduler", "--schedules", str(schedules)], logins["scheduler"])
    try:
        wait_for(
            lambda: _done_by_source(conn) == (1, True), timeout=30, message="jobs of both done"
        )
    finally:
        outputs = [worker.stop(), scheduler.stop()]
    assert not any("Traceback" in out or "permission denied" in out for out in outputs), outputs
    assert worker.returncode == 0 and scheduler.returncode == 0, outputs
    purged = run_cli(["jobs", "purge", "--older-than", "1ms"], logins["admin"])
    assert purged.returncode == 0 and "deleted" in purged.stdout, purged.stderr
