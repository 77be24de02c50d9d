"""A scheduler replica whose own clock is wrong still enqueues on the database's time."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers import CliProcess, cli_env, wait_for

SCHEDULES = '[schedules.tick]\nevery = "1s"\n\n[schedules.minutely]\ncron = "* * * * *"\n'


@pytest.mark.slow
@pytest.mark.parametrize("offset", ["+7m", "-7m"])
def test_skewed_replica_follows_the_database_clock(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path, offset: str
) -> None:
    faketime = shutil.which("faketime")
    if faketime is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's faketime")
        pytest.skip("needs Debian's faketime (CI installs it)")
    path = tmp_path / "schedules.toml"
    path.write_text(SCHEDULES)
    scheduler = CliProcess(
        [
            faketime,
            "-f",
            offset,
            sys.executable,
            "-m",
            "pgbeat",
            "scheduler",
            "--schedules",
            str(path),
        ],
        cli_env(database_url, FAKETIME_DONT_FAKE_MONOTONIC="1"),
        None,
    )
    try:
        wait_for(
            lambda: (
                conn.execute("SELECT count(*) FROM jobs WHERE unique_key LIKE 'tick@%%'").fetchone()
                >= (4,)
            ),
            timeout=30,
            message="ticks",
        )
    finally:
        output = scheduler.stop()
    assert "Traceback" not in output
    early = conn.execute("SELECT count(*) FROM jobs WHERE run_at > created_at").fetchone()
    assert early == (0,), "a period was enqueued before it was due by the database clock"
    # periods that fell due while it ran (the first tick also enqueues the last few seconds)
    lag = conn.execute(
        "SELECT max(created_at - run_at) FROM jobs WHERE unique_key LIKE 'tick@%%' "
        "AND run_at > (SELECT min(created_at) FROM jobs)"
    ).fetchone()
    assert lag is not None and lag[0].total_seconds() < 1.0, lag
