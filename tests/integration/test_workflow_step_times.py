"""A step row's asked run time never fails the statement that releases it (migration 0033):
the database refuses what the API refuses, and a row written before the constraints (or
with them dropped) is released at a clamped time, by the advance and by the repair pass,
without failing its parents' completion or the other outcomes of their batch."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgbeat
from pgbeat.jobs.workflows import repair_workflows
from pgbeat.worker import operations
from tests.integration.test_workflow_ending_paths import run


def two_parents(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """a and b, then c after both with a delay (so its release reads its step row)."""
    flow = pgbeat.Workflow()
    a, b = flow.add("noop", name="a"), flow.add("noop", name="b")
    flow.add("noop", name="c", after=[a, b], delay=timedelta(seconds=5))
    return pgbeat.enqueue_workflow(conn, flow).jobs


def set_step_c(column: str) -> sql.Composed:
    return sql.SQL("UPDATE pgbeat_workflow_steps SET {} = %s WHERE name = 'c'").format(
        sql.Identifier(column)
    )


def plant(conn: psycopg.Connection[Any], column: str, value: str) -> None:
    """A step row as SQL wrote it before migration 0033's constraints."""
    conn.execute("ALTER TABLE pgbeat_workflow_steps DROP CONSTRAINT pgbeat_workflow_steps_delay")
    conn.execute("ALTER TABLE pgbeat_workflow_steps DROP CONSTRAINT pgbeat_workflow_steps_run_at")
    conn.execute(set_step_c(column), [value])


def released_at(conn: psycopg.Connection[Any], job_id: int) -> tuple[str, int]:
    row = conn.execute(
        "SELECT status, extract(year FROM run_at)::int FROM jobs WHERE id = %s", [job_id]
    ).fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.mark.parametrize(
    ("column", "value"),
    [("delay", "300000 years"), ("delay", "-300000 years"), ("run_at", "infinity")],
)
def test_the_database_refuses_a_step_time_the_api_refuses(
    conn: psycopg.Connection[Any], column: str, value: str
) -> None:
    two_parents(conn)
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(set_step_c(column), [value])


@pytest.mark.parametrize(
    ("column", "value", "years_from_now"),
    [("delay", "300000 years", 1000), ("delay", "-300000 years", 0), ("run_at", "infinity", None)],
)
def test_a_bad_step_time_written_before_the_constraints_is_clamped_at_release(
    conn: psycopg.Connection[Any], column: str, value: str, years_from_now: int | None
) -> None:
    """Released 1,000 years on at most, never before now, an 'infinity' at 9999-12-28."""
    jobs = two_parents(conn)
    plain = pgbeat.enqueue(conn, "noop")
    assert plain is not None
    plant(conn, column, value)
    ran = [run(conn, jobs["a"]), run(conn, jobs["b"]), run(conn, plain)]
    ended = operations.complete_jobs(conn, ran)  # one statement: no error, all three done
    assert ended.steps
    statuses = conn.execute(
        "SELECT status, count(*) FROM jobs WHERE id = ANY(%s) GROUP BY status",
        [[jobs["a"], jobs["b"], plain]],
    ).fetchall()
    assert statuses == [("done", 3)]
    status, released = released_at(conn, jobs["c"])
    now = conn.execute("SELECT extract(year FROM now())::int").fetchone()
    assert now is not None
    expected = 9999 if years_from_now is None else now[0] + years_from_now
    assert (status, released) == ("pending", expected)


def test_the_repair_pass_releases_a_bad_step_time_too(conn: psycopg.Connection[Any]) -> None:
    jobs = two_parents(conn)
    plant(conn, "delay", "300000 years")
    conn.execute(  # SQL by hand: no advance, the repair pass's to find
        "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = ANY(%s)",
        [[jobs["a"], jobs["b"]]],
    )
    assert repair_workflows(conn) == (1, 0)
    now = conn.execute("SELECT extract(year FROM now())::int").fetchone()
    assert now is not None
    assert released_at(conn, jobs["c"]) == ("pending", now[0] + 1000)
