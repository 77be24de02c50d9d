"""The schema: what migrations create, that they apply once under concurrency, and --print."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pgbeat.db.migrate import apply_migrations, available_migrations, pending_migrations
from tests.helpers import run_cli, run_cli_at_once

EXPECTED_COLUMNS = {
    # name: (type, nullable, default contains)
    "id": ("bigint", "NO", None),
    "kind": ("text", "NO", None),
    "payload": ("jsonb", "NO", None),
    "status": ("text", "NO", "'pending'"),
    "attempts": ("integer", "NO", "0"),
    "max_attempts": ("integer", "NO", "8"),
    "run_at": ("timestamp with time zone", "NO", "now()"),
    "locked_until": ("timestamp with time zone", "YES", None),
    "last_error": ("text", "YES", None),
    "unique_key": ("text", "YES", None),
    "created_at": ("timestamp with time zone", "NO", "now()"),
    "keep_until": ("timestamp with time zone", "YES", None),
    "finished_at": ("timestamp with time zone", "YES", None),
    "job_key": ("text", "YES", None),
    "superseded_at": ("timestamp with time zone", "YES", None),
    "queue": ("text", "NO", "'default'"),
    "priority": ("smallint", "NO", "0"),
    "limit_key": ("text", "YES", None),
    "result": ("jsonb", "YES", None),
    "meta": ("jsonb", "YES", None),
    "cancel_requested_at": ("timestamp with time zone", "YES", None),
    "started_at": ("timestamp with time zone", "YES", None),
    "tags": ("ARRAY", "YES", None),
    "snoozes": ("integer", "NO", "0"),
    "workflow_id": ("bigint", "YES", None),
}


def schema_of(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    columns = {
        name: (data_type, nullable, default)
        for name, data_type, nullable, default in conn.execute(
            "SELECT column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_name = 'jobs'"
        )
    }
    indexes = dict(
        conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs'"
        ).fetchall()
    )
    checks = [
        row[0]
        for row in conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'jobs'::regclass AND contype = 'c'"
        )
    ]
    identity = conn.execute(
        "SELECT is_identity, identity_generation FROM information_schema.columns "
        "WHERE table_name = 'jobs' AND column_name = 'id'"
    ).fetchone()
    return {"columns": columns, "indexes": indexes, "checks": checks, "identity": identity}


def test_migrated_schema_is_what_the_code_expects(conn: psycopg.Connection[Any]) -> None:
    schema = schema_of(conn)
    assert set(schema["columns"]) == set(EXPECTED_COLUMNS)
    for name, (data_type, nullable, default) in EXPECTED_COLUMNS.items():
        actual_type, actual_nullable, actual_default = schema["columns"][name]
        assert (actual_type, actual_nullable) == (data_type, nullable), name
        if default is not None:
            assert default in (actual_default or ""), name
    assert schema["identity"] == ("YES", "ALWAYS")
    indexes = schema["indexes"]
    assert "jobs_pkey" in indexes
    assert "(run_at) WHERE (status = 'pending'::text)" in indexes["jobs_ready"]
    assert indexes["jobs_unique"].startswith("CREATE UNIQUE INDEX jobs_unique")
    assert "(kind, unique_key) WHERE (unique_key IS NOT NULL)" in indexes["jobs_unique"]
    assert "WHERE (status = 'running'::text)" in indexes["jobs_running"]
    assert any(
        "'pending'" in c
        and "'running'" in c
        and "'done'" in c
        and "'failed'" in c
        and "'cancelled'" in c
        for c in schema["checks"]
    )
    assert indexes["jobs_live_key"].startswith("CREATE UNIQUE INDEX jobs_live_key")
    assert (
        "(kind, job_key) WHERE ((job_key IS NOT NULL) AND (superseded_at IS NULL)"
        in (indexes["jobs_live_key"])
    )
    assert pending_migrations(conn) == []
    processes = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'pgbeat_processes'"
    ).fetchall()
    assert {"id", "role", "host", "pid", "version", "heartbeat_at", "schedules_hash"} <= {
        r[0] for r in processes
    }


def test_the_start_column_is_added_without_rewriting_a_filled_table(
    empty_database_url: str,
) -> None:
    """Migration 0013 on a table with rows: the same file afterwards, so no rewrite, and
    the rows have no start (the performance view leaves them out)."""
    [start] = [m for m in available_migrations() if m.name == "started_at"]
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        apply_migrations(conn)
        conn.execute("ALTER TABLE jobs DROP COLUMN started_at")
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 50)"
        )
        query = "SELECT pg_relation_filenode('jobs')"
        before = conn.execute(query).fetchone()
        conn.execute(start.sql.encode())
        assert conn.execute(query).fetchone() == before
        assert conn.execute("SELECT count(started_at) FROM jobs").fetchone() == (0,)
    assert start.version == 13


def test_migrations_are_idempotent(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        first = apply_migrations(conn)
        second = apply_migrations(conn)
        recorded = conn.execute("SELECT version FROM pgbeat_migrations ORDER BY 1").fetchall()
    assert [m.version for m in first] == [m.version for m in available_migrations()]
    assert second == []
    assert [r[0] for r in recorded] == [m.version for m in available_migrations()]


@pytest.mark.slow
def test_ten_concurrent_migrate_processes_apply_each_file_once(empty_database_url: str) -> None:
    outputs = run_cli_at_once(["migrate"], empty_database_url, 10, timeout=60)
    applied_lines = [
        line for out, _ in outputs for line in out.splitlines() if line.startswith("applied")
    ]
    assert len(applied_lines) == len(available_migrations())
    with psycopg.connect(empty_database_url) as conn:
        counts = conn.execute(
            "SELECT version, count(*) FROM pgbeat_migrations GROUP BY 1"
        ).fetchall()
    assert sorted(counts) == [(m.version, 1) for m in available_migrations()]


@pytest.mark.slow
def test_printed_sql_builds_the_same_schema(
    empty_database_url: str, conn: psycopg.Connection[Any]
) -> None:
    printed = run_cli(["migrate", "--print"], database_url=None)
    assert printed.returncode == 0, printed.stderr
    with psycopg.connect(empty_database_url, autocommit=True) as fresh:
        fresh.execute(printed.stdout.encode())
        assert schema_of(fresh) == schema_of(conn)
        assert pending_migrations(fresh) == []
        # and pgbeat migrate agrees there is nothing left to do
        assert apply_migrations(fresh) == []


def test_migrate_against_unreachable_database_is_one_line() -> None:
    result = run_cli(["migrate"], database_url="postgresql://nobody:secret@127.0.0.1:1/none")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "database unavailable" in result.stderr
    assert "secret" not in result.stderr
    assert "Traceback" not in result.stderr
