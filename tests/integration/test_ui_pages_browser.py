"""Every dashboard page in Chromium at a phone's width (390 px) and a desktop's (1440 px), as
admin and as viewer, in light and dark: no horizontal scroll of the page, no serious or
critical axe-core violation, actions reachable by keyboard, and a schedule that prints.

A screenshot of every page visited is kept under ``test-artifacts/pages/``. axe-core is the
npm package in tests/browser (``npm ci --prefix tests/browser``), injected into each page.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

import pgbeat
from tests.integration.ui_support import (
    ADMIN_TOKEN,
    AXE,
    REPO_ROOT,
    VIEWER_TOKEN,
    Dashboard,
    activity_dashboard,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = REPO_ROOT / "test-artifacts" / "pages"
WIDTHS = {"phone": (390, 844), "desktop": (1440, 900)}
BLOCKING = {"serious", "critical"}
# Checks 1 to 3 of each violation's nodes, with what axe says is wrong with the first.
AXE_RUN = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ")),
    why: v.nodes.length ? v.nodes[0].failureSummary : "",
  }));
}"""


@pytest.fixture(scope="module")
def site(ui_database: str, schedules_file: Path) -> Iterator[Dashboard]:
    if not AXE.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{AXE} is missing (npm ci --prefix tests/browser)")
        pytest.skip(f"axe-core is not installed: run npm ci --prefix tests/browser ({AXE})")
    with activity_dashboard(ui_database) as running:
        yield running


def pages(url: str, role: str) -> list[tuple[str, str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT max(id) FROM jobs WHERE status = 'failed'").fetchone()
        conn.execute("UPDATE pgbeat_processes SET heartbeat_at = now()")  # live, not stale
        flow = pgbeat.Workflow("nightly reports")
        flow.add("send_email", after=[flow.add("nightly_report")])
        workflow = pgbeat.enqueue_workflow(conn, flow, key="pages-browser")
    failed = row[0] if row else 1
    found = [
        ("overview", "/"),
        ("schedules", "/schedules"),
        ("schedule", "/schedules/nightly_report"),
        ("jobs", "/jobs"),
        ("jobs-failed", "/jobs?status=failed"),
        ("job", f"/jobs/{failed}"),
        ("failures", "/failures"),
        ("performance", "/performance?window=24h"),
        ("performance-kind", "/performance/send_email?window=24h"),
        ("processes", "/processes"),
        ("workflow", f"/workflows/{workflow.id}"),
        ("not-found", "/jobs/999999999"),
    ]
    if role == "admin":
        found.append(("confirm", "/jobs/confirm?status=failed&kind=email&action=retry"))
    return found


def log_in(page: Page, ui: Dashboard, token: str) -> None:
    page.goto(ui.url + "/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def check(page: Page, name: str, label: str) -> list[str]:
    """The page's problems: horizontal overflow, and serious or critical axe violations."""
    problems = []
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    if overflow > 0:
        problems.append(f"{name}: the page scrolls sideways by {overflow} px")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{label}-{name}.png"), full_page=True)
    page.add_script_tag(path=str(AXE))
    for violation in page.evaluate(AXE_RUN):
        if violation["impact"] in BLOCKING:
            problems.append(
                f"{name}: {violation['impact']} {violation['id']} ({violation['help']}) at "
                f"{violation['nodes']}: {violation['why']}"
            )
    return problems


@pytest.mark.parametrize(
    ("role", "width", "scheme"),
    [
        # Admin pages are the wider ones (checkboxes, action buttons): they are the ones
        # checked at 390 px; the viewer's at 1440 px; dark mode on the admin's.
        ("admin", "phone", "light"),
        ("admin", "desktop", "dark"),
        ("viewer", "desktop", "light"),
    ],
)
def test_every_page_fits_the_screen_and_axe_finds_nothing_serious(
    browser: Browser, site: Dashboard, ui_database: str, role: str, width: str, scheme: str
) -> None:
    w, h = WIDTHS[width]
    context = browser.new_context(
        viewport={"width": w, "height": h},
        color_scheme=scheme,  # type: ignore[arg-type]
        bypass_csp=True,  # the page's CSP allows no injected script, axe's included
    )
    page = context.new_page()
    page.set_default_timeout(8000)
    label = f"{role}-{width}-{scheme}"
    try:
        page.goto(site.url + "/login")
        problems = check(page, "login", label)
        log_in(page, site, ADMIN_TOKEN if role == "admin" else VIEWER_TOKEN)
        for name, path in pages(ui_database, role):
            page.goto(site.url + path)
            problems += check(page, name, label)
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_an_action_is_reachable_and_done_with_the_keyboard_alone(
    browser: Browser, site: Dashboard, ui_database: str
) -> None:
    with psycopg.connect(ui_database, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO jobs (kind, payload, status, attempts, last_error, finished_at)"
            " VALUES ('keyboard_probe', '{}', 'failed', 1, 'boom', now()) RETURNING id"
        ).fetchone()
    assert row is not None
    job = row[0]
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, site, ADMIN_TOKEN)
        page.goto(f"{site.url}/jobs/{job}")
        for _ in range(40):  # Tab through the page, from the top, to the Retry button
            page.keyboard.press("Tab")
            focused = page.evaluate(
                "[document.activeElement.textContent.trim(),"
                " getComputedStyle(document.activeElement).outlineStyle]"
            )
            if focused[0] == "Retry":
                break
        else:
            pytest.fail("Tab never reached the Retry button")
        assert focused[1] != "none"  # the focus is visible
        page.keyboard.press("Enter")
        expect(page.get_by_role("status")).to_contain_text(f"Job {job} retried")
        with psycopg.connect(ui_database, autocommit=True) as conn:
            status = conn.execute("SELECT status FROM jobs WHERE id = %s", (job,)).fetchone()
        assert status == ("pending",)
    finally:
        context.close()


def test_the_period_strip_and_the_charts_carry_shapes_not_only_colours(
    browser: Browser, site: Dashboard
) -> None:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        log_in(page, site, ADMIN_TOKEN)
        page.goto(site.url + "/schedules")
        shapes: dict[str, Any] = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('.legend-dot')].map(e => {
                 const s = getComputedStyle(e);
                 return [e.className.replace('legend-dot', '').trim(),
                         [s.height, s.backgroundImage, s.borderTopStyle, s.borderTopWidth,
                          s.borderTopLeftRadius]];
               }))"""
        )
        assert len({tuple(v) for v in shapes.values()}) == len(shapes), shapes  # all differ
        page.goto(site.url + "/performance?window=24h")
        hatched = page.locator("svg.chart rect.c-failed").first
        assert re.match(r"url\(#per-hour-hatch\)", hatched.get_attribute("fill") or "")
        expect(page.locator(".legend-list .sw-hatched")).to_have_count(1)
    finally:
        context.close()


def test_a_schedules_history_prints_within_the_width_of_a_page(
    browser: Browser, site: Dashboard, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": 718, "height": 1000})  # A4 less margins
    page = context.new_page()
    try:
        log_in(page, site, ADMIN_TOKEN)
        page.goto(site.url + "/schedules/heartbeat")
        page.emulate_media(media="print")
        expect(page.locator("header.top")).to_be_hidden()
        expect(page.locator("table.preview")).to_be_hidden()
        expect(page.locator("table.history")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        pdf = page.pdf(format="A4", print_background=False)
        (tmp_path / "history.pdf").write_bytes(pdf)
        assert len(re.findall(rb"/Type\s*/Page[^s]", pdf)) >= 1
        page.screenshot(path=str(SHOTS / "print-schedule.png"), full_page=True)
    finally:
        context.close()
