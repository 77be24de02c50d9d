"""The low findings of the third hardening pass, each with its test: control characters of
queue names, a job id beyond bigint, a cancel reason UTF-8 cannot encode or of a megabyte,
a rate of non-ASCII digits, pgbeat.wait in a transaction whose snapshot is fixed, and
heartbeat details of odd shapes."""

from __future__ import annotations

import time
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus

import pgbeat
from pgbeat.flow import parse_rate
from tests.helpers import run_cli_here
from tests.integration.ui_support import dashboard


def test_queues_list_escapes_control_characters(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO jobs (kind, payload, queue) VALUES ('k', '{}', %s)", ("q\x1b[2J",))
    listed = run_cli_here(["queues", "list"], database_url)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "q\\x1b[2J" in listed.stdout


def test_a_job_id_beyond_bigint_is_refused_before_any_sql(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        with pytest.raises(ValueError, match="job_id"):
            pgbeat.cancel_job(conn, 2**63)
        assert conn.info.transaction_status == TransactionStatus.INTRANS  # still usable
        conn.execute("SELECT 1")


def test_cancel_reasons_are_checked_and_bounded(conn: psycopg.Connection[Any]) -> None:
    job_id = pgbeat.enqueue(conn, "k", {})
    assert job_id is not None
    with pytest.raises(ValueError, match="reason"):
        pgbeat.cancel_job(conn, job_id, reason="\ud800")
    assert pgbeat.cancel_job(conn, job_id, reason="x" * 1_000_000).accepted
    row = conn.execute("SELECT length(last_error) FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None and row[0] < 1_100


def test_a_rate_of_non_ascii_digits_is_named() -> None:
    with pytest.raises(ValueError, match="rate '²/1s'"):
        parse_rate("²/1s")


def test_wait_refuses_a_fixed_snapshot_at_once(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    job_id = pgbeat.enqueue(conn, "k", {})
    assert job_id is not None
    with psycopg.connect(database_url) as waiter:
        waiter.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        started = time.monotonic()
        with pytest.raises(ValueError, match="repeatable read"):
            pgbeat.wait(waiter, job_id, timeout=60)
        assert time.monotonic() - started < 30  # not the whole timeout


def test_odd_heartbeat_details_break_neither_status_nor_the_processes_page(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    for n, details in enumerate(["[1, 2]", '{"kinds": 5, "queues": 1}', '"x"', '{"kinds": [1]}']):
        conn.execute(
            "INSERT INTO pgbeat_processes (id, role, host, pid, version, details)"
            " VALUES (%s, 'worker', 'h', 1, '0', %s::jsonb)",
            (f"odd-{n}", details),
        )
    pgbeat.enqueue(conn, "k", {})
    status = run_cli_here(["status", "--json"], database_url)
    assert "Traceback" not in status.stderr and status.stdout.startswith("{"), status.stderr
    with dashboard(database_url) as ui, httpx.Client(timeout=30) as client:
        page = client.get(f"{ui.url}/processes")
        assert page.status_code == 200, page.text[-500:]


@pytest.mark.parametrize(
    ("column", "value"),
    [("queue", ""), ("queue", " padded"), ("queue", "q" * 201), ("limit_key", "")],
)
def test_sql_cannot_write_a_queue_or_limit_key_the_api_refuses(
    conn: psycopg.Connection[Any], column: str, value: str
) -> None:
    query = sql.SQL("INSERT INTO jobs (kind, payload, {}) VALUES ('k', '{{}}', %s)").format(
        sql.Identifier(column)
    )
    with pytest.raises(psycopg.errors.CheckViolation, match=f"jobs.{column}"):
        conn.execute(query, (value,))
