"""Two apps in two schemas of one database, each with its own `pgbeat worker` and
`pgbeat scheduler` processes: nothing crosses (jobs, schedules, queues, notifications,
cancels, retention turns, metrics)."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any, LiteralString

import psycopg
import pytest

import pgbeat
from pgbeat.db.schemas import with_schema
from tests.apps.steer_app import SETUP
from tests.helpers import CliProcess, free_port, run_cli, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
APP = "tests.apps.steer_app:registry"
SCHEMAS = ("app_a", "app_b")


@pytest.fixture
def apps(database_url: str) -> dict[str, str]:
    """app_a and app_b migrated in one database, with the test app's tables in each: the
    URL of each schema."""
    urls = {}
    for schema in SCHEMAS:
        done = run_cli(["migrate", "--schema", schema], database_url)
        assert done.returncode == 0, done.stderr
        urls[schema] = with_schema(database_url, schema)
        with psycopg.connect(urls[schema], autocommit=True) as conn:
            conn.execute(SETUP.encode())
    return urls


def worker(database_url: str, schema: str, started: list[CliProcess], *flags: str) -> CliProcess:
    """A worker of ``schema``: app_a's told by --schema, app_b's by PGBEAT_SCHEMA."""
    if schema == "app_a":
        process = start_cli(["worker", APP, "--schema", schema, *flags], database_url, cwd=ROOT)
    else:
        process = start_cli(["worker", APP, *flags], database_url, cwd=ROOT, PGBEAT_SCHEMA=schema)
    started.append(process)
    return process


def value(url: str, statement: LiteralString, *args: object) -> Any:
    with psycopg.connect(url) as conn:
        row = conn.execute(statement, args).fetchone()
        return row[0] if row else None


def enqueue(url: str, kind: str, payload: dict[str, Any] | None = None, **fields: Any) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = pgbeat.enqueue(conn, kind, payload or {}, **fields)
    assert job_id is not None
    return job_id


def holds(url: str, statement: LiteralString, what: str, *args: object) -> None:
    """Wait until ``statement`` (one boolean) is true in ``url``'s schema."""
    wait_for(lambda: value(url, statement, *args) is True, timeout=60, message=what)


def status(url: str, job_id: int) -> str:
    return str(value(url, "SELECT status FROM jobs WHERE id = %s", job_id))


@pytest.mark.slow
def test_each_apps_worker_runs_its_own_jobs_only(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    workers = {s: worker(database_url, s, started, "--concurrency", "4") for s in SCHEMAS}
    for schema in SCHEMAS:
        for _ in range(8):
            enqueue(apps[schema], "sleepy", {"seconds": 0})
    for schema in SCHEMAS:
        holds(apps[schema], "SELECT count(*) = 8 FROM jobs WHERE status = 'done'", "jobs done")
        pids = value(apps[schema], "SELECT array_agg(DISTINCT pid) FROM executions")
        assert pids == [workers[schema].pid]
    assert value(database_url, "SELECT count(*) FROM jobs") == 0  # public untouched


@pytest.mark.slow
def test_new_jobs_wake_their_own_apps_worker(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    """Workers that would poll once a minute pick a job up at once: the notification of
    their schema's channel reaches them (each apps' on its own channel)."""
    for schema in SCHEMAS:
        worker(database_url, schema, started, "--poll", "60s")
    for schema in SCHEMAS:  # both listening: a first job each, picked up by the first poll
        first = enqueue(apps[schema], "sleepy", {"seconds": 0})
        holds(apps[schema], "SELECT status = 'done' FROM jobs WHERE id = %s", "first", first)
    for schema in SCHEMAS:
        job_id = enqueue(apps[schema], "sleepy", {"seconds": 0})
        done = "SELECT status = 'done' FROM jobs WHERE id = %s"
        holds(apps[schema], done, "a job woken by its notification, not the poll", job_id)


@pytest.mark.slow
def test_a_paused_queue_in_one_app_does_not_pause_the_others(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    paused = run_cli(["queues", "pause", "mail", "--schema", "app_a"], database_url)
    assert paused.returncode == 0, paused.stderr
    for schema in SCHEMAS:
        worker(database_url, schema, started)
    in_a = enqueue(apps["app_a"], "sleepy", {"seconds": 0}, queue="mail")
    in_b = enqueue(apps["app_b"], "sleepy", {"seconds": 0}, queue="mail")
    control_a = enqueue(apps["app_a"], "sleepy", {"seconds": 0})
    wait_for(lambda: status(apps["app_b"], in_b) == "done", timeout=60, message="b's mail job")
    wait_for(lambda: status(apps["app_a"], control_a) == "done", timeout=60, message="a's default")
    assert status(apps["app_a"], in_a) == "pending"  # app_a's worker runs, its mail is paused
    listed = run_cli(["queues", "list", "--json"], database_url, PGBEAT_SCHEMA="app_b")
    assert '"paused": false' in listed.stdout or "mail" not in listed.stdout
    resumed = run_cli(["queues", "resume", "mail", "--schema", "app_a"], database_url)
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: status(apps["app_a"], in_a) == "done", timeout=60, message="a's mail job")


@pytest.mark.slow
def test_a_cancel_reaches_the_running_job_of_its_own_app_only(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    """Job 1 of app_a and job 1 of app_b run at once; cancelling app_a's stops it alone
    (a cancel notification is a job id: on a shared channel it would stop both)."""
    workers = [worker(database_url, s, started, "--timeout", "10m") for s in SCHEMAS]
    ids = {s: enqueue(apps[s], "sleepy", {"seconds": 120}) for s in SCHEMAS}
    assert ids["app_a"] == ids["app_b"]
    for schema in SCHEMAS:
        holds(apps[schema], "SELECT count(*) > 0 FROM executions", "job started")
    done = run_cli(["jobs", "cancel", str(ids["app_a"]), "--schema", "app_a"], database_url)
    assert done.returncode == 0, done.stderr
    wait_for(
        lambda: value(apps["app_a"], "SELECT how FROM ends") == "stopped",
        timeout=30,
        message="app_a's job told to stop",
    )
    wait_for(lambda: status(apps["app_a"], ids["app_a"]) == "cancelled", timeout=30)
    # A job of app_b inserted after the cancel: once app_b's worker has run it, its listener
    # has heard every notification sent before (a backend delivers them in commit order).
    later = enqueue(apps["app_b"], "sleepy", {"seconds": 0})
    holds(apps["app_b"], "SELECT status = 'done' FROM jobs WHERE id = %s", "b's later job", later)
    with psycopg.connect(apps["app_b"], autocommit=True) as conn:
        found = conn.execute(
            "SELECT status, cancel_requested_at FROM jobs WHERE id = %s", (ids["app_b"],)
        ).fetchone()
        assert found == ("running", None), workers[1].output()
        assert conn.execute(
            "SELECT count(*) FROM ends WHERE job_id = %s", (ids["app_b"],)
        ).fetchone() == (0,)
        assert pgbeat.cancel_job(conn, ids["app_b"])


SCHEDULES = """
[schedules.tick_{app}]
every = "1s"
kind = "sleepy"
"""


@pytest.mark.slow
def test_each_apps_scheduler_enqueues_its_own_schedules_only(
    database_url: str, apps: dict[str, str], started: list[CliProcess], tmp_path: Path
) -> None:
    for schema in SCHEMAS:
        path = tmp_path / f"{schema}.toml"
        path.write_text(SCHEDULES.format(app=schema))
        args = ["scheduler", "--schedules", str(path)]
        env = {} if schema == "app_a" else {"PGBEAT_SCHEMA": schema}
        flags = ["--schema", schema] if schema == "app_a" else []
        started.append(start_cli([*args, *flags], database_url, cwd=ROOT, **env))
    for schema in SCHEMAS:
        holds(apps[schema], "SELECT count(*) >= 2 FROM jobs", "periods")
    for schema in SCHEMAS:
        names = value(apps[schema], "SELECT array_agg(name) FROM pgbeat_schedules")
        keys = value(
            apps[schema], "SELECT array_agg(DISTINCT split_part(unique_key, '@', 1)) FROM jobs"
        )
        files = value(apps[schema], "SELECT count(*) FROM pgbeat_schedule_files")
        assert (names, keys, files) == ([f"tick_{schema}"], [f"tick_{schema}"], 1)
    assert value(database_url, "SELECT count(*) FROM pgbeat_schedules") == 0
    listed = run_cli(["schedules", "list"], database_url, PGBEAT_SCHEMA="app_b")
    assert "tick_app_b" in listed.stdout and "tick_app_a" not in listed.stdout


@pytest.mark.slow
def test_each_app_has_its_own_retention_turn(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    """Both apps' workers hold their turn at once, and each deletes its own old jobs."""
    for schema in SCHEMAS:
        with psycopg.connect(apps[schema], autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (kind, payload, status, finished_at) "
                "SELECT 'old', '{}', 'done', now() - interval '8 days' FROM generate_series(1, 5)"
            )
    workers = {s: worker(database_url, s, started, "--retention-every", "200ms") for s in SCHEMAS}
    for schema in SCHEMAS:
        holds(apps[schema], "SELECT count(*) = 0 FROM jobs WHERE kind = 'old'", "retention")
    holders = {s: value(apps[s], "SELECT holder FROM pgbeat_retention") for s in SCHEMAS}
    for schema in SCHEMAS:
        assert holders[schema].split(":")[1] == str(workers[schema].pid), holders
        assert value(apps[schema], "SELECT last_deleted + total_deleted FROM pgbeat_retention") >= 5


@pytest.mark.slow
def test_metrics_name_the_schema(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    port = free_port()
    worker(database_url, "app_b", started, "--metrics-port", str(port))
    enqueue(apps["app_b"], "sleepy", {"seconds": 0})
    body = wait_for(
        lambda: _scrape(port) if "pgbeat_jobs_total{" in _scrape(port) else "",
        timeout=60,
        interval=0.2,
        message="the worker's metrics",
    )
    samples = [line for line in body.splitlines() if line.startswith("pgbeat_")]
    assert samples
    assert all('schema="app_b"' in line for line in samples), samples


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return ""


@pytest.mark.slow
def test_pgbeat_run_migrates_and_runs_the_demo_in_its_schema(
    database_url: str, started: list[CliProcess]
) -> None:
    started.append(start_cli(["run", "--schema", "demo"], database_url, cwd=ROOT))
    demo = with_schema(database_url, "demo")
    wait_for(
        lambda: _done_in(demo) > 0, timeout=90, interval=0.2, message="the demo's jobs in demo"
    )
    assert value(database_url, "SELECT count(*) FROM jobs") == 0
    assert "created schema demo" in started[0].output()


@pytest.mark.slow
def test_worker_processes_started_by_processes_work_in_the_schema(
    database_url: str, apps: dict[str, str], started: list[CliProcess]
) -> None:
    worker(database_url, "app_a", started, "--processes", "2")
    for _ in range(6):
        enqueue(apps["app_a"], "sleepy", {"seconds": 0})
    holds(apps["app_a"], "SELECT count(*) = 6 FROM jobs WHERE status = 'done'", "jobs done")
    assert value(apps["app_b"], "SELECT count(*) FROM executions") == 0


def _done_in(url: str) -> int:
    try:
        return int(value(url, "SELECT count(*) FROM jobs WHERE status = 'done'"))
    except psycopg.errors.UndefinedTable:
        return 0  # not migrated yet
