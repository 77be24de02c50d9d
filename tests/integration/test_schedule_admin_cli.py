"""`pgbeat schedules list|pause|resume|run|history`, run as a user would, in a subprocess."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import run_cli_here


@pytest.mark.slow
def test_list_pause_run_resume_history(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pgbeat.upsert_schedule(
        conn, "report", cron="30 2 * * *", timezone="America/New_York", jitter="1m"
    )
    pgbeat.upsert_schedule(conn, "beat", every="1s", overlap="skip")
    now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    Scheduler(database_url, None, heartbeat=False).tick(
        conn, now.replace(microsecond=0) + timedelta(seconds=2)
    )

    listed = run_cli_here(["schedules", "list", "--json"], database_url)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    report, beat = rows["report"], rows["beat"]
    assert (report["source"], report["cron"], report["timezone"], report["jitter"]) == (
        "api", "30 2 * * *", "America/New_York", "1m",
    )  # fmt: skip
    next_fire = datetime.fromisoformat(report["next_fire"])
    assert next_fire > now and next_fire.utcoffset() is not None
    assert (
        report["next_fire_local"].endswith(("EST", "EDT"))
        and " 02:30:00 " in (report["next_fire_local"])
    )
    assert report["last_period"] is None
    assert (beat["every"], beat["overlap"], beat["paused"]) == ("1s", "skip", False)
    last = beat["last_period"]
    # its periods of that tick: the first enqueued, the later ones skipped (overlap)
    assert (last["outcome"], last["reason"], last["job_id"]) == ("skipped", "overlap", None)
    assert last["inserted_by"] and last["lag"] < 0  # ticked at a pinned time ahead of now

    text = run_cli_here(["schedules", "list"], database_url)
    assert text.returncode == 0
    header, *lines = text.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "SOURCE", "WHEN"] and len(lines) == 2

    assert run_cli_here(["schedules", "pause", "beat"], database_url).stdout == "paused beat\n"
    again = run_cli_here(["schedules", "pause", "beat"], database_url)
    assert again.stdout == "beat was already paused\n"
    ran = run_cli_here(["schedules", "run", "beat"], database_url)
    assert ran.returncode == 0, ran.stderr
    job_id = int(ran.stdout)
    key = conn.execute("SELECT unique_key FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert key == (f"beat@manual:{job_id}",)
    assert run_cli_here(["schedules", "resume", "beat"], database_url).stdout == "resumed beat\n"

    history = run_cli_here(["schedules", "history", "beat", "--json", "--limit", "9"], database_url)
    assert history.returncode == 0, history.stderr
    (manual,) = [row for row in json.loads(history.stdout) if row["outcome"] == "manual"]
    assert (manual["outcome"], manual["job_id"], manual["job_status"]) == (
        "manual", job_id, "pending",
    )  # fmt: skip
    assert manual["inserted_by"].startswith("cli:")
    table = run_cli_here(["schedules", "history", "beat"], database_url)
    assert table.stdout.splitlines()[0].split()[:4] == ["FIRE", "AT", "(UTC)", "OUTCOME"]
    outcomes = {line.split()[2] for line in table.stdout.splitlines()[1:]}
    assert outcomes == {"manual", "enqueued", "skipped"}


def test_unknown_schedules_are_one_line_errors(database_url: str) -> None:
    for command in ("run", "history"):  # pause and resume: test_schedule_state
        result = run_cli_here(["schedules", command, "nope"], database_url)
        assert result.returncode == 1
        assert result.stderr == "pgbeat: error: no schedule named 'nope'\n"
        assert result.stdout == ""
