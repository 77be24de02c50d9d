"""Deadlines: a period whose job has not ended done within its schedule's deadline is late,
once, with one alert job of the schedule's on_late kind.

Ticks are driven by hand at chosen database times (``tick(conn, now)``: the judging takes
``now`` as a parameter); job outcomes are written with SQL, as a worker would leave them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, LiteralString

import psycopg
import pytest

import pgbeat
from pgbeat.db.sql import deadlines as deadline_sql
from pgbeat.db.sql import history as history_sql
from pgbeat.errors import ScheduleError
from pgbeat.observe.metrics import PrometheusMetrics
from pgbeat.scheduling import deadlines, state
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import plan_nodes, run_cli_here, schedules_toml
from tests.integration.test_schedule_state import SECOND, whole_second_after


def key(name: str, fire: datetime) -> str:
    return f"{name}@{fire:%Y-%m-%dT%H:%M:%SZ}"


def set_job(conn: psycopg.Connection[Any], unique_key: str, status: str, attempts: int = 1) -> None:
    """The period's job ends (or stays) ``status``, as a worker would leave it."""
    conn.execute(
        "UPDATE jobs SET status = %s, attempts = %s,"
        " finished_at = CASE WHEN %s IN ('done', 'failed', 'cancelled') THEN now() END"
        " WHERE unique_key = %s",
        (status, attempts, status, unique_key),
    )


def alerts(conn: psycopg.Connection[Any], kind: str = "alert") -> list[dict[str, Any]]:
    rows = conn.execute("SELECT payload FROM jobs WHERE kind = %s ORDER BY id", (kind,)).fetchall()
    return [row[0] for row in rows]


def every_ten_seconds(conn: psycopg.Connection[Any], name: str, **policy: Any) -> datetime:
    """An every-10s schedule ``name`` with ``policy`` (upsert_schedule's arguments) created;
    its first fire after the creation."""
    pgbeat.upsert_schedule(conn, name, every="10s", **policy)
    t0 = whole_second_after(conn)
    return t0 + (10 - t0.second % 10) % 10 * SECOND


def late_keys(conn: psycopg.Connection[Any], name: str) -> list[str]:
    return sorted(
        key(name, r.fire_at) for r in state.schedule_history(conn, name, limit=100) if r.late
    )


def test_a_period_not_done_by_its_deadline_is_late_once_with_one_alert(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    fire = every_ten_seconds(conn, "backup", catch_up="none", deadline="5s", on_late="alert")
    assert scheduler.tick(conn, fire).inserted == [key("backup", fire)]
    set_job(conn, key("backup", fire), "running")
    assert scheduler.tick(conn, fire + 4 * SECOND).late == []  # not due yet
    assert scheduler.tick(conn, fire + 5 * SECOND).late == [key("backup", fire)]
    assert scheduler.tick(conn, fire + 6 * SECOND).late == []  # once
    other = Scheduler(database_url, None, heartbeat=False)  # another replica, starting
    assert other.tick(conn, fire + 7 * SECOND).late == []

    [record] = [r for r in state.schedule_history(conn, "backup") if r.fire_at == fire]
    assert record.late and record.late_status == "running"
    assert record.due_by == fire + 5 * SECOND and record.late_at == fire + 5 * SECOND
    [payload] = alerts(conn)
    job = conn.execute("SELECT id FROM jobs WHERE unique_key = %s", (key("backup", fire),))
    row = job.fetchone()
    assert row is not None
    assert payload == {
        "schedule": "backup",
        "period": key("backup", fire),
        "fire_time": f"{fire:%Y-%m-%dT%H:%M:%SZ}",
        "job_id": row[0],
        "status": "running",
        "due_by": f"{fire + 5 * SECOND:%Y-%m-%dT%H:%M:%SZ}",
    }


def test_a_period_done_in_time_is_not_late_and_one_done_after_is(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "report", every="1s", catch_up="none", deadline="1h")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    scheduler.tick(conn, t0 + SECOND)
    set_job(conn, key("report", t0), "done")  # finished now: within the hour
    conn.execute(  # finished after its deadline: late all the same
        "UPDATE jobs SET status = 'done', finished_at = %s WHERE unique_key = %s",
        (t0 + SECOND + 3601 * SECOND, key("report", t0 + SECOND)),
    )
    late = scheduler.tick(conn, t0 + 3700 * SECOND).late
    assert late == [key("report", t0 + SECOND)]
    assert alerts(conn) == []  # no on_late: late, but no alert


@pytest.mark.parametrize(
    ("status", "attempts", "shown"),
    [
        ("pending", 0, "pending"),
        ("pending", 2, "retrying"),
        ("failed", 8, "failed"),
        ("cancelled", 1, "cancelled"),
    ],
)
def test_every_unfinished_outcome_is_late(
    conn: psycopg.Connection[Any], status: str, attempts: int, shown: str, scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "job", every="1s", catch_up="none", deadline="2s", on_late="a")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    set_job(conn, key("job", t0), status, attempts)
    assert key("job", t0) in scheduler.tick(conn, t0 + 2 * SECOND).late
    [first, *_] = alerts(conn, "a")
    assert first["status"] == shown


def test_periods_missed_while_every_scheduler_was_down_are_late(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    fire = every_ten_seconds(conn, "nightly", catch_up="latest", deadline="3s", on_late="alert")
    scheduler.tick(conn, fire)
    set_job(conn, key("nightly", fire), "done")
    # every replica down for 35 s: three periods pass; the latest is caught up, late already
    back = Scheduler(database_url, None, heartbeat=False)
    result = back.tick(conn, fire + 35 * SECOND)
    assert result.missed == [key("nightly", fire + n * 10 * SECOND) for n in (1, 2)]
    assert result.late == [key("nightly", fire + n * 10 * SECOND) for n in (1, 2, 3)]
    statuses = sorted(a["status"] for a in alerts(conn))
    assert statuses == ["missed", "missed", "pending"]
    assert late_keys(conn, "nightly") == result.late


def test_skipped_and_paused_periods_are_not_watched(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "solo", every="2s", overlap="skip", deadline="2s", on_late="alert")
    t0 = whole_second_after(conn)
    fire = t0 + (t0.second % 2) * SECOND
    scheduler.tick(conn, fire)
    skipped = scheduler.tick(conn, fire + 2 * SECOND)  # its job still pending: overlap
    assert skipped.skipped == [key("solo", fire + 2 * SECOND)]
    assert skipped.late == [key("solo", fire)]  # the job that overran is late, only it
    assert [a["period"] for a in alerts(conn)] == [key("solo", fire)]


def test_history_json_and_status_show_late_schedules(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "late1", every="1s", catch_up="none", deadline="1s")
    pgbeat.upsert_schedule(conn, "fine", every="1s", catch_up="none", deadline="1h")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    set_job(conn, key("fine", t0), "done")
    scheduler.tick(conn, t0 + 2 * SECOND)
    found = deadlines.late_schedules(conn, t0 + 2 * SECOND)
    assert [late.schedule for late in found] == ["late1"]

    result = run_cli_here(["schedules", "history", "late1", "--json"], database_url)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    late_rows = [row for row in rows if row["late"]]
    assert late_rows and all(row["late_at"] and row["late_status"] for row in late_rows)

    status = run_cli_here(["status"], database_url)
    assert status.returncode == 1
    late_lines = [line for line in status.stdout.splitlines() if "is late" in line]
    assert [line.split()[2] for line in late_lines] == ["late1:"]


def test_a_deadline_change_applies_to_periods_claimed_after_it(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "change", every="1s", catch_up="none")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    assert pgbeat.upsert_schedule(conn, "change", every="1s", catch_up="none", deadline="1s")
    scheduler.tick(conn, t0)  # the period claimed before the change stays unwatched
    late = scheduler.tick(conn, t0 + 5 * SECOND).late
    assert key("change", t0) not in late and key("change", t0 + SECOND) in late


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"deadline": "soon"}, "deadline: bad duration 'soon'"),
        ({"deadline": "0s"}, "deadline: bad duration '0s': must be greater than zero"),
        ({"deadline": "2m", "overlap": "skip"}, "deadline: 2m is longer than"),
        ({"deadline": "1m", "on_late": ""}, "on_late: must name a job kind"),
        ({"on_late": "alert"}, "on_late: needs a deadline"),
        ({"deadline": "1m", "on_late": "check"}, "on_late: must name another kind"),
    ],
)
def test_bad_deadlines_are_refused_in_one_line_naming_the_schedule(
    conn: psycopg.Connection[Any], values: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ScheduleError) as refused:
        pgbeat.upsert_schedule(conn, "check", every="1m", **values)
    message = str(refused.value)
    assert "\n" not in message and "'check'" in message and problem in message


@pytest.mark.slow
def test_the_judging_reads_the_watched_periods_by_index_not_the_history(
    conn: psycopg.Connection[Any],
) -> None:
    """At 1,000,000 history rows (judged already, or of schedules without a deadline), the
    judging and the next due time read pgbeat_schedule_history_watching only."""
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, job_id, due_by,"
        " deadline_state)"
        " SELECT 's' || (g % 1000), timestamptz '2026-01-01' + g * interval '1 minute',"
        "        'enqueued', g,"
        "        CASE WHEN g % 2 = 0 THEN timestamptz '2026-01-01' + g * interval '1 minute'"
        "             + interval '30 minutes' END,"
        "        CASE WHEN g % 2 = 0 THEN 'met' END"
        " FROM generate_series(1, 1000000) AS g"
    )
    conn.execute(  # a few periods still watched
        "UPDATE pgbeat_schedule_history SET deadline_state = 'watching' WHERE id % 100000 = 0"
    )
    conn.execute("ANALYZE")
    now = datetime(2027, 1, 1, tzinfo=UTC)
    checks: list[tuple[LiteralString, dict[str, Any]]] = [
        (deadline_sql.HISTORY_JUDGE_DEADLINES, {"now": now, "batch": 5000}),
        (deadline_sql.HISTORY_NEXT_DUE, {"now": now}),
    ]
    for statement, params in checks:
        with conn.transaction():  # as deadlines.judge runs it
            conn.execute(history_sql.HISTORY_CLAIM_SETTINGS)
            row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
        assert row is not None
        nodes = list(plan_nodes(row[0][0]["Plan"]))
        assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], row
        on_history = [
            n
            for n in nodes
            if n.get("Relation Name") == "pgbeat_schedule_history"
            and n["Node Type"] != "ModifyTable"  # the update of the rows found
        ]
        assert on_history, row
        assert all(
            n["Node Type"] in ("Index Scan", "Index Only Scan")
            and n["Index Name"]
            in ("pgbeat_schedule_history_watching", "pgbeat_schedule_history_pkey")
            for n in on_history
        ), row
    due = conn.execute(
        "SELECT count(*) FROM pgbeat_schedule_history"
        " WHERE deadline_state = 'watching' AND due_by <= %s",
        (now,),
    ).fetchone()
    judged = deadlines.judge(conn, now)
    assert due is not None and len(judged.late) == due[0] > 0 and judged.met == 0


def test_schedules_check_refuses_a_bad_deadline_in_one_line(tmp_path: Path) -> None:
    path = schedules_toml(tmp_path, '[schedules.backup]\ncron = "0 2 * * *"\ndeadline = "soon"\n')
    result = run_cli_here(["schedules", "check", str(path)], None)
    assert result.returncode == 1
    [line] = (result.stdout + result.stderr).strip().splitlines()
    assert "schedule 'backup': deadline: bad duration 'soon'" in line, line
    path.write_text('[schedules.backup]\ncron = "0 2 * * *"\ndeadline = "30m"\non_late = "a"\n')
    assert run_cli_here(["schedules", "check", str(path)], None).returncode == 0


def test_schedules_list_json_shows_the_deadline(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "backup", cron="0 2 * * *", deadline="30m", on_late="alert")
    result = run_cli_here(["schedules", "list", "--json"], database_url)
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert (row["deadline"], row["on_late"]) == ("30m", "alert")


def test_the_late_periods_metric_counts_each_late_period(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "counted", every="1s", catch_up="none", deadline="1s")
    t0 = whole_second_after(conn)
    metrics = PrometheusMetrics()
    scheduler = Scheduler(database_url, None, heartbeat=False, metrics=metrics)
    scheduler.tick(conn, t0)
    late = scheduler.tick(conn, t0 + 3 * SECOND).late
    value = metrics.registry.get_sample_value(
        "pgbeat_schedule_late_periods_total", {"schedule": "counted"}
    )
    assert late and value == len(late)
