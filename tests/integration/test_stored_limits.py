"""Values the database would refuse get one clear line before they reach it.

Before, a 3 KB unique key reached PostgreSQL, which refused it (SQLSTATE 54000, index
row too large), and ``schedules check`` said OK for a NUL in a kind or a payload and a
max_attempts beyond int4: the scheduler then died at its first tick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.limits import MAX_ATTEMPTS, MAX_KEY_BYTES, MAX_KIND_LENGTH
from tests.helpers import run_cli, schedules_toml, statuses


@pytest.mark.parametrize(
    ("job", "fragment"),
    [
        (pgbeat.NewJob("k", unique_key="u" * 3000), "unique_key 'uuuu"),
        (pgbeat.NewJob("k" * 201), "has 201 characters, at most 200"),
        (pgbeat.NewJob("k\x00"), "NUL"),
        (pgbeat.NewJob("k", max_attempts=MAX_ATTEMPTS + 1), "at most 2147483647"),
    ],
)
def test_enqueue_refuses_what_the_database_would_refuse(
    conn: psycopg.Connection[Any], job: pgbeat.NewJob, fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        pgbeat.enqueue_many(conn, [job])
    with pytest.raises(ValueError, match=fragment):
        pgbeat.enqueue(conn, job.kind, unique_key=job.unique_key, max_attempts=job.max_attempts)
    assert statuses(conn) == {}


def test_the_largest_accepted_values_are_stored(conn: psycopg.Connection[Any]) -> None:
    kind = "日" * MAX_KIND_LENGTH  # 600 bytes
    key = "k" * MAX_KEY_BYTES
    job_id = pgbeat.enqueue(conn, kind, unique_key=key, max_attempts=MAX_ATTEMPTS)
    assert job_id is not None
    assert pgbeat.enqueue_many(conn, [pgbeat.NewJob(kind, unique_key=key[:-1] + "x")])


@pytest.mark.slow
def test_enqueue_command_refuses_a_3_kb_unique_key_in_one_line(database_url: str) -> None:
    result = run_cli(["enqueue", "k", "--unique-key", "u" * 3000], database_url)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"at most {MAX_KEY_BYTES} are allowed" in result.stderr
    assert "database" not in result.stderr  # not mistaken for an outage


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('kind = "a\\u0000b"', "NUL character"),
        ('payload = { note = "a\\u0000" }', "NUL character"),
        ("max_attempts = 99999999999", "less than or equal to 2147483647"),
    ],
)
@pytest.mark.slow
def test_schedules_check_rejects_what_the_database_refuses(
    tmp_path: Path, toml: str, fragment: str
) -> None:
    path = schedules_toml(tmp_path, f'[schedules.s]\nevery = "1m"\n{toml}\n')
    result = run_cli(["schedules", "check", str(path)], None)
    assert result.returncode == 1, result.stdout
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    path.write_text('[schedules.s]\nevery = "1m"\n', encoding="utf-8")  # positive control
    assert run_cli(["schedules", "check", str(path)], None).returncode == 0
