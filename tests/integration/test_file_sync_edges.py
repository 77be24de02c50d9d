"""The schedules file at its edges: a name code gives back, an empty file on reload, and a
history retention shorter than a catch-up window."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.scheduling.sync import load_for_reload
from tests.helpers import schedules_toml

Conn = psycopg.Connection[Any]
FILE = """
[schedules.shared]
every = "1m"
kind = "from_file"
"""


def _row(conn: Conn, name: str) -> tuple[Any, ...] | None:
    return conn.execute(
        "SELECT source, kind FROM pgbeat_schedules WHERE name = %s AND deleted_at IS NULL",
        (name,),
    ).fetchone()


def _now(conn: Conn) -> Any:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]


def test_a_file_schedule_runs_once_code_deletes_the_name_it_held(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    path = schedules_toml(tmp_path, FILE)
    pgbeat.upsert_schedule(conn, "shared", every="1m", kind="from_code")
    scheduler = Scheduler(database_url, load_schedules(path), heartbeat=False)
    scheduler.tick(conn, _now(conn))
    assert _row(conn, "shared") == ("api", "from_code")
    assert pgbeat.delete_schedule(conn, "shared")
    scheduler._housekeeping(conn)  # the file check of the loop, every few seconds
    assert _row(conn, "shared") == ("file", "from_file")  # no SIGHUP needed


def test_a_reload_refuses_a_file_that_declares_no_schedules(
    conn: Conn, database_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = schedules_toml(tmp_path, FILE)
    scheduler = Scheduler(
        database_url, load_schedules(path), heartbeat=False, load=lambda: load_for_reload(path)
    )
    scheduler.tick(conn, _now(conn))
    caplog.set_level(logging.ERROR, "pgbeat.scheduler")
    for empty in ("", "   \n# being rewritten\n", "[defaults]\ntimezone = 'UTC'\n"):
        path.write_text(empty)
        scheduler._reload(conn)
        assert _row(conn, "shared") == ("file", "from_file"), repr(empty)
    assert sum("empty [schedules] table" in r.getMessage() for r in caplog.records) == 3
    path.write_text("[schedules]\n")  # asked for: no file schedules at all
    scheduler._reload(conn)
    assert _row(conn, "shared") is None


def test_history_is_kept_as_long_as_the_longest_catch_up_window(
    conn: Conn, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An old pause's skipped periods inside a catch-up window are never purged."""
    pgbeat.upsert_schedule(conn, "weekly", every="1h", kind="k", catch_up_window="3d")
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, inserted_at)"
        " VALUES ('weekly', now() - interval '2 days', 'skipped', 'paused',"
        " now() - interval '2 days')"
    )
    scheduler = Scheduler(database_url, None, heartbeat=False, history_retention=timedelta(hours=1))
    scheduler.tick(conn, _now(conn))
    caplog.set_level(logging.WARNING, "pgbeat.scheduler")
    assert scheduler.purge_history(conn) == 0
    assert any("keeping history for" in r.getMessage() for r in caplog.records)
    conn.execute("UPDATE pgbeat_schedules SET catch_up_window = '1 day' WHERE name = 'weekly'")
    pgbeat.upsert_schedule(conn, "weekly", every="1h", kind="k", catch_up_window="1d")
    scheduler.tick(conn, _now(conn))
    assert scheduler.purge_history(conn) == 1
