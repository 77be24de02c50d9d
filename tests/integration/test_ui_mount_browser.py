"""The dashboard mounted in an application of one's own, in a real browser: Chromium logs in
under the mount's path, opens a page and retries a failed job.

uvicorn serves a Starlette app with the dashboard under ``Mount`` (no lifespan reaches it).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import uvicorn
from playwright.sync_api import expect, sync_playwright

from tests.integration.test_ui_mount import MOUNT, dashboard_closed_after, starlette_host
from tests.integration.ui_support import ADMIN_TOKEN, CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium: seconds per test


class Serving:
    """An ASGI app served by uvicorn on 127.0.0.1 and a free port, in a thread."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:  # polls a condition with a deadline
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("the app did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@pytest.fixture
def origin(database_url: str) -> Iterator[str]:
    with (
        dashboard_closed_after(database_url) as dashboard,
        Serving(starlette_host(dashboard)) as served,
    ):
        yield served


def test_log_in_open_a_page_and_retry_a_job_under_a_mount(
    origin: str, conn: psycopg.Connection[Any]
) -> None:
    if shutil.which(CHROMIUM) is None:
        pytest.skip(f"{CHROMIUM} is missing")
    row = conn.execute(
        "INSERT INTO jobs (kind, payload, status, attempts, last_error, finished_at)"
        " VALUES ('export', '{}', 'failed', 1, 'IOError: disk full', now()) RETURNING id"
    ).fetchone()
    assert row is not None
    job_id = int(row[0])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(8000)
        page.goto(f"{origin}{MOUNT}/jobs/{job_id}")
        expect(page.get_by_role("heading", name="Log in")).to_be_visible()
        page.get_by_label("Token").fill(ADMIN_TOKEN)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{origin}{MOUNT}/jobs/{job_id}")
        expect(page.get_by_text("IOError: disk full").first).to_be_visible()
        css = page.request.get(f"{origin}{MOUNT}/static/pgbeat.css")
        assert css.ok
        page.once("dialog", lambda dialog: dialog.accept())  # the script's confirm prompt
        page.get_by_role("button", name="Retry").first.click()
        expect(page.get_by_role("status")).to_be_visible()
        assert page.url.startswith(f"{origin}{MOUNT}/")
        browser.close()
    status = conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert status == ("pending",)
