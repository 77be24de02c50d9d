"""Workflows under docs/least-privilege.sql's roles: the enqueue role enqueues a workflow
(once per key), the worker role advances it by ending steps (the advance runs with the
admin's rights), reads parents' results and runs the repair pass, and the dashboard's
viewer reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgbeat
from pgbeat.jobs.workflows import repair_workflows
from tests.helpers import end_jobs
from tests.integration.test_least_privilege import logins, role_url  # noqa: F401

# A step row as a role might write it by hand: job, workflow, name.
STEP_ROW = (
    "INSERT INTO pgbeat_workflow_steps (job_id, workflow_id, name, waiting_for, on_parent_failure)"
    " VALUES (%s, %s, %s, 0, 'cancel')"
)


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


def _rows_before_0034(conn: psycopg.Connection[Any]) -> None:
    """Let ``conn`` (a superuser's, the test's own connection) write step rows and edges as
    before migration 0034's checks (its triggers off for this session), as rows written
    before it may be."""
    conn.execute("SET session_replication_role = replica")


def test_a_step_row_for_another_apps_job_cannot_cancel_or_release_it(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    """The enqueue role may no longer write a step row for a job that is not a step of its
    workflow (migration 0034); rows written before it (here, with its checks off) still
    cannot make the advance cancel another application's plain job, nor release a
    held-looking one (0033: the advance acts on workflow steps only)."""
    invoice = pgbeat.enqueue(conn, "invoice")
    later = pgbeat.enqueue(conn, "invoice", run_at=datetime(9999, 12, 29, tzinfo=UTC))
    assert invoice is not None and later is not None
    with psycopg.connect(logins["enqueue"], autocommit=True) as mallory:
        flow = pgbeat.Workflow()
        flow.add("noop", name="fails")
        flow.add("noop", name="succeeds")
        enqueued = pgbeat.enqueue_workflow(mallory, flow)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not add job"):
            mallory.execute(
                "INSERT INTO pgbeat_workflow_steps"
                " (job_id, workflow_id, name, waiting_for, on_parent_failure)"
                " VALUES (%s, %s, 'victim', 1, 'cancel')",
                [invoice, enqueued.id],
            )
    _rows_before_0034(conn)
    for n, victim in enumerate((invoice, later)):
        conn.execute(
            "INSERT INTO pgbeat_workflow_steps"
            " (job_id, workflow_id, name, waiting_for, on_parent_failure)"
            " VALUES (%s, %s, %s, 1, 'cancel')",
            [victim, enqueued.id, f"victim-{n}"],
        )
        for bait in enqueued.jobs.values():
            conn.execute(
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


@pytest.fixture
def second_app(
    database_url: str,
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> Iterator[str]:
    """Another application: a second login role in the enqueue group. Its URL."""
    web = psycopg.conninfo.conninfo_to_dict(logins["enqueue"])["user"]
    row = conn.execute(
        "SELECT g.rolname FROM pg_auth_members AS m JOIN pg_roles AS g ON g.oid = m.roleid"
        " JOIN pg_roles AS u ON u.oid = m.member WHERE u.rolname = %s",
        [web],
    ).fetchone()
    assert row is not None
    login = sql.Identifier(f"mallory_{row[0][-8:]}")
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(login, sql.Identifier(row[0])))
    yield role_url(database_url, f"mallory_{row[0][-8:]}")
    conn.execute(sql.SQL("DROP OWNED BY {}").format(login))
    conn.execute(sql.SQL("DROP ROLE {}").format(login))


def _held_diamond(url: str) -> pgbeat.EnqueuedWorkflow:
    """The victim's workflow: ``first``, then ``held`` (cancelled if ``first`` fails)."""
    flow = pgbeat.Workflow("victim")
    first = flow.add("noop", name="first")
    flow.add("noop", name="held", after=first)
    with psycopg.connect(url, autocommit=True) as app:
        return pgbeat.enqueue_workflow(app, flow)


def test_a_workflow_is_owned_by_the_role_that_inserted_it(
    logins: dict[str, str],  # noqa: F811
    second_app: str,
    conn: psycopg.Connection[Any],
) -> None:
    victim = _held_diamond(logins["enqueue"])
    owner = conn.execute("SELECT owner FROM pgbeat_workflows WHERE id = %s", [victim.id])
    assert owner.fetchone() == (psycopg.conninfo.conninfo_to_dict(logins["enqueue"])["user"],)
    with psycopg.connect(second_app, autocommit=True) as mallory:
        web = psycopg.conninfo.conninfo_to_dict(logins["enqueue"])["user"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no owner of her choosing
            mallory.execute(
                "INSERT INTO pgbeat_workflows (name, owner) VALUES ('forged', %s)", [web]
            )
        row = mallory.execute(
            "INSERT INTO pgbeat_workflows (name) VALUES ('hers') RETURNING owner"
        ).fetchone()
    assert row == (psycopg.conninfo.conninfo_to_dict(second_app)["user"],)


@pytest.mark.parametrize("ending", ["done", "failed"])
def test_another_app_cannot_reach_a_held_step_through_an_edge(
    logins: dict[str, str],  # noqa: F811
    second_app: str,
    conn: psycopg.Connection[Any],
    ending: str,
) -> None:
    """Mallory, another application in the enqueue group, adds an edge from a step of her
    own workflow into the victim's held step, and a step row of hers into the victim's
    workflow: each statement is refused, and ending her step (done: it would count the held
    step down and release it; failed: it would cancel it) leaves the held step held until
    its own parent ends."""
    victim = _held_diamond(logins["enqueue"])
    with psycopg.connect(second_app, autocommit=True) as mallory:
        flow = pgbeat.Workflow("bait")
        flow.add("noop", name="bait")
        bait = pgbeat.enqueue_workflow(mallory, flow).jobs["bait"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not add an edge"):
            mallory.execute(
                "INSERT INTO pgbeat_workflow_edges (parent_id, child_id) VALUES (%s, %s)",
                [bait, victim.jobs["held"]],
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not add job"):
            posing = mallory.execute(  # her job, naming his workflow (not checked alone)
                "INSERT INTO jobs (kind, payload, workflow_id) VALUES ('noop', '{}', %s)"
                " RETURNING id",
                [victim.id],
            ).fetchone()
            assert posing is not None
            mallory.execute(STEP_ROW, [posing[0], victim.id, "intruder"])
        own = pgbeat.enqueue(mallory, "noop", queue="bait")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # a plain job of hers
            mallory.execute(STEP_ROW, [own, victim.id, "intruder"])
    _end(logins["worker"], bait, ending)
    held = conn.execute("SELECT status, run_at FROM jobs WHERE id = %s", [victim.jobs["held"]])
    assert held.fetchone() == ("pending", datetime(9999, 12, 29, tzinfo=UTC))
    steps = conn.execute(
        "SELECT count(*) FROM pgbeat_workflow_steps WHERE workflow_id = %s", [victim.id]
    )
    assert steps.fetchone() == (2,)
    _end(logins["worker"], victim.jobs["first"], "done")  # its own parent releases it
    released = conn.execute(
        "SELECT run_at < now() + interval '1 minute' FROM jobs WHERE id = %s", [victim.jobs["held"]]
    )
    assert released.fetchone() == (True,)


def test_a_superuser_may_still_add_to_any_workflow(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    """Membership of the owner is ownership (a superuser is a member of every role): an
    operator repairing a workflow by hand is not refused; a step row for a job of another
    workflow still is, whoever writes it."""
    victim = _held_diamond(logins["enqueue"])
    extra = pgbeat.enqueue(conn, "noop")
    conn.execute("UPDATE jobs SET workflow_id = %s WHERE id = %s", [victim.id, extra])
    conn.execute(STEP_ROW, [extra, victim.id, "extra"])
    conn.execute(
        "INSERT INTO pgbeat_workflow_edges (parent_id, child_id) VALUES (%s, %s)",
        [victim.jobs["first"], extra],
    )
    stray = pgbeat.enqueue(conn, "noop")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not add job"):
        conn.execute(STEP_ROW, [stray, victim.id, "stray"])


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
