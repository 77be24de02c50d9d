"""The roles of docs/least-privilege.sql, against a real server: what each must do succeeds,
what it must not do is refused, and no role but a worker can pass for a live worker.

Two matrices. One runs pgbeat's own code (the API, the worker's operations, the scheduler's
tick, the admin functions) as a member of each group role. The other runs plain SQL, as
an operator or an attacker holding the role's grants would: that one is what "nothing
else" rests on, since pgbeat's code never tries what it should not. Every statement runs in
a transaction that is rolled back, so each starts from the same rows, and every statement
changes rows as the owner (pgbeat_admin), so a refusal under a role is the role's.
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
from pgbeat.db.sql import processes as process_sql
from pgbeat.job import Job
from pgbeat.jobs import actions
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.worker import operations
from tests.helpers import run_cli, schedules_toml, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
GRANTS = (Path(ROOT) / "docs" / "least-privilege.sql").read_text()
GROUPS = ("enqueue", "keys", "worker", "scheduler", "ui_viewer", "ui_admin", "admin")
GROUP_NAME = re.compile(r"\bpgbeat_(enqueue|keys|worker|scheduler|ui_viewer|ui_admin|admin)\b")


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
        "SELECT id, kind, payload, attempts, max_attempts, run_at, created_at, unique_key, "
        "queue, priority, limit_key, job_key "
        "FROM jobs WHERE status = %s ORDER BY id LIMIT 1",
        (status,),
    ).fetchone()
    assert row is not None, status
    return Job(*row)


def _beat(role: str) -> Callable[[psycopg.Connection[Any]], object]:
    def beat(conn: psycopg.Connection[Any]) -> object:
        row = {"id": f"forged-{role}", "role": role, "host": "h", "pid": 1, "version": "0"}
        return conn.execute(
            process_sql.PROCESSES_UPSERT, {**row, "schedules_hash": None, "details": "{}"}
        )

    return beat


def _tick(conn: psycopg.Connection[Any]) -> object:
    schedule = Schedule(name="beat", kind="noop", every=timedelta(minutes=1))
    scheduler = Scheduler(conn.info.dsn, [schedule], heartbeat=False)
    return scheduler.tick(conn, NOW)


def _late_alert(conn: psycopg.Connection[Any]) -> object:
    """A tick that judges a period late and enqueues its alert job (on_late)."""
    schedule = Schedule(
        name="watched",
        kind="noop",
        every=timedelta(minutes=1),
        deadline=timedelta(seconds=30),
        on_late="alert",
    )
    scheduler = Scheduler(conn.info.dsn, [schedule], heartbeat=False)
    scheduler.tick(conn, NOW)
    late = scheduler.tick(conn, NOW + timedelta(minutes=1)).late
    assert late, "no period was judged late"
    return late


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
    "judge deadlines, enqueue an alert": _late_alert,
    "upsert a schedule": lambda c: pgbeat.upsert_schedule(c, "api", every="1h", kind="noop"),
    "retry a failed job": lambda c: actions.retry_job(c, _job(c, "failed").id),
    "cancel a pending job": lambda c: actions.cancel_job(c, _job(c, "pending").id, "test"),
    "purge (delete jobs)": lambda c: actions.purge_jobs(c, timedelta(0)),
    "migrate (alter jobs)": lambda c: c.execute("ALTER TABLE jobs ADD COLUMN probe int"),
    "create a table": lambda c: c.execute("CREATE TABLE sneaky (x int)"),
}

# pgbeat's code: group -> the actions that run under it; every other one is refused. What
# a role can do beyond pgbeat's code is the plain-SQL matrix's business (MAY_RUN).
ALLOWED = {
    "enqueue": {"enqueue", "enqueue_many", "enqueue by key, ignore"},
    "keys": {
        "enqueue", "enqueue_many", "enqueue by key, ignore", "enqueue by key, replace",
        "cancel by key", "read payloads", "cancel a pending job",
    },
    "worker": {
        "read payloads", "claim", "complete", "fail", "reap", "record attempts",
        "worker heartbeat", "cancel a pending job",
        "purge (delete jobs)",  # retention's delete: finished jobs past keep_until only
    },
    "scheduler": {
        "scheduler heartbeat", "insert periods (scheduler tick)", "upsert a schedule",
        "judge deadlines, enqueue an alert",
    },
    "ui_viewer": {"read payloads"},
    # reap ends without an error but changes nothing (its lease check finds no expired
    # lease to take); complete and fail are refused: the dashboard's role may ask a running
    # job to stop, never end it (the plain-SQL matrix below shows it).
    "ui_admin": {
        "read payloads", "retry a failed job", "cancel a pending job", "cancel by key",
        "purge (delete jobs)", "reap",
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
def test_pgbeat_code_runs_under_each_role_as_far_as_its_grants_go(
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


def roles_run_a_job_each(
    logins: dict[str, str], url: str, tmp_path: Path, timeout: float = 30
) -> None:
    """The enqueue login enqueues a job, the worker login's ``pgbeat worker`` runs it, and
    the scheduler login's ``pgbeat scheduler`` a period of schedule 'beat' (also run): both
    end done, and neither process prints a traceback or a refusal."""
    enqueued = run_cli(["enqueue", "noop"], logins["enqueue"])
    assert enqueued.returncode == 0, enqueued.stderr
    schedules = schedules_toml(tmp_path, '[schedules.beat]\nevery = "1s"\nkind = "noop"\n')
    worker = start_cli(["worker", "tests.apps.jobs_app:registry"], logins["worker"], cwd=ROOT)
    scheduler = start_cli(["scheduler", "--schedules", str(schedules)], logins["scheduler"])
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            wait_for(
                lambda: _done_by_source(conn) == (1, True),
                timeout=timeout,
                message="jobs of both done",
            )
    finally:
        outputs = [worker.stop(), scheduler.stop()]
    assert not any("Traceback" in out or "permission denied" in out for out in outputs), outputs
    assert worker.returncode == 0 and scheduler.returncode == 0, outputs


@pytest.mark.slow
def test_real_processes_run_with_their_roles(
    logins: dict[str, str], database_url: str, tmp_path: Path
) -> None:
    roles_run_a_job_each(logins, database_url, tmp_path)
    purged = run_cli(["jobs", "purge", "--older-than", "1ms"], logins["admin"])
    assert purged.returncode == 0 and "deleted" in purged.stdout, purged.stderr


# -- the same, in plain SQL ------------------------------------------------------------------

# The schedule 'beat' (kind noop) is in pgbeat_schedules; its periods' keys are beat@<instant>.
STATEMENTS: dict[str, str] = {
    # reading
    "read payloads": "SELECT payload FROM jobs",
    "read heartbeats": "SELECT * FROM pgbeat_processes",
    "read schedules": "SELECT * FROM pgbeat_schedules",
    # inserting jobs
    "insert a pending job": "INSERT INTO jobs (kind, payload) VALUES ('noop', '{}')",
    "insert a job with a chosen id": (
        "INSERT INTO jobs (id, kind, payload) OVERRIDING SYSTEM VALUE "
        "VALUES (1000000000, 'noop', '{}')"
    ),
    "insert a done job": "INSERT INTO jobs (kind, payload, status) VALUES ('noop', '{}', 'done')",
    "insert a running job with an endless lease": (
        "INSERT INTO jobs (kind, payload, status, locked_until) "
        "VALUES ('noop', '{}', 'running', 'infinity')"
    ),
    "insert with created_at infinity": (
        "INSERT INTO jobs (kind, payload, created_at) VALUES ('noop', '{}', 'infinity')"
    ),
    "insert a run_at BC": (
        "INSERT INTO jobs (kind, payload, run_at) VALUES ('noop', '{}', '4000-01-01 BC')"
    ),
    "insert a schedule's future period": (
        "INSERT INTO jobs (kind, payload, unique_key) "
        "VALUES ('noop', '{}', 'beat@2030-01-01T00:00:00Z')"
    ),
    "insert a period as the scheduler does": (
        "INSERT INTO jobs (id, kind, payload, run_at, unique_key) OVERRIDING SYSTEM VALUE "
        "SELECT nextval(pg_get_serial_sequence('jobs', 'id')::regclass), 'noop', '{}', now(), "
        "'beat@2030-01-01T00:00:00Z'"
    ),
    "insert a period of another kind": (
        "INSERT INTO jobs (id, kind, payload, run_at, unique_key) OVERRIDING SYSTEM VALUE "
        "SELECT nextval(pg_get_serial_sequence('jobs', 'id')::regclass), 'other', '{}', now(), "
        "'beat@2030-01-01T00:00:00Z'"
    ),
    "insert a period with an id ahead of the sequence": (
        "INSERT INTO jobs (id, kind, payload, run_at, unique_key) OVERRIDING SYSTEM VALUE "
        "VALUES (1000000000, 'noop', '{}', now(), 'beat@2030-01-01T00:00:00Z')"
    ),
    "insert a manual run of a schedule": (
        "INSERT INTO jobs (id, kind, payload, run_at, unique_key) OVERRIDING SYSTEM VALUE "
        "SELECT id, 'noop', '{}', now(), 'beat@manual:' || id "
        "FROM (SELECT nextval(pg_get_serial_sequence('jobs', 'id')::regclass) AS id) AS n"
    ),
    # changing jobs
    "rewrite an unkeyed job's payload": (
        "UPDATE jobs SET payload = '{\"evil\": 1}' WHERE job_key IS NULL AND status = 'pending'"
    ),
    "rewrite the live job of a key": (
        "UPDATE jobs SET payload = '{\"new\": 1}', run_at = now() WHERE job_key = 'live-key'"
    ),
    "cancel the live job of a key": (
        "UPDATE jobs SET status = 'cancelled', finished_at = now() "
        "WHERE job_key = 'live-key' AND status = 'pending'"
    ),
    "ask a running job to stop": (
        "UPDATE jobs SET cancel_requested_at = now() WHERE status = 'running'"
    ),
    "extend a running job's lease": (
        "UPDATE jobs SET locked_until = now() + interval '1 hour' WHERE status = 'running'"
    ),
    "re-run a done job": (
        "UPDATE jobs SET status = 'pending', finished_at = NULL WHERE status = 'done'"
    ),
    "fail pending jobs without running them": (
        "UPDATE jobs SET status = 'failed', finished_at = now() WHERE status = 'pending'"
    ),
    "claim pending jobs": (
        "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
        "locked_until = now() + interval '5 minutes', started_at = now() "
        "WHERE status = 'pending'"
    ),
    "claim pending jobs with an endless lease": (
        "UPDATE jobs SET status = 'running', attempts = attempts + 1, locked_until = 'infinity' "
        "WHERE status = 'pending'"
    ),
    "complete a running job": (
        "UPDATE jobs SET status = 'done', locked_until = NULL, finished_at = now() "
        "WHERE status = 'running'"
    ),
    "store a running job's result": (
        "UPDATE jobs SET result = '{\"ok\": 1}' WHERE status = 'running'"
    ),
    "retry a failed job": (
        "UPDATE jobs SET status = 'pending', attempts = 0, run_at = now(), finished_at = NULL "
        "WHERE status = 'failed'"
    ),
    "cancel an unkeyed pending job": (
        "UPDATE jobs SET status = 'cancelled', finished_at = now() "
        "WHERE status = 'pending' AND job_key IS NULL"
    ),
    "run a pending job now": "UPDATE jobs SET run_at = now() WHERE status = 'pending'",
    "move a job to year 10000": (
        "UPDATE jobs SET run_at = '10000-01-01' WHERE status = 'pending'"
    ),
    "delete a pending job": "DELETE FROM jobs WHERE status = 'pending'",
    "delete a finished job": "DELETE FROM jobs WHERE status = 'done'",
    "delete a job its schedule keeps": "DELETE FROM jobs WHERE keep_until > now()",
    "truncate jobs": "TRUNCATE jobs",
    # heartbeats
    "beat as a worker": (
        "INSERT INTO pgbeat_processes (id, role, host, pid, version) "
        "VALUES ('w-new', 'worker', 'h', 1, '0')"
    ),
    "beat as a scheduler": (
        "INSERT INTO pgbeat_processes (id, role, host, pid, version) "
        "VALUES ('s-new', 'scheduler', 'h', 1, '0')"
    ),
    "insert a heartbeat from the future": (
        "INSERT INTO pgbeat_processes (id, role, host, pid, version, heartbeat_at) "
        "VALUES ('w-future', 'worker', 'h', 1, '0', 'infinity')"
    ),
    "keep a worker alive forever": (
        "UPDATE pgbeat_processes SET heartbeat_at = 'infinity' WHERE role = 'worker'"
    ),
    "renew a worker's heartbeat": (
        "UPDATE pgbeat_processes SET heartbeat_at = now() WHERE role = 'worker'"
    ),
    # attempts, schedules and their history
    "record an attempt": (
        "INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome) VALUES (1, 1, 'retry')"
    ),
    "create a schedule": (
        "INSERT INTO pgbeat_schedules (name, source, kind, every, definition_hash) "
        "VALUES ('new', 'api', 'noop', '1 hour', 'x')"
    ),
    "pause a schedule": (
        "UPDATE pgbeat_schedules SET paused = true, paused_at = now(), paused_by = 'x' "
        "WHERE name = 'beat'"
    ),
    "rewrite a schedule's payload": (
        "UPDATE pgbeat_schedules SET payload = '{\"evil\": 1}' WHERE name = 'beat'"
    ),
    "record a period in the history": (
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome) "
        "VALUES ('beat', now(), 'manual')"
    ),
    # the schema
    "alter jobs": "ALTER TABLE jobs ADD COLUMN probe int",
    "create a table": "CREATE TABLE sneaky (x int)",
}  # fmt: skip

READ = {"read payloads", "read heartbeats", "read schedules"}
ENQUEUE = {"insert a pending job"}
# The matrix in plain SQL: group -> the statements it may run; every other one must be
# refused or change nothing. docs/operations.md's table of roles is written from this.
MAY_RUN = {
    "enqueue": ENQUEUE,
    "keys": ENQUEUE | {
        "read payloads", "rewrite the live job of a key", "cancel the live job of a key",
        "run a pending job now",  # of a keyed job: a reschedule
    },
    "worker": {
        "read payloads", "read heartbeats", "claim pending jobs", "complete a running job",
        "store a running job's result",
        "run a pending job now", "move a job to year 10000", "beat as a worker",
        "renew a worker's heartbeat", "record an attempt",
        "cancel the live job of a key", "cancel an unkeyed pending job",
        "delete a finished job",  # retention: finished and past keep_until, in batches
        "ask a running job to stop", "extend a running job's lease",  # cancel; renewal
    },
    "scheduler": READ - {"read payloads"} | {
        "insert a period as the scheduler does", "insert a schedule's future period",
        "insert a manual run of a schedule", "beat as a scheduler", "create a schedule",
        "pause a schedule", "rewrite a schedule's payload", "record a period in the history",
    },
    "ui_viewer": READ,
    "ui_admin": READ | {
        "insert a manual run of a schedule", "cancel the live job of a key",
        "retry a failed job", "cancel an unkeyed pending job", "run a pending job now",
        "delete a finished job", "delete a job its schedule keeps", "pause a schedule",
        "record a period in the history",
        "re-run a done job",  # a retry of any job that is not running, as `pgbeat jobs retry`
        "ask a running job to stop",  # its cancel; ending the run stays the worker's
        # a schedule's backfill (its page offers it): the periods of a schedule, as the
        # scheduler inserts them
        "insert a period as the scheduler does", "insert a schedule's future period",
    },
    "admin": set(STATEMENTS),
}  # fmt: skip


def _setup_rows(conn: psycopg.Connection[Any]) -> None:
    _setup_jobs(conn)
    conn.execute(  # a period kept past its end for its schedule's catch-up window
        "INSERT INTO jobs (kind, payload, status, attempts, finished_at, keep_until)"
        " VALUES ('noop', '{}', 'done', 1, now(), now() + interval '1 day')"
    )
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('noop', '{\"unkeyed\": 1}')")
    conn.execute(
        "INSERT INTO pgbeat_schedules (name, source, kind, every, definition_hash) "
        "VALUES ('beat', 'api', 'noop', '1 minute', 'x')"
    )
    conn.execute(
        "INSERT INTO pgbeat_processes (id, role, host, pid, version) "
        "VALUES ('w-old', 'worker', 'h', 1, '0'), ('s-old', 'scheduler', 'h', 2, '0')"
    )


def _run(conn: psycopg.Connection[Any], statement: str) -> str:
    """What ``statement`` did on ``conn`` (logged in as one role), rolled back after."""
    with conn.transaction(force_rollback=True):
        try:
            with conn.transaction():
                cursor = conn.execute(statement.encode())
        except psycopg.errors.InsufficientPrivilege:
            return "refused"
    # row-level security hides the rows a role may not touch: nothing happens, no error
    return "refused" if cursor.rowcount == 0 else "allowed"


@pytest.mark.parametrize("group", GROUPS)
def test_each_role_may_do_its_job_and_nothing_else_in_plain_sql(
    group: str, logins: dict[str, str], conn: psycopg.Connection[Any]
) -> None:
    _setup_rows(conn)
    with psycopg.connect(logins[group], autocommit=True) as login:
        found = {name: _run(login, statement) for name, statement in STATEMENTS.items()}
    expected = {name: "allowed" if name in MAY_RUN[group] else "refused" for name in STATEMENTS}
    assert {n: v for n, v in found.items() if v != expected[n]} == {}


def test_the_grants_apply_again_and_keep_the_matrix(
    logins: dict[str, str], conn: psycopg.Connection[Any]
) -> None:
    """The file is rerun after every upgrade: a second run changes nothing."""
    suffix = (urlsplit(logins["enqueue"]).username or "").rsplit("_", 1)[1]
    conn.execute(GROUP_NAME.sub(lambda m: f"{m.group(0)}_{suffix}", GRANTS).encode())
    _setup_rows(conn)
    for group in ("enqueue", "worker", "ui_admin"):
        with psycopg.connect(logins[group], autocommit=True) as login:
            found = {name: _run(login, statement) for name, statement in STATEMENTS.items()}
        allowed = {name for name, outcome in found.items() if outcome == "allowed"}
        assert allowed == MAY_RUN[group], group
