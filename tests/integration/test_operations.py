"""Heartbeats, `pgbeat status`, `pgbeat health`, Prometheus metrics and JSON logs."""

from __future__ import annotations

import json
import signal
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

import pgbeat
from pgbeat.observe.heartbeat import Heartbeat
from tests.helpers import PROCESS_START, free_port, run_cli, start_cli, statuses, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
APP = "tests.apps.jobs_app:registry"


def processes(conn: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    return [(r[0], r[1]) for r in conn.execute("SELECT role, pid FROM pgbeat_processes")]


def often_periods(conn: psycopg.Connection[Any]) -> int:
    """How many periods of the schedule `often` have their job."""
    row = conn.execute("SELECT count(*) FROM jobs WHERE unique_key LIKE 'often@%%'").fetchone()
    assert row is not None
    return int(row[0])


def test_heartbeat_registers_and_removes_itself(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    beat = Heartbeat(database_url, "worker", every=timedelta(seconds=5))
    with psycopg.connect(database_url, autocommit=True) as own:
        beat.beat_if_due(own, now=100.0)
        assert processes(conn)
        first = conn.execute("SELECT heartbeat_at FROM pgbeat_processes").fetchone()
        beat.beat_if_due(own, now=104.0)  # not due yet: no beat
        assert conn.execute("SELECT heartbeat_at FROM pgbeat_processes").fetchone() == first
        beat.beat_if_due(own, now=105.0)
        assert conn.execute("SELECT heartbeat_at FROM pgbeat_processes").fetchone() != first
    beat.stop()
    assert processes(conn) == []


@pytest.mark.slow
def test_stale_heartbeats_expire(database_url: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO pgbeat_processes (id, role, host, pid, version, heartbeat_at) "
        "VALUES ('dead', 'worker', 'h', 1, '0', now() - interval '5 minutes')"
    )
    assert run_cli(["health"], database_url).returncode == 1  # a stale row is not a live worker
    beat = Heartbeat(database_url, "scheduler")
    with psycopg.connect(database_url, autocommit=True) as own:
        beat.beat(own)
    assert [r[0] for r in conn.execute("SELECT id FROM pgbeat_processes")] == [beat.id]


@pytest.mark.slow
def test_health_exit_codes(
    database_url: str, empty_database_url: str, conn: psycopg.Connection[Any]
) -> None:
    no_worker = run_cli(["health"], database_url)
    assert no_worker.returncode == 1
    assert "no worker heartbeat" in no_worker.stdout

    beat = Heartbeat(database_url, "worker")
    with psycopg.connect(database_url, autocommit=True) as own:
        beat.beat(own)
    healthy = run_cli(["health"], database_url)
    assert healthy.returncode == 0, healthy.stdout
    assert "1 live worker" in healthy.stdout

    not_migrated = run_cli(["health"], empty_database_url)
    assert not_migrated.returncode == 1
    assert "pgbeat migrate" in not_migrated.stdout

    down = run_cli(["health"], "postgresql://app:s3cret@127.0.0.1:1/app")
    assert down.returncode == 1
    assert "database unavailable" in down.stdout
    assert "s3cret" not in down.stdout + down.stderr
    assert down.stdout.count("\n") == 1


@pytest.mark.slow
def test_status_shows_processes_schedules_and_missed_periods(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    schedules = tmp_path / "schedules.toml"
    schedules.write_text(
        '[schedules.often]\nevery = "1s"\n\n'
        '[schedules.minutely]\ncron = "* * * * *"\ncatch_up_window = "1h"\n'
    )
    scheduler = start_cli(["scheduler", "--schedules", str(schedules)], database_url)
    worker = start_cli(["worker", APP], database_url, cwd=ROOT)
    try:
        wait_for(
            lambda: sorted(r for r, _ in processes(conn)) == ["scheduler", "worker"],
            timeout=PROCESS_START,
            message="both processes registered",
        )
        # the latest `often` period status checks is 10 s old (liveness.OVERDUE_GRACE): wait
        # until the scheduler made it
        wait_for(lambda: often_periods(conn) >= 12, timeout=30, message="12 periods")
        # lose a period: neither its job nor its row in the history is there
        conn.execute("DELETE FROM jobs WHERE unique_key LIKE 'minutely@%%'")
        conn.execute("DELETE FROM pgbeat_schedule_history WHERE schedule = 'minutely'")
        result = run_cli(["status", "--schedules", str(schedules), "--json"], database_url)
        text = run_cli(["status", "--schedules", str(schedules)], database_url)
    finally:
        scheduler.stop()
        worker.stop()
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert sorted(p["role"] for p in status["processes"]) == ["scheduler", "worker"]
    by_name = {s["schedule"]: s for s in status["schedules"]}
    assert by_name["often"]["present"] is True
    assert by_name["minutely"]["present"] is False
    assert any("minutely" in w and "missed period" in w for w in status["warnings"])
    assert "MISSING" in text.stdout and "scheduler" in text.stdout
    wait_for(lambda: processes(conn) == [], message="processes removed on clean exit")


def test_status_warns_about_different_schedule_files(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    for digest in ("aaaa", "bbbb"):
        beat = Heartbeat(database_url, "scheduler", schedules_hash=digest)
        with psycopg.connect(database_url, autocommit=True) as own:
            beat.beat(own)
    result = run_cli(["status", "--json", "--schedules", "/nonexistent.toml"], database_url)
    warnings = json.loads(result.stdout)["warnings"]
    assert any("2 different schedules files" in w for w in warnings)
    assert "no live worker" in warnings


@pytest.mark.slow
def test_metrics_scrape_shows_a_completed_job(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    port = free_port()
    pgbeat.enqueue(conn, "noop", {})
    worker = start_cli(["worker", APP, "--metrics-port", str(port)], database_url, cwd=ROOT)
    try:
        wait_for(lambda: statuses(conn) == {"done": 1}, timeout=PROCESS_START, message="job done")

        # The counter moves just after the job's commit, so the row can read done a moment
        # before the scrape counts it: wait for the sample, not for any page.
        def counted() -> str:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = str(r.read().decode())
            except OSError:
                return ""
            return body if 'pgbeat_jobs_total{kind="noop",outcome="done"}' in body else ""

        body = wait_for(counted, timeout=10, message="metrics served with the done job counted")
    finally:
        worker.stop()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("pgbeat_jobs_total", (("kind", "noop"), ("outcome", "done")))] == 1.0
    assert samples[("pgbeat_queue_jobs", (("kind", "noop"), ("status", "done")))] == 1.0
    assert ("pgbeat_job_duration_seconds_count", (("kind", "noop"),)) in samples
    assert ("pgbeat_oldest_due_job_age_seconds", ()) in samples
    assert samples[("pgbeat_oldest_finished_job_age_seconds", ())] >= 0.0  # the job just done


@pytest.mark.slow
def test_json_logs_carry_job_fields_and_no_password(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    parts = urlsplit(database_url)
    if parts.scheme not in ("postgres", "postgresql") or parts.hostname is None:
        pytest.skip("needs a URL with a user part (DATABASE_URL, trust authentication)")
    # The test servers trust local logins, so any password connects: pgbeat must not print it.
    secret = "s3cret-of-the-json-logs"
    netloc = f"{parts.username or 'postgres'}:{secret}@{parts.hostname}"
    url = urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))
    pgbeat.enqueue(conn, "noop", {})
    worker = start_cli(["worker", APP, "--log-format", "json", "--job-logs", "all"], url, cwd=ROOT)
    try:
        wait_for(lambda: statuses(conn) == {"done": 1}, timeout=PROCESS_START, message="job done")
        wait_for(lambda: '"outcome": "done"' in worker.output(), message="log line")
        # Lose the database: the reconnect is logged with the URL it retries (redacted).
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name LIKE 'pgbeat-%'"
        )
        pgbeat.enqueue(conn, "noop", {})
        wait_for(lambda: statuses(conn) == {"done": 2}, timeout=30, message="second job done")
        wait_for(lambda: "retrying" in worker.output(), message="the lost database logged")
    finally:
        output = worker.stop(signal.SIGTERM)
    assert secret not in output
    assert ":***@" in output  # the URL was logged, its password replaced
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    done = [line for line in lines if line.get("outcome") == "done"]
    assert done and done[0]["kind"] == "noop" and done[0]["attempt"] == 1
    assert {"time", "level", "logger", "message", "job_id", "duration_ms"} <= set(done[0])
