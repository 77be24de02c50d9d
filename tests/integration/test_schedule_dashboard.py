"""The dashboard's schedule page for this round's keys: the window, the reason of a pause
after failures, and a backfill previewed (how many periods) before it is enqueued."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.scheduler import Scheduler
from tests.integration.ui_support import Dashboard, dashboard

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


@pytest.fixture(scope="module")
def open_local(ui_database: str, schedules_file: Path) -> Iterator[Dashboard]:
    with dashboard(ui_database) as running:
        yield running


def test_the_schedule_page_previews_and_runs_a_backfill(
    open_local: Dashboard, ui_database: str
) -> None:
    with psycopg.connect(ui_database, autocommit=True) as conn:
        pgbeat.upsert_schedule(
            conn, "filler", every="15m", pause_after_failures=2, queue="reports", priority=4
        )
        conn.execute(
            "UPDATE pgbeat_schedules SET paused = true, paused_at = now(),"
            " paused_reason = '2 consecutive periods failed' WHERE name = 'filler'"
        )
        row = conn.execute("SELECT date_trunc('hour', now())").fetchone()
        assert row is not None
        end = row[0]
    start = end - timedelta(hours=1)
    span = {"bf_from": start.isoformat(), "bf_to": end.isoformat()}
    with httpx.Client(base_url=open_local.url, timeout=10) as client:
        page = client.get("/schedules/filler", params=span)
        assert page.status_code == 200, page.text
        assert "2 consecutive periods failed" in page.text and "reports, priority 4" in page.text
        assert "Would enqueue <strong>4</strong> periods" in page.text
        match = CSRF.search(page.text)
        assert match
        form = {"csrf": match.group(1), "from": span["bf_from"], "to": span["bf_to"]}
        done = client.post("/schedules/filler/backfill", data=form)
        assert done.status_code == 303, done.text
        again = client.get("/schedules/filler", params=span)
        assert "Would enqueue <strong>0</strong> periods (4 of 4 in range already decided)" in (
            again.text
        )
        future = client.get(
            "/schedules/filler", params={"bf_from": end.isoformat(), "bf_to": "2999-01-01T00:00Z"}
        )
        assert "in the future" in future.text
    with psycopg.connect(ui_database, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT count(*), min(inserted_by) FROM pgbeat_schedule_history"
            " WHERE schedule = 'filler' AND outcome = 'backfill'"
        ).fetchone()
    assert rows is not None and rows[0] == 4 and str(rows[1]).startswith("ui:")


def test_a_schedule_past_its_end_reads_ended_on_its_page_and_the_list(
    open_local: Dashboard, ui_database: str
) -> None:
    with psycopg.connect(ui_database, autocommit=True) as conn:
        pgbeat.upsert_schedule(conn, "finished", every="1h", end_at="2026-01-01T00:00:00Z")
    with httpx.Client(base_url=open_local.url, timeout=10) as client:
        page = client.get("/schedules/finished")
        assert page.status_code == 200, page.text
        assert '<span class="status h-ended">ended</span>' in page.text
        assert "no period after 2026-01-01" in page.text
        listing = client.get("/schedules")
        assert listing.status_code == 200
        (row,) = [r for r in listing.text.split("<tr") if "/schedules/finished" in r]
        assert "h-ended" in row and "missing" not in row.lower(), row


def test_late_periods_are_marked_on_the_schedule_page_and_the_overview(
    open_local: Dashboard, ui_database: str
) -> None:
    with psycopg.connect(ui_database, autocommit=True) as conn:
        pgbeat.upsert_schedule(conn, "watched", every="1m", deadline="30s", on_late="alert")
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        scheduler = Scheduler(ui_database, None, heartbeat=False)
        scheduler.tick(conn, row[0] + timedelta(seconds=61))
        late = scheduler.tick(conn, row[0] + timedelta(minutes=3)).late
    assert late
    with httpx.Client(base_url=open_local.url, timeout=10) as client:
        page = client.get("/schedules/watched")
        assert page.status_code == 200, page.text
        assert '<span class="status h-late">late</span>' in page.text  # the page's health
        assert "deadline-late" in page.text and "p-late" in page.text
        assert "alert job of kind <code>alert</code>" in page.text
        overview = client.get("/")
        assert overview.status_code == 200
        assert re.search(r'class="status h-late"[^>]*>\d+ late', overview.text), overview.text
