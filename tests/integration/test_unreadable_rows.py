"""One row Python cannot hold never hides the others from an operator: a job whose payload
is nested 5,000 deep, one whose ``created_at`` is ``infinity`` and an attempt whose
``duration_s`` is NaN are shown as far as they go (the dashboard's job list and job page,
``pgbeat jobs list``, ``--json``, ``jobs show``) and the values that cannot be read are
named, never a 500 or an exit 1."""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg
import pytest

from pgbeat.testing import assert_enqueued
from tests.helpers import run_cli_here
from tests.integration.ui_support import dashboard

DEEP = "[" * 5000 + "]" * 5000


def seed(conn: psycopg.Connection[Any]) -> tuple[int, int, int]:
    ids = []
    for sql_text in (
        "INSERT INTO jobs (kind, payload) VALUES ('deep', %s::jsonb) RETURNING id",
        "INSERT INTO jobs (kind, payload, created_at)"
        " VALUES ('endless', '{}', 'infinity') RETURNING id",
        "INSERT INTO jobs (kind, payload) VALUES ('fine', '{}') RETURNING id",
    ):
        args = (DEEP,) if "%s" in sql_text else ()
        row = conn.execute(sql_text, args).fetchone()
        assert row is not None
        ids.append(int(row[0]))
    conn.execute(
        "INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, error, duration_s)"
        " VALUES (%s, 1, 'retry', 'x', 'NaN')",
        (ids[2],),
    )
    return ids[0], ids[1], ids[2]


def test_the_cli_lists_every_row_and_names_what_it_cannot_read(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    deep, endless, fine = seed(conn)
    listed = run_cli_here(["jobs", "list"], database_url)
    assert listed.returncode == 0, listed.stderr
    assert all(str(i) in listed.stdout for i in (deep, endless, fine))
    assert f"job {endless}: created_at cannot be read" in listed.stderr
    assert f"job {deep}: payload" not in listed.stderr  # the list reads no payload
    as_json = run_cli_here(["jobs", "list", "--json"], database_url)
    assert as_json.returncode == 0, as_json.stderr
    by_id = {row["id"]: row for row in json.loads(as_json.stdout)}
    assert set(by_id) == {deep, endless, fine}
    assert by_id[endless]["created_at"] is None and "created_at" in by_id[endless]["unreadable"]
    shown = run_cli_here(["jobs", "show", str(deep), "--json"], database_url)
    assert shown.returncode == 0, shown.stderr
    assert "payload" in json.loads(shown.stdout)["unreadable"]
    text = run_cli_here(["jobs", "show", str(deep)], database_url)
    assert text.returncode == 0 and "payload: (cannot be read" in text.stdout, text.stderr


def test_the_dashboard_shows_every_row(database_url: str, conn: psycopg.Connection[Any]) -> None:
    deep, endless, fine = seed(conn)
    with dashboard(database_url, hide_payloads=False) as ui, httpx.Client(timeout=30) as client:
        listing = client.get(f"{ui.url}/jobs")
        assert listing.status_code == 200, listing.text[-500:]
        assert "cannot be shown" in listing.text  # the deep payload, named
        for job_id in (deep, endless, fine):
            page = client.get(f"{ui.url}/jobs/{job_id}")
            assert page.status_code == 200, (job_id, page.text[-500:])
        performance = client.get(f"{ui.url}/performance")
        assert performance.status_code == 200, performance.text[-500:]


def test_pgbeat_testing_lists_every_row(conn: psycopg.Connection[Any]) -> None:
    """``assert_enqueued`` fails with the listing, each row shown as far as it goes."""
    deep, endless, fine = seed(conn)
    conn.execute("UPDATE jobs SET run_at = 'infinity' WHERE id = %s", (endless,))
    with pytest.raises(AssertionError) as failed:
        assert_enqueued(conn, "missing_kind")
    listing = str(failed.value)
    assert f"#{deep} deep <JSON nested too deeply" in listing
    assert f"#{endless} endless" in listing and f"#{fine} fine" in listing
