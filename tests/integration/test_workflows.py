"""Workflows: a step starts only after its parents ended done; a failure cancels dependants
(or lets them run); parents' results reach a step; a key inserts once; validation before
any SQL; show and cancel from the API and the CLI; the repair pass; retention as one.

Steps run through ``pgbeat.testing.drain`` (the worker's own handler call, decision and
outcome statements, on the test's connection), so the order of runs is recorded exactly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.jobs.workflows import repair_workflows
from pgbeat.testing import drain
from tests.helpers import end_jobs, lock_waiters, run_cli_here, wait_for


def recording_registry(ran: list[str], fail: tuple[str, ...] = ()) -> pgbeat.Registry:
    """Handlers for kinds a..h and step: each records its payload's name and returns it."""
    registry = pgbeat.Registry()

    def handler(payload: dict[str, Any], job: pgbeat.JobContext) -> dict[str, Any]:
        ran.append(payload["name"])
        if payload["name"] in fail:
            raise pgbeat.PermanentError(f"{payload['name']} fails")
        return {"name": payload["name"], "parents": job.parent_results}

    registry.handler("step")(handler)
    return registry


def add(flow: pgbeat.Workflow, name: str, *after: pgbeat.Step, **fields: Any) -> pgbeat.Step:
    return flow.add("step", {"name": name}, after=after, name=name, **fields)


def statuses(conn: psycopg.Connection[Any], workflow_id: int) -> dict[str, str]:
    found = pgbeat.workflow(conn, workflow_id)
    assert found is not None
    return {step.name: step.status for step in found.steps}


def drain_all(conn: psycopg.Connection[Any], registry: pgbeat.Registry) -> None:
    while drain(conn, registry, schedules=False):
        pass


def test_a_chain_runs_in_order_and_each_step_reads_its_parents_results(
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow("chain")
    a = add(flow, "a")
    b = add(flow, "b", a)
    add(flow, "c", b)
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    assert set(enqueued.jobs) == {"a", "b", "c"}
    ran: list[str] = []
    drain_all(conn, recording_registry(ran))
    assert ran == ["a", "b", "c"]
    assert statuses(conn, enqueued.id) == {"a": "done", "b": "done", "c": "done"}
    result = conn.execute("SELECT result FROM jobs WHERE id = %s", [enqueued.jobs["c"]]).fetchone()
    assert result is not None
    assert result[0]["parents"] == {
        "b": {"name": "b", "parents": {"a": {"name": "a", "parents": {}}}}
    }


def test_held_steps_are_not_due_until_their_parents_end(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    a = add(flow, "a")
    add(flow, "b", a)
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    found = pgbeat.workflow(conn, enqueued.id)
    assert found is not None
    assert [(s.name, s.status, s.waiting, s.after) for s in found.steps] == [
        ("a", "pending", False, []),
        ("b", "pending", True, ["a"]),
    ]
    assert found.status == "running"
    assert found.counts == {"pending": 1, "waiting": 1}
    assert found.steps["b"].job_id == enqueued.jobs["b"] and found.steps.keys() == ["a", "b"]
    due = conn.execute("SELECT id FROM jobs WHERE status = 'pending' AND run_at <= now()")
    assert [row[0] for row in due] == [enqueued.jobs["a"]]


def test_fan_out_then_fan_in_and_a_diamond(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow("diamond")
    root = add(flow, "root")
    middle = [add(flow, f"m{i}", root) for i in range(5)]
    add(flow, "summary", *middle)
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    ran: list[str] = []
    drain_all(conn, recording_registry(ran))
    assert ran[0] == "root" and ran[-1] == "summary"
    assert sorted(ran[1:-1]) == [f"m{i}" for i in range(5)]
    assert set(statuses(conn, enqueued.id).values()) == {"done"}
    summary = conn.execute(
        "SELECT result FROM jobs WHERE id = %s", [enqueued.jobs["summary"]]
    ).fetchone()
    assert summary is not None
    assert sorted(summary[0]["parents"]) == [f"m{i}" for i in range(5)]


def test_a_failure_cancels_dependants_transitively_and_spares_the_rest(
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow()
    a = add(flow, "a")
    b = add(flow, "b", a)
    c = add(flow, "c", b)
    add(flow, "d", c)
    e = add(flow, "e", a)
    add(flow, "f", b, e, on_parent_failure="run")
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    ran: list[str] = []
    drain_all(conn, recording_registry(ran, fail=("b",)))
    assert statuses(conn, enqueued.id) == {
        "a": "done",
        "b": "failed",
        "c": "cancelled",
        "d": "cancelled",
        "e": "done",
        "f": "done",
    }
    assert "c" not in ran and "d" not in ran
    assert ran.index("f") > ran.index("e")
    found = pgbeat.workflow(conn, enqueued.id)
    assert found is not None and found.status == "failed"
    f_result = conn.execute(
        "SELECT result FROM jobs WHERE id = %s", [enqueued.jobs["f"]]
    ).fetchone()
    assert f_result is not None and f_result[0]["parents"]["b"] is None


def test_a_cancelled_parent_cancels_its_children(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    a = add(flow, "a")
    b = add(flow, "b", a)
    add(flow, "c", b)
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    pgbeat.cancel_job(conn, enqueued.jobs["a"])
    assert set(statuses(conn, enqueued.id).values()) == {"cancelled"}


def test_a_released_step_counts_its_delay_from_the_release(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    a = add(flow, "a")
    add(flow, "b", a, delay=timedelta(hours=1))
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    drain_all(conn, recording_registry([]))
    row = conn.execute(
        "SELECT status, run_at - now() > interval '59 minutes' FROM jobs WHERE id = %s",
        [enqueued.jobs["b"]],
    ).fetchone()
    assert row == ("pending", True)


def test_steps_take_enqueues_job_fields(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    flow.add("report", {"n": 1}, queue="reports", priority=5, limit_key="t1", max_attempts=2)
    second = flow.add("report", {"n": 2})
    assert second.name == "report_2"
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    row = conn.execute(
        "SELECT queue, priority, limit_key, max_attempts, workflow_id FROM jobs WHERE id = %s",
        [enqueued.jobs["report"]],
    ).fetchone()
    assert row == ("reports", 5, "t1", 2, enqueued.id)


def test_a_key_inserts_once(conn: psycopg.Connection[Any]) -> None:
    def build() -> pgbeat.Workflow:
        flow = pgbeat.Workflow("nightly")
        add(flow, "b", add(flow, "a"))
        return flow

    first = pgbeat.enqueue_workflow(conn, build(), key="daily@2030-01-01")
    again = pgbeat.enqueue_workflow(conn, build(), key="daily@2030-01-01")
    assert (again.id, again.jobs, again.inserted) == (first.id, first.jobs, False)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (2,)
    other = pgbeat.enqueue_workflow(conn, build(), key="daily@2030-01-02")
    assert other.id != first.id


def test_a_schedules_job_fans_out_once_per_period(conn: psycopg.Connection[Any]) -> None:
    registry = pgbeat.Registry()

    @registry.handler("daily_reports")
    def daily_reports(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
        flow = pgbeat.Workflow("daily reports")
        reports = [flow.add("report", {"customer": c}) for c in (1, 2, 3)]
        flow.add("summary", after=reports)
        with job.connection() as conn:
            pgbeat.enqueue_workflow(conn, flow, key=job.unique_key)

    registry.handler("report")(lambda payload: payload["customer"])
    registry.handler("summary")(lambda payload, job: sorted(job.parent_results.values()))
    period = pgbeat.enqueue(conn, "daily_reports", unique_key="daily_reports@2030-01-01T07:00:00Z")
    assert period is not None
    drain_all(conn, registry)
    # the period's job runs again (a retry, a second worker after a lost lease): no new fan-out
    conn.execute("UPDATE jobs SET status = 'pending', run_at = now() WHERE id = %s", [period])
    drain_all(conn, registry)
    assert conn.execute("SELECT count(*) FROM pgbeat_workflows").fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'report'").fetchone() == (3,)
    summary = conn.execute("SELECT status, result FROM jobs WHERE kind = 'summary'").fetchone()
    assert summary == ("done", [1, 2, 3])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda flow, other: flow.add("x", after=other.add("y")), "another workflow"),
        (lambda flow, other: flow.add("x", after="nope"), "unknown parent step 'nope'"),
        (lambda flow, other: flow.add("x", after=[object()]), "after= takes steps"),
        (lambda flow, other: flow.add("x", on_parent_failure="skip"), "on_parent_failure"),
        (lambda flow, other: flow.add("x", unique_key="k"), "takes no unique_key"),
        (lambda flow, other: (flow.add("x", name="a"), flow.add("y", name="a")), "already has"),
    ],
)
def test_a_bad_step_is_one_clear_value_error(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(pgbeat.Workflow(), pgbeat.Workflow())


def test_bad_workflows_fail_before_any_sql(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        with pytest.raises(ValueError, match="no steps"):
            pgbeat.enqueue_workflow(conn, pgbeat.Workflow())
        flow = pgbeat.Workflow()
        flow.add("x", run_at="tomorrow")  # enqueue's own check, at enqueue time
        with pytest.raises(TypeError, match="run_at"):
            pgbeat.enqueue_workflow(conn, flow)
        with pytest.raises(TypeError, match="unknown job fields: colour"):
            pgbeat.Workflow().add("x", colour="red")
        conn.execute("SELECT 1")  # the transaction is still usable
    assert conn.execute("SELECT count(*) FROM pgbeat_workflows").fetchone() == (0,)


def test_enqueue_workflow_joins_the_callers_transaction(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    add(flow, "b", add(flow, "a"))
    with pytest.raises(RuntimeError), conn.transaction():
        pgbeat.enqueue_workflow(conn, flow)
        raise RuntimeError("roll back")
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM pgbeat_workflow_steps").fetchone() == (0,)


def test_enqueue_workflow_async(database_url: str) -> None:
    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            flow = pgbeat.Workflow()
            add(flow, "b", add(flow, "a"))
            first = await pgbeat.enqueue_workflow_async(aconn, flow, key="k")
            again = await pgbeat.enqueue_workflow(aconn, flow, key="k")
            assert again.id == first.id and not again.inserted
            found = await pgbeat.workflow(aconn, first.id)
            assert found is not None and found.jobs == first.jobs

    asyncio.run(scenario())


def test_cancel_workflow_ends_pending_steps_and_stops_running_ones(
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow()
    a = add(flow, "a")
    add(flow, "b", a)
    add(flow, "c")
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    conn.execute("UPDATE jobs SET status = 'running' WHERE id = %s", [enqueued.jobs["a"]])
    done = pgbeat.cancel_workflow(conn, enqueued.id)
    assert done is not None
    assert (done.cancelled, done.stopping) == (2, 1)
    row = conn.execute(
        "SELECT status, cancel_requested_at IS NOT NULL FROM jobs WHERE id = %s",
        [enqueued.jobs["a"]],
    ).fetchone()
    assert row == ("running", True)
    assert pgbeat.cancel_workflow(conn, 999_999) is None
    assert pgbeat.workflow(conn, 999_999) is None


def test_the_cli_shows_and_cancels_a_workflow(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    flow = pgbeat.Workflow("cli")
    add(flow, "b", add(flow, "a"))
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    shown = run_cli_here(["workflows", "show", str(enqueued.id), "--json"], database_url)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["id"] == enqueued.id and data["jobs"] == enqueued.jobs
    assert [(s["name"], s["status"], s["after"]) for s in data["steps"]] == [
        ("a", "pending", []),
        ("b", "pending", ["a"]),
    ]
    table = run_cli_here(["workflows", "show", str(enqueued.id)], database_url)
    assert "waiting" in table.stdout and table.returncode == 0
    cancelled = run_cli_here(["workflows", "cancel", str(enqueued.id)], database_url)
    assert cancelled.returncode == 0 and "cancelled 2" in cancelled.stdout
    missing = run_cli_here(["workflows", "show", "424242"], database_url)
    assert missing.returncode == 1 and "no workflow 424242" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_the_repair_pass_finishes_a_workflow_left_behind(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    a = add(flow, "a")
    b = add(flow, "b", a)
    add(flow, "c", a)
    add(flow, "d", b)
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    # plant what a lost advance leaves (SQL by hand does not advance): parents ended,
    # children still held
    conn.execute(
        "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", [enqueued.jobs["a"]]
    )
    conn.execute(
        "UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = %s", [enqueued.jobs["b"]]
    )
    held = "SELECT count(*) FROM jobs WHERE status = 'pending' AND run_at > '9999-01-01'"
    assert conn.execute(held).fetchone() == (2,)  # c and d: SQL by hand advanced nothing
    assert repair_workflows(conn) == (1, 1)  # c released, d cancelled
    assert statuses(conn, enqueued.id) == {
        "a": "done",
        "b": "failed",
        "c": "pending",
        "d": "cancelled",
    }
    assert repair_workflows(conn) == (0, 0)


def test_retention_keeps_a_workflow_until_every_step_is_old(conn: psycopg.Connection[Any]) -> None:
    from pgbeat.db.sql.jobs import retention as purge_sql

    flow = pgbeat.Workflow()
    add(flow, "b", add(flow, "a"))
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    plain = pgbeat.enqueue(conn, "plain")
    assert plain is not None
    end_jobs(conn, [enqueued.jobs["a"], plain], "done")
    conn.execute(
        "UPDATE jobs SET finished_at = now() - interval '8 days' WHERE id IN (%s, %s)",
        [enqueued.jobs["a"], plain],
    )

    def purge() -> list[Any]:
        params = {"statuses": ["done", "cancelled"], "older_than": timedelta(days=7), "batch": 100}
        return conn.execute(purge_sql.JOBS_DELETE_FINISHED, params).fetchall()

    assert len(purge()) == 1  # the plain job only: b is live
    drain_all(conn, recording_registry([]))
    conn.execute(
        "UPDATE jobs SET finished_at = now() - interval '8 days' WHERE id = %s",
        [enqueued.jobs["b"]],
    )
    assert len(purge()) == 2
    assert conn.execute("SELECT count(*) FROM pgbeat_workflow_steps").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM pgbeat_workflow_edges").fetchone() == (0,)


def test_two_concurrent_calls_with_one_key_insert_once(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    def build() -> pgbeat.Workflow:
        flow = pgbeat.Workflow()
        add(flow, "b", add(flow, "a"))
        return flow

    results: list[pgbeat.EnqueuedWorkflow] = []
    with psycopg.connect(database_url) as first:
        results.append(pgbeat.enqueue_workflow(first, build(), key="race"))  # not committed

        def second() -> None:
            with psycopg.connect(database_url, autocommit=True) as other:
                results.append(pgbeat.enqueue_workflow(other, build(), key="race"))

        thread = threading.Thread(target=second)
        thread.start()
        wait_for(  # the second waits on the first's uncommitted key
            lambda: lock_waiters(conn) == 1,
            message="the second call waiting on the key",
        )
        first.commit()
        thread.join(30)
    assert results[1].id == results[0].id and not results[1].inserted
    assert results[1].jobs == results[0].jobs
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (2,)


@pytest.mark.slow
def test_a_worker_repairs_what_it_finds_left_behind(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    flow = pgbeat.Workflow()
    add(flow, "b", add(flow, "a"))
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    conn.execute(  # SQL by hand: no advance, the repair pass's to find
        "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s",
        [enqueued.jobs["a"]],
    )
    ran: list[str] = []
    settings = pgbeat.WorkerSettings(
        heartbeat=False,
        workflow_repair=timedelta(milliseconds=200),
        poll_interval=timedelta(milliseconds=200),
    )
    worker = pgbeat.Worker(database_url, recording_registry(ran), settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: ran == ["b"], timeout=30, message="b repaired and run")
    finally:
        worker.stop()
        thread.join(30)
    assert statuses(conn, enqueued.id) == {"a": "done", "b": "done"}
