"""Several apps in one database, without processes: `pgbeat migrate --schema`, the flag and
PGBEAT_SCHEMA on every command, the Python API on a connection in a schema, NOTIFY
channels and advisory lock keys of a schema, the script and the dashboard of a schema.
(tests/integration/test_schemas_processes.py runs workers and schedulers of two apps.)"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgbeat
from pgbeat.cli.main import build_parser
from pgbeat.db import migrate, schemas
from pgbeat.errors import UserError
from tests.helpers import free_port, run_cli, run_cli_at_once, run_cli_here, start_cli, wait_for

ROOT = Path(__file__).resolve().parents[2]


def in_schema(url: str, schema: str) -> str:
    return schemas.with_schema(url, schema)


@pytest.fixture
def two_apps(database_url: str) -> tuple[str, str]:
    """``app_a`` and ``app_b`` migrated beside ``public`` in one database."""
    for schema in ("app_a", "app_b"):
        done = run_cli_here(["migrate", "--schema", schema], database_url)
        assert done.returncode == 0, done.stderr
    return in_schema(database_url, "app_a"), in_schema(database_url, "app_b")


def count(url: str, table: str = "jobs") -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608 (fixed names)
        assert row is not None
        return int(row[0])


def test_migrate_schema_creates_it_and_installs_every_table_there(database_url: str) -> None:
    done = run_cli_here(["migrate", "--schema", "billing"], database_url)
    assert done.returncode == 0, done.stderr
    assert "created schema billing" in done.stdout
    with psycopg.connect(database_url) as conn:
        public = {
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
        billing = {
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'billing'")
        }
        versions = [r[0] for r in conn.execute("SELECT version FROM billing.pgbeat_migrations")]
    assert billing == public  # the same tables, none of them shared
    assert versions == [m.version for m in migrate.available_migrations()]
    again = run_cli_here(["migrate"], database_url, PGBEAT_SCHEMA="billing")
    assert (again.returncode, again.stdout.strip()) == (0, "schema is up to date")


def test_replicas_migrating_a_new_schema_at_once_create_it_once(database_url: str) -> None:
    """The schema is created once, each migration applied once, under the schema's lock."""
    results = run_cli_at_once(["migrate"], database_url, 6, PGBEAT_SCHEMA="fresh")
    assert sum("created schema fresh" in out for out, _ in results) == 1
    assert count(in_schema(database_url, "fresh"), "pgbeat_migrations") == len(
        migrate.available_migrations()
    )


def _leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                children = list(_leaf_parsers(sub))
                yield from ((f"{name} {child}".strip(), p) for child, p in children)
            return
    yield "", parser


def test_every_command_takes_the_schema_flag() -> None:
    leaves = dict(_leaf_parsers(build_parser()))
    assert len(leaves) > 25
    missing = [name for name, p in leaves.items() if "--schema" not in p._option_string_actions]
    assert missing == []


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "stats"],
        ["jobs", "list"],
        ["queues", "list"],
        ["schedules", "list"],
        ["status"],
        ["health"],
        ["enqueue", "k"],
        ["jobs", "show", "1"],
    ],
)
def test_a_command_refuses_a_schema_that_does_not_exist(database_url: str, args: list[str]) -> None:
    by_flag = run_cli_here([*args, "--schema", "nowhere"], database_url)
    by_env = run_cli_here(args, database_url, PGBEAT_SCHEMA="nowhere")
    for done in (by_flag, by_env):
        assert done.returncode == 1
        assert "schema 'nowhere' does not exist" in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["App", "1app", "pg_app", "a-b", "a b", "a" * 64, "a;drop"])
def test_a_bad_schema_name_is_refused_in_one_line(database_url: str, name: str) -> None:
    by_flag = run_cli_here(["jobs", "list", "--schema", name], database_url)
    by_env = run_cli_here(["jobs", "list"], database_url, PGBEAT_SCHEMA=name)
    for done in (by_flag, by_env):
        assert done.returncode == 1
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "schema" in done.stderr


def test_the_cli_with_the_flag_or_the_env_works_in_that_schema_only(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    a_url, b_url = two_apps
    by_flag = run_cli_here(["enqueue", "only_a", "--schema", "app_a"], database_url)
    by_env = run_cli_here(["enqueue", "only_b"], database_url, PGBEAT_SCHEMA="app_b")
    assert by_flag.returncode == by_env.returncode == 0, by_flag.stderr + by_env.stderr
    listed_a = run_cli_here(["jobs", "list", "--schema", "app_a"], database_url).stdout
    listed_b = run_cli_here(["jobs", "list"], database_url, PGBEAT_SCHEMA="app_b").stdout
    assert "only_a" in listed_a and "only_b" not in listed_a
    assert "only_b" in listed_b and "only_a" not in listed_b
    assert (count(a_url), count(b_url), count(database_url)) == (1, 1, 0)
    flag_wins = run_cli_here(
        ["jobs", "list", "--schema", "app_a"], database_url, PGBEAT_SCHEMA="app_b"
    )
    assert "only_a" in flag_wins.stdout


def test_the_python_api_works_on_a_connection_whose_search_path_starts_with_the_schema(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    a_url, b_url = two_apps
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET search_path TO app_a, public")
        job_id = pgbeat.enqueue(conn, "api_a", {"n": 1}, queue="q")
        pgbeat.pause_queue(conn, "q")
        pgbeat.upsert_schedule(conn, "every_a", every="1h")
        assert job_id is not None and pgbeat.cancel_job(conn, job_id)
    with psycopg.connect(a_url) as conn:
        assert conn.execute("SELECT kind, status FROM jobs").fetchall() == [("api_a", "cancelled")]
        assert conn.execute("SELECT name FROM pgbeat_schedules").fetchall() == [("every_a",)]
        assert conn.execute("SELECT paused FROM pgbeat_queues WHERE name = 'q'").fetchone() == (
            True,
        )
    for url in (b_url, database_url):
        assert count(url) == count(url, "pgbeat_schedules") == count(url, "pgbeat_queues") == 0


def _heard(conn: psycopg.Connection[Any], timeout: float = 0.5) -> list[str]:
    return [n.channel for n in conn.notifies(timeout=timeout, stop_after=5)]


def test_notifications_of_one_schema_never_reach_the_other(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    """A LISTEN in app_a hears app_a's new jobs, finished jobs and cancels, never app_b's;
    public keeps the channel names it always had."""
    a_url, b_url = two_apps
    with (
        psycopg.connect(a_url, autocommit=True) as listen_a,
        psycopg.connect(database_url, autocommit=True) as listen_public,
        psycopg.connect(b_url, autocommit=True) as b,
        psycopg.connect(a_url, autocommit=True) as a,
    ):
        channels = [
            listen_a.execute("SELECT pgbeat_listen(%s)", (base,)).fetchone()[0]  # type: ignore[index]
            for base in ("pgbeat_jobs", "pgbeat_finished", "pgbeat_cancel", "pgbeat_schedules")
        ]
        assert channels == [
            "pgbeat_jobs:app_a",
            "pgbeat_finished:app_a",
            "pgbeat_cancel:app_a",
            "pgbeat_schedules:app_a",
        ]
        listen_public.execute("LISTEN pgbeat_jobs")
        b_id = pgbeat.enqueue(b, "in_b")
        pgbeat.cancel_job(b, b_id or 0)
        pgbeat.upsert_schedule(b, "s", every="1h")
        assert _heard(listen_a) == [] and _heard(listen_public, 0.1) == []
        a_id = pgbeat.enqueue(a, "in_a")
        assert _heard(listen_a) == ["pgbeat_jobs:app_a"]
        pgbeat.cancel_job(a, a_id or 0)
        assert _heard(listen_a) == ["pgbeat_finished:app_a"]
        pgbeat.upsert_schedule(a, "s", every="1h")
        assert _heard(listen_a) == ["pgbeat_schedules:app_a"]
        pgbeat.enqueue(listen_public, "in_public")
        assert _heard(listen_public) == ["pgbeat_jobs"] and _heard(listen_a, 0.1) == []


def test_a_workflows_notifications_stay_in_its_schema(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    """A parent step cancelled in app_a cancels its child by trigger (migration 0017): the
    notification of that end goes to app_a's channel."""
    a_url, _ = two_apps
    with (
        psycopg.connect(a_url, autocommit=True) as listen_a,
        psycopg.connect(database_url, autocommit=True) as listen_public,
        psycopg.connect(a_url, autocommit=True) as a,
    ):
        listen_a.execute("SELECT pgbeat_listen('pgbeat_finished')")
        listen_public.execute("LISTEN pgbeat_finished")
        flow = pgbeat.Workflow()
        parent = flow.add("parent")
        flow.add("child", after=[parent])
        steps = pgbeat.enqueue_workflow(a, flow).jobs
        pgbeat.cancel_job(a, steps["parent"])
        heard = [(n.channel, n.payload) for n in listen_a.notifies(timeout=1, stop_after=2)]
        assert heard == [
            ("pgbeat_finished:app_a", str(steps["parent"])),
            ("pgbeat_finished:app_a", str(steps["child"])),
        ]
        assert _heard(listen_public, 0.1) == []


def test_advisory_lock_keys_differ_per_schema_and_public_keeps_its_own(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    key = int.from_bytes(b"pgbeat.s", "big", signed=True)
    found = {}
    for name, url in (("public", database_url), ("app_a", two_apps[0]), ("app_b", two_apps[1])):
        with psycopg.connect(url) as conn:
            found[name] = conn.execute("SELECT pgbeat_lock_key(%s)", (key,)).fetchone()[0]  # type: ignore[index]
    assert found["public"] == key
    assert len(set(found.values())) == 3


def test_a_lock_held_in_one_schema_does_not_block_the_other(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    """Migrations of app_a wait for app_a's lock only (the lock of `pgbeat migrate`)."""
    a_url = two_apps[0]
    with psycopg.connect(a_url) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(pgbeat_lock_key(%s))", (migrate.MIGRATION_LOCK_KEY,)
        )
        done = run_cli(["migrate", "--schema", "app_b"], database_url, timeout=30)
        assert done.returncode == 0, done.stderr
        blocked = subprocess.Popen(
            [sys.executable, "-m", "pgbeat", "migrate", "--schema", "app_a"],
            env={**os.environ, "DATABASE_URL": database_url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with psycopg.connect(database_url, autocommit=True) as watcher:
            wait_for(
                lambda: watcher.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()[0],  # type: ignore[index]
                timeout=30,
                message="app_a's migrate waiting for app_a's lock",
            )
        holder.rollback()
    out, err = blocked.communicate(timeout=60)
    assert blocked.returncode == 0, out + err


def test_migrate_print_schema_installs_into_the_schema(database_url: str) -> None:
    script = run_cli_here(["migrate", "--print", "--schema", "printed"], None)
    assert script.returncode == 0, script.stderr
    assert script.stdout.startswith(
        'CREATE SCHEMA IF NOT EXISTS "printed";\nSET search_path TO "printed";'
    )
    applied = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", database_url],
        input=script.stdout,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    up_to_date = run_cli_here(["migrate", "--schema", "printed"], database_url)
    assert up_to_date.stdout.strip() == "schema is up to date"


def test_with_schema_keeps_the_urls_own_options() -> None:
    url = "postgresql://u@h/db?options=-c%20statement_timeout%3D5s%20-c%20search_path%3Dold"
    params = psycopg.conninfo.conninfo_to_dict(schemas.with_schema(url, "app_a"))
    assert params["options"] == "-c statement_timeout=5s -c search_path=app_a"
    with pytest.raises(UserError):
        schemas.check_schema_name("Upper")


@pytest.mark.slow
def test_pgbeat_ui_schema_serves_that_schema_and_shows_it(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    with psycopg.connect(two_apps[1], autocommit=True) as conn:
        pgbeat.enqueue(conn, "shown_in_b")
    with psycopg.connect(two_apps[0], autocommit=True) as conn:
        pgbeat.enqueue(conn, "hidden_in_a")
    port = free_port()
    ui = start_cli(["ui", "--schema", "app_b", "--port", str(port)], database_url, cwd=str(ROOT))
    try:
        page = wait_for(lambda: _get(f"http://127.0.0.1:{port}/jobs"), timeout=60, interval=0.2)
    finally:
        ui.stop()
    assert '<code id="db-schema">app_b</code>' in page
    assert "shown_in_b" in page and "hidden_in_a" not in page


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return ""


def test_the_least_privilege_script_applies_to_a_schema(
    database_url: str, two_apps: tuple[str, str]
) -> None:
    """docs/least-privilege.sql run with app_a first on search_path (and its roles renamed
    for the app, as docs/schemas.md shows): an enqueue login enqueues in app_a, and has no
    right in app_b."""
    grants = (ROOT / "docs" / "least-privilege.sql").read_text()
    suffix = f"app_a_{uuid.uuid4().hex[:6]}"
    roles = re.compile(r"\bpgbeat_(enqueue|keys|worker|scheduler|ui_viewer|ui_admin|admin)\b")
    login = f"web_{suffix}"
    a_url = two_apps[0]
    with psycopg.connect(a_url, autocommit=True) as admin:
        admin.execute(roles.sub(lambda m: f"{m.group(0)}_{suffix}", grants).encode())
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(login), sql.Identifier(f"pgbeat_enqueue_{suffix}")
            )
        )
        owner = admin.execute(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'jobs' AND schemaname = 'app_a'"
        ).fetchone()
        assert owner == (f"pgbeat_admin_{suffix}",)
    as_login = psycopg.conninfo.make_conninfo(database_url, user=login)
    try:
        done = run_cli_here(["enqueue", "from_web", "--schema", "app_a"], as_login)
        assert done.returncode == 0, done.stderr
        refused = run_cli_here(["enqueue", "from_web", "--schema", "app_b"], as_login)
        assert refused.returncode == 1 and "permission denied" in refused.stderr
        assert count(a_url) == 1 and count(two_apps[1]) == 0
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            for role in [login] + [
                f"pgbeat_{g}_{suffix}"
                for g in (
                    "enqueue",
                    "keys",
                    "worker",
                    "scheduler",
                    "ui_viewer",
                    "ui_admin",
                    "admin",
                )
            ]:
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
