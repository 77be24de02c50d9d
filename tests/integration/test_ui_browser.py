"""The dashboard in a real browser: Debian's Chromium driven by Playwright, against a real
uvicorn and PostgreSQL, with and without ``--prefix``.

Chromium is launched from /usr/bin/chromium (browser downloads are not possible here).
When a test fails, a screenshot of its page is kept under ``test-artifacts/``.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

import pgbeat
from pgbeat.scheduling.catchup import last_fires_between
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.fires import next_fire_after
from pgbeat.scheduling.schedule import Schedule, unique_key
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.ui import timefmt
from tests.helpers import in_thread, wait_for
from tests.integration.ui_support import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    Dashboard,
    dashboard,
    fresh_database,
    write_schedules,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PREFIXES = ["", "/pgbeat"]

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium: seconds per test


@pytest.fixture(scope="module", params=PREFIXES, ids=["root", "prefix"])
def ui(
    request: pytest.FixtureRequest, ui_database: str, schedules_file: Path
) -> Iterator[Dashboard]:
    with dashboard(
        ui_database,
        prefix=request.param,
        token=ADMIN_TOKEN,
        viewer_token=VIEWER_TOKEN,
        refresh_seconds=1,
    ) as running:
        yield running


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(8000)
    failed_before = request.session.testsfailed
    yield opened
    if request.session.testsfailed > failed_before:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
        opened.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()


def log_in(page: Page, ui: Dashboard, token: str = ADMIN_TOKEN) -> None:
    page.goto(ui.url + "/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def database_now(url: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]


def failed_jobs(url: str, kind: str, count: int) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "INSERT INTO jobs (kind, payload, status, attempts, last_error, finished_at)"
            " SELECT %s, jsonb_build_object('n', i), 'failed', 1, 'IOError: disk ' || i, now()"
            " FROM generate_series(1, %s) AS i RETURNING id",
            (kind, count),
        ).fetchall()
    return [int(r[0]) for r in rows]


def statuses(url: str, ids: list[int]) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT status FROM jobs WHERE id = ANY(%s) ORDER BY id", (ids,))
        return [str(r[0]) for r in rows]


def test_log_in_and_see_the_next_fire_in_the_schedules_zone_and_in_utc(
    page: Page, ui: Dashboard, ui_database: str, schedules_file: Path
) -> None:
    nightly = next(s for s in load_schedules(schedules_file) if s.name == "nightly_report")
    now = database_now(ui_database)
    enqueue_latest_period(ui_database, nightly, now)  # as a running scheduler would have
    with psycopg.connect(ui_database, autocommit=True) as conn:  # an hour without a scheduler
        conn.execute(
            "UPDATE pgbeat_schedules SET created_at = now() - interval '1 hour'"
            " WHERE name = 'heartbeat'"
        )
    log_in(page, ui)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Schedules").click()
    row = page.locator("#schedule-nightly_report")
    fire = next_fire_after(nightly, now)
    expect(row.locator(".next .local")).to_have_text(timefmt.local_text(fire, nightly.zone))
    expect(row.locator(".next .utc time")).to_have_text(timefmt.utc_text(fire))
    assert re.search(r"E[SD]T", row.locator(".next .local").inner_text())
    expect(row.locator(".zone")).to_contain_text("America/New_York")
    expect(row).to_contain_text("at 02:30 every day")
    expect(row.locator(".last")).to_contain_text("by test-replica")
    # No scheduler enqueued the heartbeat's last period: it is overdue, not "next".
    heartbeat = page.locator("#schedule-heartbeat .next")
    expect(heartbeat).to_contain_text("overdue")
    expect(heartbeat.locator(".local")).to_have_count(0)


def enqueue_latest_period(url: str, schedule: Schedule, now: Any) -> None:
    """The latest period's job and history row, as a scheduler replica writes them."""
    [fire] = last_fires_between(schedule, now - timedelta(days=2), now, 1)
    with psycopg.connect(url, autocommit=True) as conn:
        job = pgbeat.enqueue(
            conn, schedule.kind, {}, run_at=fire, unique_key=unique_key(schedule, fire)
        )
        conn.execute(
            "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, job_id, inserted_by)"
            " VALUES (%s, %s, 'enqueued', %s, 'test-replica')"
            " ON CONFLICT (schedule, fire_at) WHERE outcome <> 'manual' DO NOTHING",
            (schedule.name, fire, job),
        )


def test_the_preview_notes_the_spring_forward_gap(page: Page, ui: Dashboard) -> None:
    log_in(page, ui)
    page.goto(ui.url + "/schedules/nightly_report?from=2027-03-13&n=3")
    rows = page.locator("table.preview tbody tr")
    expect(rows.nth(1)).to_contain_text("2027-03-14 03:00 EDT")
    expect(rows.nth(1)).to_contain_text("GAP")
    expect(rows.nth(1)).to_contain_text("2027-03-14 07:00:00Z")
    expect(rows.nth(2)).to_contain_text("2027-03-15 02:30 EDT")


def test_filter_jobs_by_payload(page: Page, ui: Dashboard, ui_database: str) -> None:
    log_in(page, ui)
    page.goto(ui.url + "/jobs")
    page.get_by_label("Payload contains (JSON)").fill('{"tenant": "acme"}')
    page.get_by_role("button", name="Filter").click()
    with psycopg.connect(ui_database, autocommit=True) as conn:
        row = conn.execute(
            'SELECT count(*) FROM jobs WHERE payload @> \'{"tenant": "acme"}\''
        ).fetchone()
    expected = int(row[0]) if row else 0
    expect(page.locator("#match-count")).to_have_text(str(expected))
    payloads = page.locator("table.jobs td.payload").all_inner_texts()
    assert len(payloads) == expected > 0
    assert all('"tenant": "acme"' in p and "sk-live" not in p for p in payloads)


def test_retry_all_failed_jobs_matching_a_filter_through_the_confirm_page(
    page: Page, ui: Dashboard, ui_database: str
) -> None:
    kind = "export" + ui.settings.prefix.replace("/", "_")
    ids = failed_jobs(ui_database, kind, 7)
    log_in(page, ui)
    page.goto(ui.url + "/jobs?status=failed")
    page.get_by_label("Kind").fill(kind)
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("button", name="Retry all 7 matching…").click()
    expect(page.get_by_role("heading", name="Retry 7 jobs?")).to_be_visible()
    page.get_by_role("button", name="Retry 7 jobs").click()
    expect(page.get_by_role("status")).to_have_text("Retried 7.")
    assert statuses(ui_database, ids) == ["pending"] * 7


def test_read_only_viewer_sees_no_action_and_a_forged_post_is_refused(
    page: Page, ui: Dashboard, ui_database: str
) -> None:
    [job] = failed_jobs(ui_database, "viewer_probe", 1)
    log_in(page, ui, VIEWER_TOKEN)
    page.goto(f"{ui.url}/jobs/{job}")
    expect(page.get_by_text("Read-only: actions are hidden and refused.")).to_be_visible()
    expect(page.locator("main button")).to_have_count(0)
    page.goto(ui.url + "/jobs?status=failed")
    expect(page.locator("main button", has_text="Retry")).to_have_count(0)
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    response = page.request.post(
        f"{ui.url}/jobs/{job}/retry",
        form={"csrf": csrf or ""},
        headers={"Origin": ui.origin},
    )
    assert response.status == 403
    assert statuses(ui_database, [job]) == ["failed"]


def test_live_refresh_shows_new_failures_without_navigation(
    page: Page, ui: Dashboard, ui_database: str
) -> None:
    log_in(page, ui)
    count = page.locator("#count-failed")
    before = int(count.inner_text().replace(",", ""))
    failed_jobs(ui_database, "live_probe", 2)
    expect(count).to_have_text(str(before + 2), timeout=6000)


def test_a_cross_site_form_cannot_act_on_a_local_dashboard(
    browser: Browser, ui_database: str, schedules_file: Path, tmp_path: Path
) -> None:
    """An open loopback dashboard (no token) is what a hostile page would target."""
    [job] = failed_jobs(ui_database, "csrf_probe", 1)
    page = browser.new_page()
    with dashboard(ui_database) as local:
        page.goto(f"{local.url}/jobs/{job}")
        csrf = page.locator("input[name=csrf]").first.get_attribute("value")  # the worst case
        (tmp_path / "attack.html").write_text(
            f'<form id="f" method="post" action="{local.url}/jobs/{job}/retry">'
            f'<input name="csrf" value="{csrf}"></form>'
            "<script>document.getElementById('f').submit()</script>"
        )
        with serving(tmp_path) as other_origin:
            with page.expect_response(f"{local.url}/jobs/{job}/retry") as answer:
                page.goto(f"{other_origin}/attack.html")
            assert answer.value.status == 403
    page.close()
    assert statuses(ui_database, [job]) == ["failed"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def serving(folder: Path) -> Any:
    """Another origin (127.0.0.1, another port) serving ``folder``."""

    class Served:
        def __enter__(self) -> str:
            handler = lambda *a: _Quiet(*a, directory=str(folder))  # noqa: E731
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
            return f"http://127.0.0.1:{self.server.server_address[1]}"

        def __exit__(self, *_: Any) -> None:
            self.server.shutdown()
            self.server.server_close()

    return Served()


TICKER = """
[schedules.ticker]
every = "1s"
kind = "tick"
"""


def history_count(url: str, outcome: str, since: Any = None) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgbeat_schedule_history WHERE schedule = 'ticker'"
            " AND outcome = %s AND (%s::timestamptz IS NULL OR inserted_at > %s)",
            (outcome, since, since),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("prefix", PREFIXES, ids=["root", "prefix"])
def test_pause_resume_and_run_now_with_a_running_scheduler(
    prefix: str, page: Page, server_url: str, template_name: str, tmp_path: Path
) -> None:
    path = write_schedules(tmp_path, TICKER)
    with (
        fresh_database(server_url, template_name) as url,
        in_thread(Scheduler(url, load_schedules(path), heartbeat=False), join=15),
    ):
        wait_for(lambda: history_count(url, "enqueued") >= 1, timeout=15, message="a tick")
        with dashboard(url, prefix=prefix, token=ADMIN_TOKEN) as ui:
            log_in(page, ui)
            page.goto(ui.url + "/schedules/ticker")
            page.get_by_role("button", name="Pause").click()
            expect(page.get_by_role("status")).to_have_text("ticker paused.")
            expect(page.get_by_role("heading", name="ticker")).to_contain_text("paused")
            paused_at = database_now(url)
            # The scheduler honours it: periods are recorded as skipped, none enqueued.
            wait_for(
                lambda: history_count(url, "skipped", paused_at) >= 2,
                timeout=15,
                message="skipped periods while paused",
            )
            assert history_count(url, "enqueued", paused_at + timedelta(seconds=1)) == 0
            page.get_by_role("button", name="Resume").click()
            expect(page.get_by_role("status")).to_have_text("ticker resumed.")
            resumed_at = database_now(url)
            wait_for(
                lambda: history_count(url, "enqueued", resumed_at) >= 1,
                timeout=15,
                message="periods enqueued again",
            )
            page.get_by_role("button", name="Run now").click()
            flash = page.get_by_role("status")
            expect(flash).to_contain_text("Manual run of ticker enqueued as job")
            job = re.search(r"job (\d+)", flash.inner_text())
            assert job is not None
            page.locator("table.history tr.period-manual").first.get_by_role(
                "link", name=job.group(1)
            ).click()
            expect(page.get_by_role("heading", name=f"Job {job.group(1)}")).to_be_visible()
            expect(page.locator("dl.fields")).to_contain_text("ticker@manual:")
