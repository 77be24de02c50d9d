"""Upgrades keep a least-privilege deployment working: a database set up with the roles of
docs/least-privilege.sql at migration 0007 (the oldest the script supports) is upgraded by
``pgbeat migrate`` to the newest, which grants the roles what the new schema needs (the
claim's ``started_at`` of 0013, the snooze count of 0015, the ready parents of 0032, ...);
then a worker, a scheduler and an enqueuer run under their roles, and the worker role
claims a large fan-out where it is held, without an operator re-running the script."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pgbeat.db import migrate, roles
from pgbeat.db.sql import migrations as migration_sql
from tests.helpers import run_cli, run_cli_here
from tests.integration.test_least_privilege import role_url, roles_run_a_job_each
from tests.integration.test_workflows_roles import claims_a_large_fan_out_in_place

ROOT = str(Path(__file__).resolve().parents[2])
OLDEST_WITH_ROLES = 7


@pytest.fixture
def deployment(empty_database_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The database at migration 0007 with the roles (a suffix of this test's own), and a
    login in the worker, scheduler and enqueue groups: (suffix, group -> URL)."""
    suffix = "_u" + uuid.uuid4().hex[:8]
    logins = {}
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(migration_sql.MIGRATIONS_CREATE_TABLE)
        for migration in migrate.available_migrations():
            if migration.version <= OLDEST_WITH_ROLES:
                with conn.transaction():
                    conn.execute(migration.sql.encode())
                    record = {"version": migration.version, "name": migration.name}
                    conn.execute(migration_sql.MIGRATIONS_RECORD, record)
        roles.apply_roles(conn, suffix)
        for group in ("worker", "scheduler", "enqueue"):
            login = f"login_{group}{suffix}"
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                    sql.Identifier(login), sql.Identifier(f"pgbeat_{group}{suffix}")
                )
            )
            logins[group] = role_url(empty_database_url, login)
    yield suffix, logins
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        names = [f"login_{g}{suffix}" for g in ("worker", "scheduler", "enqueue")]
        names += [f"pgbeat_{g}{suffix}" for g in roles.GROUPS]
        for name in names:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.mark.slow
def test_migrate_keeps_a_least_privilege_deployment_working(
    empty_database_url: str, deployment: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    suffix, logins = deployment
    migrated = run_cli(["migrate"], empty_database_url)
    assert migrated.returncode == 0, migrated.stderr
    assert f"roles updated: pgbeat_*{suffix}" in migrated.stdout
    roles_run_a_job_each(logins, empty_database_url, tmp_path, timeout=60)
    with psycopg.connect(empty_database_url, autocommit=True) as owner:
        claims_a_large_fan_out_in_place(logins, owner)  # migration 0032's table, upgraded


def test_pgbeat_roles_prints_the_documented_script() -> None:
    printed = run_cli_here(["roles", "--print"], None)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == (Path(ROOT) / "docs" / "least-privilege.sql").read_text()
    bad = run_cli_here(["roles", "--print", "--suffix", "x; DROP"], None)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1, bad.stderr
