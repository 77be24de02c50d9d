"""Workflows under docs/least-privilege.sql's roles: the enqueue role enqueues a workflow
(once per key), the worker role advances it by ending steps (the advance runs with the
admin's rights), reads parents' results and runs the repair pass, and the dashboard's
viewer reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.jobs.workflows import repair_workflows
from tests.helpers import end_jobs
from tests.integration.test_least_privilege import logins  # noqa: F401  # the fixture


def _end(url: str, job_id: int, status: str, result: str | None = None) -> None:
    """What a worker's claim and outcome do to a job, as the role of ``url``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1 WHERE id = %s", [job_id]
        )
        end_jobs(conn, [job_id], status, result)


def test_the_enqueue_role_enqueues_and_the_worker_role_advances(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow("roles")
    a = flow.add("noop", name="a")
    b = flow.add("noop", name="b", after=a)
    flow.add("noop", name="c", after=b)
    flow.add("noop", name="d", after=a, on_parent_failure="run")
    with psycopg.connect(logins["enqueue"], autocommit=True) as web:
        enqueued = pgbeat.enqueue_workflow(web, flow, key="roles-1")
        again = pgbeat.enqueue_workflow(web, flow, key="roles-1")
    assert again.id == enqueued.id and not again.inserted
    _end(logins["worker"], enqueued.jobs["a"], "done", '{"n": 1}')
    with psycopg.connect(logins["worker"], autocommit=True) as worker:
        shown = pgbeat.workflow(worker, enqueued.id)
        assert shown is not None
        context = pgbeat.JobContext(
            id=enqueued.jobs["b"],
            kind="noop",
            attempt=1,
            max_attempts=8,
            run_at=shown.created_at,
            created_at=shown.created_at,
            unique_key=None,
            timeout=timedelta(seconds=5),
            connection_factory=lambda: psycopg.connect(logins["worker"], autocommit=True),
        )
        assert context.parent_results == {"a": {"n": 1}}
    _end(logins["worker"], enqueued.jobs["b"], "failed")
    with psycopg.connect(logins["ui_viewer"], autocommit=True) as viewer:
        found = pgbeat.workflow(viewer, enqueued.id)
    assert found is not None
    assert {s.name: (s.status, s.waiting) for s in found.steps} == {
        "a": ("done", False),
        "b": ("failed", False),
        "c": ("cancelled", False),
        "d": ("pending", False),
    }
    with psycopg.connect(logins["worker"], autocommit=True) as worker:
        assert repair_workflows(worker) == (0, 0)


def test_the_enqueue_role_cannot_end_or_release_a_step(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow()
    flow.add("noop", name="b", after=flow.add("noop", name="a"))
    with psycopg.connect(logins["enqueue"], autocommit=True) as web:
        enqueued = pgbeat.enqueue_workflow(web, flow)
        for statement in (
            "UPDATE jobs SET run_at = now() WHERE id = %s",
            "UPDATE pgbeat_workflow_steps SET waiting_for = 0 WHERE job_id = %s",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                web.execute(statement, [enqueued.jobs["b"]])


def test_a_step_row_for_another_apps_job_cannot_cancel_or_release_it(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    """The enqueue role may insert step rows and edges for any job id (workflows have no
    owner yet: docs/reliability.md); the advance still acts on workflow steps only, so a
    step that fails cannot cancel another application's plain job through them, nor a
    held-looking one be released."""
    invoice = pgbeat.enqueue(conn, "invoice")
    later = pgbeat.enqueue(conn, "invoice", run_at=datetime(9999, 12, 29, tzinfo=UTC))
    assert invoice is not None and later is not None
    with psycopg.connect(logins["enqueue"], autocommit=True) as mallory:
        flow = pgbeat.Workflow()
        flow.add("noop", name="fails")
        flow.add("noop", name="succeeds")
        enqueued = pgbeat.enqueue_workflow(mallory, flow)
        for n, victim in enumerate((invoice, later)):
            mallory.execute(
                "INSERT INTO pgbeat_workflow_steps"
                " (job_id, workflow_id, name, waiting_for, on_parent_failure)"
                " VALUES (%s, %s, %s, 1, 'cancel')",
                [victim, enqueued.id, f"victim-{n}"],
            )
            for bait in enqueued.jobs.values():
                mallory.execute(
                    "INSERT INTO pgbeat_workflow_edges (parent_id, child_id) VALUES (%s, %s)",
                    [bait, victim],
                )
    _end(logins["worker"], enqueued.jobs["succeeds"], "done")  # would release `later`
    _end(logins["worker"], enqueued.jobs["fails"], "failed")  # would cancel both
    rows = conn.execute(
        "SELECT status, run_at = '9999-12-29 00:00:00+00' FROM jobs WHERE id = ANY(%s) ORDER BY id",
        [[invoice, later]],
    ).fetchall()
    assert rows == [("pending", False), ("pending", True)]


def test_the_worker_role_claims_a_large_fan_out_in_place_and_releases_it(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    claims_a_large_fan_out_in_place(logins, conn)


def claims_a_large_fan_out_in_place(urls: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    """Migration 0032's ready row: written by the advance (the admin's rights), moved on by
    the worker role's claims, released by its read of the held queues when stale (``urls``:
    the logins by group; ``conn``: the owner's, to count)."""
    from pgbeat.db.sql.jobs import claim_ready as ready_sql

    flow = pgbeat.Workflow()
    root = flow.add("noop", name="root")
    for i in range(1000):
        flow.add("noop", {"i": i}, after=root)
    with psycopg.connect(urls["enqueue"], autocommit=True) as web:
        enqueued = pgbeat.enqueue_workflow(web, flow)
    _end(urls["worker"], enqueued.jobs["root"], "done")
    params = {"limit": 600, "lease": timedelta(minutes=1), "kinds": None, "queues": None}
    with psycopg.connect(urls["worker"], autocommit=True) as worker:
        rows = worker.execute(ready_sql.JOBS_CLAIM_READY, params).fetchall()
        assert len([row for row in rows if row[0] is not None]) == 600
        worker.execute("SELECT pg_sleep(0.02)")
        released = worker.execute(ready_sql.READY_RELEASE_STALE, {"stale": timedelta(0)})
        assert released.fetchone() == (400, False)
    counts = conn.execute(
        "SELECT status, count(*) FROM jobs WHERE workflow_id = %s AND id <> %s GROUP BY 1",
        [enqueued.id, enqueued.jobs["root"]],
    ).fetchall()
    assert sorted(counts) == [("pending", 400), ("running", 600)]
