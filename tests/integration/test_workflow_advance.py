"""The advance of migration 0022: a child whose last parents end in one statement is
released without its step row being written; a child still waiting for other parents
counts down under its step row's lock, so the last-parent race has exactly one winner
whether the two ends overlap or follow each other.

Parents are ended by plain UPDATEs (as any path that ends a step does: the trigger runs in
that statement), each on a connection of its own where two ends must overlap. A worker that
ends a step claims again at once: the dependants it released start without a notification
or a poll.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg

import pgbeat
from tests.helpers import end_jobs, wait_for

HELD = "9999-12-29 00:00:00+00"


def two_parents(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """a and b, then c after both; the job ids by step name."""
    flow = pgbeat.Workflow()
    a, b = flow.add("noop", name="a"), flow.add("noop", name="b")
    flow.add("noop", name="c", after=[a, b])
    return pgbeat.enqueue_workflow(conn, flow).jobs


def end(conn: psycopg.Connection[Any], job_id: int, status: str = "done") -> None:
    end_jobs(conn, [job_id], status)


def held(conn: psycopg.Connection[Any], job_id: int) -> bool:
    row = conn.execute("SELECT run_at = %s FROM jobs WHERE id = %s", [HELD, job_id]).fetchone()
    assert row is not None
    return bool(row[0])


def step_row(conn: psycopg.Connection[Any], job_id: int) -> tuple[Any, ...]:
    """The step row's version (xmin) and count."""
    row = conn.execute(
        "SELECT xmin::text, waiting_for FROM pgbeat_workflow_steps WHERE job_id = %s", [job_id]
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_a_fan_outs_children_are_released_without_writing_their_step_rows(
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow()
    root = flow.add("noop", name="root")
    children = [flow.add("noop", {"i": i}, after=root, name=f"c{i}") for i in range(50)]
    flow.add("noop", name="summary", after=children)
    jobs = pgbeat.enqueue_workflow(conn, flow).jobs
    before = {name: step_row(conn, jobs[name]) for name in jobs if name.startswith("c")}
    end(conn, jobs["root"])
    for name, row in before.items():
        assert not held(conn, jobs[name]), name
        assert step_row(conn, jobs[name]) == row, name  # not rewritten
    assert held(conn, jobs["summary"])
    for name in list(before)[:-1]:
        end(conn, jobs[name])
    assert held(conn, jobs["summary"])
    assert step_row(conn, jobs["summary"])[1] == 1  # counted down, one parent left
    end(conn, jobs[list(before)[-1]])
    assert not held(conn, jobs["summary"])


def test_two_parents_ended_one_after_the_other_release_the_child_once(
    conn: psycopg.Connection[Any],
) -> None:
    jobs = two_parents(conn)
    end(conn, jobs["a"])
    assert held(conn, jobs["c"]) and step_row(conn, jobs["c"])[1] == 1
    end(conn, jobs["b"])  # reads the count a left, 1: released, no lock needed
    assert not held(conn, jobs["c"])
    end(conn, jobs["a"], "pending")
    end(conn, jobs["a"])  # a parent that ends again changes nothing
    assert conn.execute("SELECT status FROM jobs WHERE id = %s", [jobs["c"]]).fetchone() == (
        "pending",
    )


def test_two_parents_ended_in_one_statement_release_the_child(
    conn: psycopg.Connection[Any],
) -> None:
    jobs = two_parents(conn)
    end_jobs(conn, [jobs["a"], jobs["b"]], "done")
    assert not held(conn, jobs["c"])


def test_two_parents_ending_at_once_release_the_child_exactly_once(database_url: str) -> None:
    """The second end reads the count before the first commits (2, not its last parent),
    so it counts down under the step row's lock: it waits for the first, then sees 1 -> 0."""
    with (
        psycopg.connect(database_url, autocommit=True) as conn,
        psycopg.connect(database_url) as first,
        psycopg.connect(database_url) as second,
    ):
        jobs = two_parents(conn)
        end(first, jobs["a"])  # uncommitted: holds c's step row
        second_pid = second.info.backend_pid
        failures: list[BaseException] = []

        def end_b() -> None:
            try:
                end(second, jobs["b"])
                second.commit()
            except BaseException as exc:  # reported by the test's thread below
                failures.append(exc)

        thread = threading.Thread(target=end_b)
        thread.start()
        wait_for(
            lambda: (
                conn.execute(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                    [second_pid],
                ).fetchone()
                == (True,)
            ),
            timeout=30,
        )
        assert held(conn, jobs["c"])
        first.commit()
        thread.join(30)
        assert not thread.is_alive() and not failures, failures
        assert not held(conn, jobs["c"])
        assert step_row(conn, jobs["c"])[1] == 0


def test_a_failed_parent_cancels_a_one_parent_child_and_a_run_anyway_child_runs(
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow()
    root = flow.add("noop", name="root")
    flow.add("noop", name="cancelled", after=root)
    flow.add("noop", name="runs", after=root, on_parent_failure="run")
    jobs = pgbeat.enqueue_workflow(conn, flow).jobs
    end(conn, jobs["root"], "failed")
    found = dict(conn.execute("SELECT id, status FROM jobs").fetchall())
    assert found[jobs["cancelled"]] == "cancelled"
    assert found[jobs["runs"]] == "pending" and not held(conn, jobs["runs"])


def test_the_worker_that_ends_a_step_claims_its_dependants_at_once(database_url: str) -> None:
    """No LISTEN and an hour between polls: each step of a chain starts because the worker
    that ended its parent looked again, not because anything told it to."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        flow = pgbeat.Workflow()
        flow.add("step", name="c", after=flow.add("step", name="b", after=flow.add("step")))
        enqueued = pgbeat.enqueue_workflow(conn, flow)
    ran: list[int] = []
    registry = pgbeat.Registry()
    registry.handler("step")(lambda payload, job: ran.append(job.id))
    settings = pgbeat.WorkerSettings(
        listen=False, poll_interval=timedelta(hours=1), heartbeat=False, workflow_repair=None
    )
    worker = pgbeat.Worker(database_url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(ran) == 3, timeout=20, message="the chain ran without a poll")
    finally:
        worker.stop()
        thread.join(30)
    assert ran == [enqueued.jobs["step"], enqueued.jobs["b"], enqueued.jobs["c"]]
