"""The Workflow page's graph in Chromium: a box per step (a fan-out drawn as one group),
each naming its state in words, arrows that wait dashed, a step's box leading to its job,
a held step that says whom it waits for and no queue time; and axe-core finds nothing
serious or critical on the page, at a phone's and a desktop's width, light and dark."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

import pgbeat
from tests.helpers import end_jobs
from tests.integration.test_ui_pages_browser import WIDTHS, check
from tests.integration.ui_support import ADMIN_TOKEN, AXE, Dashboard, dashboard, fresh_database

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPORTS = 12  # more than a level draws one by one (workflow_graph.MAX_PER_LEVEL)


def end(conn: psycopg.Connection[Any], ids: list[int], status: str) -> None:
    """Steps started, or ended as a worker's statements end them (the advance runs)."""
    conn.execute(
        "UPDATE jobs SET status = %(status)s, attempts = 1, started_at = now(),"
        " locked_until = CASE WHEN %(status)s = 'running' THEN now() + interval '1 hour' END"
        " WHERE id = ANY(%(ids)s)",
        {"status": status, "ids": ids},
    )
    if status != "running":
        end_jobs(conn, ids, status)


@pytest.fixture(scope="module")
def seeded(server_url: str, template_name: str) -> Iterator[tuple[str, pgbeat.EnqueuedWorkflow]]:
    """extract (done) -> 12 reports (10 done, 2 running) -> summary (waiting); and mail
    after extract, released and due (in its queue)."""
    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            flow = pgbeat.Workflow("nightly")
            extract = flow.add("extract", name="extract")
            reports = [
                flow.add("report", name=f"report-{i:02d}", after=extract) for i in range(REPORTS)
            ]
            flow.add("mail", name="mail", after=extract)
            flow.add("summary", name="summary", after=reports)
            enqueued = pgbeat.enqueue_workflow(conn, flow)
            jobs = enqueued.jobs
            end(conn, [jobs["extract"]], "done")
            end(conn, [jobs[f"report-{i:02d}"] for i in range(10)], "done")
            end(conn, [jobs[f"report-{i:02d}"] for i in range(10, REPORTS)], "running")
        yield url, enqueued


@pytest.fixture(scope="module")
def ui(seeded: tuple[str, pgbeat.EnqueuedWorkflow]) -> Iterator[Dashboard]:
    with dashboard(seeded[0], token=ADMIN_TOKEN, refresh_seconds=0) as running:
        yield running


def open_page(browser: Browser, ui: Dashboard, path: str, **options: Any) -> Page:
    context = browser.new_context(**options)
    page = context.new_page()
    page.set_default_timeout(8000)
    page.goto(ui.url + "/login")
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    page.goto(ui.url + path)
    return page


def test_the_graph_draws_each_step_with_its_state_and_leads_to_its_job(
    browser: Browser, ui: Dashboard, seeded: tuple[str, pgbeat.EnqueuedWorkflow]
) -> None:
    _, enqueued = seeded
    page = open_page(browser, ui, f"/workflows/{enqueued.id}")
    try:
        graph = page.get_by_role("group", name="Graph")
        boxes = graph.get_by_role("link")
        expect(boxes).to_have_count(4)  # extract, the reports as one group, mail, summary
        extract = graph.get_by_role("link", name="extract (extract): done")
        expect(extract).to_be_visible()
        group = graph.get_by_role("link", name="12 steps of report: 2 running, 10 done")
        expect(group).to_contain_text("report (12)")
        summary = graph.get_by_role("link", name="summary (summary): waits for 2 parents")
        expect(summary).to_contain_text("waits for 2 parents")
        expect(graph.get_by_role("link", name="mail (mail): pending")).to_be_visible()
        # two arrows from extract, report -> summary dashed (two reports still run)
        assert page.locator("svg.wf path.wf-edge").count() == 3
        assert page.locator("svg.wf path.wf-edge.wf-open").count() == 1
        places = [box.bounding_box() for box in (extract, group, summary)]
        assert [place["x"] for place in places if place] == sorted(p["x"] for p in places if p)
        assert len({place["x"] for place in places if place}) == 3  # one level each
        table = page.get_by_role("table", name="The workflow's steps in the order they were added")
        held = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name="summary"))
        expect(held).to_contain_text("waits for report-10, report-11 (in no queue yet)")
        expect(held).not_to_contain_text("since")
        mail = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name="mail"))
        expect(mail).to_contain_text("in its queue since")
        group.click()
        expect(page.locator("#match-count")).to_have_text(str(REPORTS))
        page.go_back()
        page.get_by_role("group", name="Graph").get_by_role(
            "link", name="mail (mail): pending"
        ).click()
        expect(page.get_by_role("heading", name=f"Job {enqueued.jobs['mail']}")).to_be_visible()
    finally:
        page.context.close()


@pytest.mark.parametrize(("width", "scheme"), [("phone", "light"), ("desktop", "dark")])
def test_the_workflow_page_fits_the_screen_and_axe_finds_nothing_serious(
    browser: Browser,
    ui: Dashboard,
    seeded: tuple[str, pgbeat.EnqueuedWorkflow],
    width: str,
    scheme: str,
) -> None:
    if not AXE.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{AXE} is missing (npm ci --prefix tests/browser)")
        pytest.skip(f"axe-core is not installed: run npm ci --prefix tests/browser ({AXE})")
    _, enqueued = seeded
    w, h = WIDTHS[width]
    page = open_page(
        browser,
        ui,
        f"/workflows/{enqueued.id}",
        viewport={"width": w, "height": h},
        color_scheme=scheme,
        bypass_csp=True,  # the page's CSP allows no injected script, axe's included
    )
    try:
        expect(page.get_by_role("group", name="Graph")).to_be_visible()
        problems = check(page, "workflow-graph", f"admin-{width}-{scheme}")
    finally:
        page.context.close()
    assert not problems, "\n".join(problems)
