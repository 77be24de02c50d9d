"""Every schedule rule works under the documented least-privilege ``pgbeat_scheduler`` role
(docs/least-privilege.sql), with a real scheduler process: each overlap policy (``allow``,
``skip``, ``buffer_one``, ``cancel_other``), ``pause_after_failures``, and the CLI's
``schedules backfill`` and ``schedules run``. A rule refused for one schedule never rolls
back the other schedules' periods nor stops the scheduler."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import run_cli, schedules_toml, start_cli, wait_for
from tests.integration.test_least_privilege import (
    NOW,
    logins,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.slow  # a scheduler process, periods a second apart

SCHEDULES = """
[schedules.plain]
every = "1s"
kind = "noop"
catch_up = "none"

[schedules.skipper]
every = "1s"
kind = "noop"
catch_up = "none"
overlap = "skip"

[schedules.buffered]
every = "1s"
kind = "noop"
catch_up = "none"
overlap = "buffer_one"

[schedules.latest]
every = "1s"
kind = "noop"
catch_up = "none"
overlap = "cancel_other"

[schedules.flaky]
every = "1s"
kind = "noop"
catch_up = "none"
pause_after_failures = 1
"""


def value(conn: psycopg.Connection[Any], query: Any, *args: object) -> Any:
    row = conn.execute(query, args).fetchone()
    assert row is not None
    return row[0]


def jobs_of(conn: psycopg.Connection[Any], name: str) -> int:
    return int(value(conn, "SELECT count(*) FROM jobs WHERE unique_key LIKE %s", f"{name}@%"))


def outcome_seen(conn: psycopg.Connection[Any], name: str, outcome: str) -> bool:
    return bool(
        value(
            conn,
            "SELECT count(*) > 0 FROM pgbeat_schedule_history WHERE schedule = %s AND outcome = %s",
            name,
            outcome,
        )
    )


def test_every_schedule_rule_works_under_the_scheduler_role(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
    tmp_path: Path,
) -> None:
    schedules = schedules_toml(tmp_path, SCHEDULES)
    scheduler = start_cli(["scheduler", "--schedules", str(schedules)], logins["scheduler"])
    try:
        names = ("plain", "skipper", "buffered", "latest", "flaky")
        wait_for(lambda: all(jobs_of(conn, n) >= 1 for n in names), timeout=60)
        # As a worker would leave them (the owner writes): busy, and failed.
        for name in ("skipper", "buffered", "latest"):
            conn.execute(
                "UPDATE jobs SET status = 'running', locked_until = now() + interval '1h'"
                " WHERE unique_key LIKE %s AND status = 'pending'",
                (f"{name}@%",),
            )
        conn.execute(
            "UPDATE jobs SET status = 'failed', finished_at = now()"
            " WHERE unique_key LIKE 'flaky@%%' AND status = 'pending'"
        )
        asked = "SELECT count(*) FROM jobs WHERE unique_key LIKE 'latest@%%'"
        asked += " AND status = 'running' AND cancel_requested_at IS NOT NULL"
        wait_for(lambda: value(conn, asked) >= 1, timeout=60, message="cancel_other asked")
        wait_for(lambda: outcome_seen(conn, "skipper", "skipped"), timeout=60)
        wait_for(lambda: outcome_seen(conn, "buffered", "buffered"), timeout=60)
        paused = "SELECT paused FROM pgbeat_schedules WHERE name = 'flaky'"
        wait_for(lambda: value(conn, paused), timeout=60, message="flaky paused")
        before = jobs_of(conn, "plain")
        wait_for(lambda: jobs_of(conn, "plain") >= before + 2, timeout=60)
        assert scheduler.popen.poll() is None, scheduler.output()
    finally:
        output = scheduler.stop(signal.SIGTERM)
        print(output)  # shown when the test fails
    assert "Traceback" not in output and "permission denied" not in output, output
    assert scheduler.returncode == 0, output

    backfill = ["schedules", "backfill", "plain"]
    backfill += ["--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:00:03Z"]
    done = run_cli(backfill, logins["scheduler"])
    assert done.returncode == 0, done.stderr
    assert value(conn, "SELECT count(*) FROM jobs WHERE unique_key LIKE 'plain@2026-01-01%%'") == 3
    ran = run_cli(["schedules", "run", "plain"], logins["scheduler"])
    assert ran.returncode == 0, ran.stderr
    assert value(conn, "SELECT count(*) FROM jobs WHERE unique_key LIKE 'plain@manual:%%'") == 1


def test_a_refused_rule_keeps_every_schedules_periods(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    """A deployment whose grants predate cancel_other: the cancel is refused, logged, and
    tried again next tick; both schedules' periods are claimed all the same."""
    login = psycopg.conninfo.conninfo_to_dict(logins["scheduler"])["user"]
    group = "pgbeat_scheduler_" + str(login).rsplit("_", 1)[1]
    conn.execute(sql.SQL("REVOKE UPDATE ON jobs FROM {}").format(sql.Identifier(group)))
    schedules = [
        Schedule(name="plain", kind="noop", every=timedelta(minutes=1)),
        Schedule(name="latest", kind="noop", every=timedelta(minutes=1), overlap="cancel_other"),
    ]
    with psycopg.connect(logins["scheduler"], autocommit=True) as beat:
        scheduler = Scheduler(logins["scheduler"], schedules, heartbeat=False)
        first = scheduler.tick(beat, NOW)
        second = scheduler.tick(beat, NOW + timedelta(minutes=1))
    assert sorted(first.inserted + second.inserted) == [
        "latest@2026-03-29T12:00:00Z",
        "latest@2026-03-29T12:01:00Z",
        "plain@2026-03-29T12:00:00Z",
        "plain@2026-03-29T12:01:00Z",
    ]
