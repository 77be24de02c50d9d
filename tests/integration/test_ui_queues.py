"""The dashboard's Queues page and the jobs list's queue, priority and limit-key filters, in
Chromium (as the other pages) and over HTTP."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

import pgbeat
from pgbeat.jobs import queues
from tests.integration.test_ui_browser import log_in
from tests.integration.ui_support import (
    ADMIN_TOKEN,
    CHROMIUM,
    CHROMIUM_ARGS,
    Dashboard,
    dashboard,
    fresh_database,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def seeded(server_url: str, template_name: str) -> Iterator[str]:
    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.configure_queue(conn, "api", key_concurrency=1, rate="100/10s")
            pgbeat.enqueue_many(
                conn,
                [pgbeat.NewJob("call", queue="api", limit_key=f"c{i % 3}") for i in range(6)]
                + [pgbeat.NewJob("mail", queue="mail", priority=5) for _ in range(2)],
            )
            conn.execute(  # c0 runs: its key is saturated
                "UPDATE jobs SET status = 'running', locked_until = now() + interval '1 hour' "
                "WHERE id = (SELECT min(id) FROM jobs WHERE limit_key = 'c0')"
            )
        yield url


@pytest.fixture(scope="module")
def ui(seeded: str) -> Iterator[Dashboard]:
    with dashboard(seeded, token=ADMIN_TOKEN) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.skip(f"{CHROMIUM} is missing")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(8000)
    yield opened
    context.close()


def paused(url: str, name: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT paused FROM pgbeat_queues WHERE name = %s", (name,)).fetchone()
    return None if row is None else row[0]


def test_the_queues_page_shows_limits_and_saturated_keys_and_pauses(
    page: Page, ui: Dashboard, seeded: str
) -> None:
    log_in(page, ui)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Queues").click()
    expect(page.get_by_role("heading", name="Queues", exact=True)).to_be_visible()
    api = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="api"))
    expect(api).to_contain_text("100/10s")
    expect(api).to_contain_text("c0 (1)")
    mail = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="mail"))
    mail.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_have_text("Queue mail paused.")
    assert paused(seeded, "mail") is True
    mail = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="mail"))
    mail.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("status")).to_have_text("Queue mail resumed.")
    assert paused(seeded, "mail") is False


def test_filter_jobs_by_queue_priority_and_limit_key(page: Page, ui: Dashboard) -> None:
    log_in(page, ui)
    page.goto(ui.url + "/jobs")
    page.get_by_label("Queue").fill("api")
    page.get_by_label("Limit key").fill("c1")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#match-count")).to_have_text("2")
    page.goto(ui.url + "/jobs?priority=5")
    expect(page.locator("#match-count")).to_have_text("2")


def test_a_bad_priority_filter_is_reported(ui: Dashboard) -> None:
    with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        response = client.get(f"{ui.url}/jobs", params={"priority": "99999"})
    assert "priority: a whole number" in response.text


def test_the_queues_page_is_paginated_and_filtered_by_name(ui: Dashboard, seeded: str) -> None:
    with psycopg.connect(seeded, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgbeat_queues (name, concurrency)"
            " SELECT 'tenant' || lpad(i::text, 3, '0'), 5 FROM generate_series(0, 149) i"
            " ON CONFLICT DO NOTHING"
        )
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        first = client.get(f"{ui.url}/queues").text
        assert "Next queues" in first and ">tenant097<" in first and ">tenant098<" not in first
        after = client.get(f"{ui.url}/queues", params={"after": "tenant097"}).text
        assert ">tenant098<" in after and ">tenant149<" in after and "Next queues" not in after
        named = client.get(f"{ui.url}/queues", params={"name": "ANT14"}).text
        assert ">tenant140<" in named and ">tenant149<" in named and ">api<" not in named


@pytest.fixture(scope="module")
def many(server_url: str, template_name: str) -> Iterator[Dashboard]:
    """250 queues with due jobs (tenant-000's oldest), served with a search span of one page."""
    with fresh_database(server_url, template_name) as url, pytest.MonkeyPatch.context() as mp:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (kind, payload, queue, run_at)"
                " SELECT 'noop', '{}', 'tenant-' || lpad(q::text, 3, '0'),"
                "        now() - (300 - q) * interval '1 minute' - n * interval '1 s'"
                " FROM generate_series(0, 249) AS q, generate_series(0, 2) AS n"
            )
        mp.setattr(queues, "SEARCH_SPAN", 1)  # a filter walks 100 queues a page
        with dashboard(url, token=ADMIN_TOKEN) as running:
            yield running


def test_the_overview_names_the_queues_of_the_oldest_due_jobs(page: Page, many: Dashboard) -> None:
    log_in(page, many)
    oldest = page.get_by_role("table", name="The queues whose oldest due job has waited longest")
    names = oldest.get_by_role("rowheader")
    expect(names).to_have_text([f"tenant-{i:03d}" for i in range(queues.OLDEST_SHOWN)])
    expect(oldest.get_by_role("row").nth(1)).to_contain_text("5h00m")
    names.first.get_by_role("link").click()
    expect(page.locator("#match-count")).to_have_text("3")
    expect(page.get_by_role("textbox", name="Queue")).to_have_value("tenant-000")


def test_the_queues_page_pages_and_searches_further(page: Page, many: Dashboard) -> None:
    log_in(page, many)
    page.goto(many.url + "/queues")
    table = page.get_by_role("table", name="Queues with settings or live jobs")
    expect(table.get_by_role("rowheader")).to_have_count(100)
    expect(table.get_by_role("rowheader").first).to_have_text("tenant-000")
    page.get_by_role("link", name="Next queues").click()
    expect(table.get_by_role("rowheader").first).to_have_text("tenant-100")
    page.get_by_label("Name contains").fill("249")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("Searched the queues up to tenant-099")).to_be_visible()
    expect(table).to_contain_text("No match among the queues up to tenant-099")
    page.get_by_role("link", name="Search further").click()
    expect(page.get_by_text("Searched the queues up to tenant-199")).to_be_visible()
    page.get_by_role("link", name="Search further").click()
    expect(table.get_by_role("rowheader")).to_have_text(["tenant-249"])
    expect(page.get_by_role("link", name="Search further")).to_have_count(0)
