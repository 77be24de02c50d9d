"""The dashboard's Workflow page over HTTP: the steps table with their states and parents,
a link from each step's job page, and a 404 for an unknown workflow. (Chromium and axe
check it with every other page: tests/integration/test_ui_pages_browser.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from tests.helpers import run_cli_here
from tests.integration.ui_support import ADMIN_TOKEN, Dashboard, dashboard, fresh_database


@pytest.fixture(scope="module")
def seeded(server_url: str, template_name: str) -> Iterator[tuple[str, pgbeat.EnqueuedWorkflow]]:
    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            flow = pgbeat.Workflow("nightly <reports>")
            a = flow.add("extract", name="extract")
            flow.add("report", name="report", after=a)
            enqueued = pgbeat.enqueue_workflow(conn, flow, key="nightly@2030")
            conn.execute(
                "UPDATE jobs SET status = 'running' WHERE id = %s", [enqueued.jobs["extract"]]
            )
        yield url, enqueued


@pytest.fixture
def seeded_conn(
    seeded: tuple[str, pgbeat.EnqueuedWorkflow],
) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the seeded database, for a test that adds rows of its own."""
    with psycopg.connect(seeded[0], autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def ui(seeded: tuple[str, pgbeat.EnqueuedWorkflow]) -> Iterator[Dashboard]:
    with dashboard(seeded[0], token=ADMIN_TOKEN) as running:
        yield running


def get(ui: Dashboard, path: str) -> httpx.Response:
    with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        return client.get(ui.url + path)


def test_the_workflow_page_lists_steps_with_states_and_parents(
    ui: Dashboard, seeded: tuple[str, pgbeat.EnqueuedWorkflow]
) -> None:
    _, enqueued = seeded
    page = get(ui, f"/workflows/{enqueued.id}")
    assert page.status_code == 200
    assert "nightly &lt;reports&gt;" in page.text  # escaped
    assert "nightly@2030" in page.text
    assert "s-running" in page.text and "s-waiting" in page.text
    assert f'href="/jobs/{enqueued.jobs["report"]}"' in page.text
    assert '<th scope="row">report</th>' in page.text


def test_a_steps_job_page_links_to_its_workflow(
    ui: Dashboard, seeded: tuple[str, pgbeat.EnqueuedWorkflow]
) -> None:
    _, enqueued = seeded
    page = get(ui, f"/jobs/{enqueued.jobs['report']}")
    assert f'href="/workflows/{enqueued.id}"' in page.text


def test_a_held_steps_job_says_it_waits_for_its_parents_in_both_faces(
    ui: Dashboard, seeded: tuple[str, pgbeat.EnqueuedWorkflow]
) -> None:
    """Not "Run at 9999-12-29 (in 7973 years)": the held steps' placeholder is no due time."""
    url, enqueued = seeded
    held, running = enqueued.jobs["report"], enqueued.jobs["extract"]
    page = get(ui, f"/jobs/{held}")
    assert 'id="waiting-for-parents"' in page.text and "9999" not in page.text
    assert 'id="waiting-for-parents"' not in get(ui, f"/jobs/{running}").text
    shown = run_cli_here(["jobs", "show", str(held), "--json"], url)
    assert json.loads(shown.stdout)["waiting_for_parents"] is True, shown.stderr
    text = run_cli_here(["jobs", "show", str(held)], url).stdout
    assert "waiting: for its parents" in text
    other = run_cli_here(["jobs", "show", str(running), "--json"], url)
    assert json.loads(other.stdout)["waiting_for_parents"] is False


def test_an_unknown_workflow_is_a_404(ui: Dashboard) -> None:
    assert get(ui, "/workflows/424242").status_code == 404


def test_the_job_list_filters_by_workflow(
    ui: Dashboard, seeded: tuple[str, pgbeat.EnqueuedWorkflow]
) -> None:
    url, enqueued = seeded
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.enqueue(conn, "unrelated")
    page = get(ui, f"/jobs?workflow={enqueued.id}")
    assert '<span id="match-count">2</span>' in page.text or 'id="match-count">2<' in page.text
    assert "unrelated" not in page.text.split('id="filters"')[1]
    assert "workflow: a workflow id" in get(ui, "/jobs?workflow=x").text


def test_the_page_draws_the_graph_and_a_held_step_shows_no_queue_time(
    ui: Dashboard, seeded: tuple[str, pgbeat.EnqueuedWorkflow]
) -> None:
    _, enqueued = seeded
    page = get(ui, f"/workflows/{enqueued.id}").text
    graph = page.split('<svg class="wf"')[1].split("</svg>")[0]
    for name, state in (("extract", "running"), ("report", "waits for 1 parent")):
        job_id = enqueued.jobs[name]
        assert f'href="/jobs/{job_id}" aria-label="{name} ({name}): {state}"' in graph
    assert graph.count('class="wf-edge wf-open"') == 1  # extract has not ended done
    report_row = page.split('<th scope="row">report</th>')[1].split("</tr>")[0]
    assert "waits for <strong>extract</strong>" in report_row
    assert "in its queue since" not in report_row and "<time" not in report_row
    extract_row = page.split('<th scope="row">extract</th>')[1].split("</tr>")[0]
    assert "started" in extract_row


def test_a_fan_out_is_drawn_as_a_group_and_its_table_is_capped(
    ui: Dashboard, seeded_conn: psycopg.Connection[Any]
) -> None:
    flow = pgbeat.Workflow("fan")
    root = flow.add("split", name="split")
    parts = [flow.add("part", name=f"part-{i}", after=root) for i in range(600)]
    flow.add("join", name="join", after=parts)
    enqueued = pgbeat.enqueue_workflow(seeded_conn, flow)
    page = get(ui, f"/workflows/{enqueued.id}").text
    graph = page.split('<svg class="wf"')[1].split("</svg>")[0]
    assert graph.count("<a ") == 3
    assert f'href="/jobs?workflow={enqueued.id}&amp;kind=part"' in graph
    assert 'aria-label="600 steps of part: 600 waiting"' in graph
    assert page.count('<th scope="row">part-') == 500 - 1  # split first, then 499 parts
    assert "102 more steps" in page


def test_the_overview_tells_held_steps_from_scheduled_jobs(
    ui: Dashboard, seeded_conn: psycopg.Connection[Any]
) -> None:
    pgbeat.enqueue(seeded_conn, "later", delay=timedelta(hours=1))
    pgbeat.enqueue(seeded_conn, "now", queue="mail")
    row = seeded_conn.execute(
        "SELECT count(*) FILTER (WHERE run_at > '9000-01-01'), count(*) FROM jobs"
        " WHERE status = 'pending' AND run_at > now()"
    ).fetchone()
    assert row is not None and 0 < row[0] < row[1]
    page = get(ui, "/").text
    assert f"{row[1]}</span> scheduled for later" in page
    assert f"{row[0]} of them workflow steps waiting for their parents" in page
    assert '<th scope="row"><a href="/jobs?status=pending&amp;when=due&amp;queue=' in page
