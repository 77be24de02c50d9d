"""This round's schedule rules as the CLI shows them: `schedules list --json`, `schedules
next` and `pgbeat status` for schedules from code, past their end, or paused after
failures. Each CLI call is a process of its own.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling import state
from pgbeat.scheduling.fires import fire_times_after
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import run_cli
from tests.integration.test_schedule_policies import end_jobs
from tests.integration.test_schedule_state import SECOND, whole_second_after


def test_schedules_list_json_gives_paused_and_paused_reason(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "flaky", every="1m", pause_after_failures=3, queue="q")
    conn.execute(
        "UPDATE pgbeat_schedules SET paused = true, paused_reason = '3 consecutive periods failed'"
    )
    listed = run_cli(["schedules", "list", "--json"], database_url)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["paused"] is True and row["paused_reason"] == "3 consecutive periods failed"
    assert row["pause_after_failures"] == 3 and row["queue"] == "q" and row["ended"] is False


def test_a_schedule_past_its_end_has_no_next_period(conn: psycopg.Connection[Any]) -> None:
    end = datetime.now().astimezone() - timedelta(days=1)
    pgbeat.upsert_schedule(conn, "over", every="1m", end_at=end)
    found = state.get_schedule(conn, "over")
    assert found is not None and found.schedule is not None
    assert fire_times_after(found.schedule, end, 3) == []


def test_schedules_next_and_status_know_schedules_from_code(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Any
) -> None:
    pgbeat.upsert_schedule(conn, "pulse", every="1m", start_at="2030-01-01T00:00:00Z")
    past = datetime.now().astimezone() - timedelta(days=1)
    pgbeat.upsert_schedule(conn, "over", every="1m", end_at=past)
    preview = run_cli(["schedules", "next", "pulse", "--count", "2", "--json"], database_url)
    assert preview.returncode == 0, preview.stderr
    fires = [row["fire_at"] for row in json.loads(preview.stdout)]
    assert fires == ["2030-01-01T00:00:00+00:00", "2030-01-01T00:01:00+00:00"]
    ended = run_cli(["schedules", "next", "over"], database_url, cwd=str(tmp_path))
    assert ended.returncode == 1 and "ended" in ended.stderr
    status = run_cli(["status", "--json"], database_url, cwd=str(tmp_path))
    assert status.returncode == 0, status.stderr
    rows = {row["schedule"]: row for row in json.loads(status.stdout)["schedules"]}
    assert rows["over"]["ended"] is True and rows["over"]["next_fire"] is None
    assert rows["over"]["present"] is None  # ended, not missing
    assert rows["pulse"]["next_fire"].startswith("2030-01-01T00:00:00")


@pytest.mark.slow  # a subprocess per CLI call
def test_status_checks_a_schedule_past_its_end_up_to_its_end(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Any
) -> None:
    """A file schedule whose end passed inside its catch-up window: its last period is the
    one at its end, present here, so it is "ended" and not missing (checked up to now, the
    period due a moment ago would have no job and read as missing)."""
    end = whole_second_after(conn) - 30 * SECOND
    (tmp_path / "schedules.toml").write_text(
        f'[schedules.closing]\nevery = "1s"\nend_at = "{end.isoformat()}"\n'
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, unique_key, status) VALUES ('closing', '{}', %s, 'done')",
        (f"closing@{end:%Y-%m-%dT%H:%M:%SZ}",),
    )
    status = run_cli(["status", "--json"], database_url, cwd=str(tmp_path))
    assert status.returncode == 0, status.stderr
    rows = {row["schedule"]: row for row in json.loads(status.stdout)["schedules"]}
    assert rows["closing"]["ended"] is True and rows["closing"]["next_fire"] is None
    assert rows["closing"]["latest_due_key"] == f"closing@{end:%Y-%m-%dT%H:%M:%SZ}"
    assert rows["closing"]["present"] is True


@pytest.mark.slow  # a subprocess per CLI call
def test_status_shows_why_a_schedule_paused_itself(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Any, scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "brittle", every="1s", catch_up="none", pause_after_failures=1)
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    end_jobs(conn, "brittle", "failed")
    assert scheduler.tick(conn, t0 + SECOND).paused == ["brittle"]
    status = run_cli(["status", "--json"], database_url, cwd=str(tmp_path))
    assert status.returncode == 0, status.stderr
    rows = {row["schedule"]: row for row in json.loads(status.stdout)["schedules"]}
    assert rows["brittle"]["paused"] is True
    assert rows["brittle"]["paused_reason"] == "its last period failed"  # N = 1
    text = run_cli(["status"], database_url, cwd=str(tmp_path))
    assert text.returncode == 0, text.stderr
    (line,) = [line for line in text.stdout.splitlines() if "brittle" in line]
    assert "paused (its last period failed)" in line, text.stdout
