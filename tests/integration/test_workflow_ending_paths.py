"""Every statement of pgbeat's that can end a job advances the workflow of a step it ended,
in the same statement (migration 0033: no row trigger on jobs any more), and nothing else
does: a plain job's claim and completion pass no trigger at all.

Each case ends the parent ``a`` of ``b`` (cancelled with a failed parent) and ``c``
(``on_parent_failure="run"``) through one path, then reads the children without running
anything else (no repair pass, no worker).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.sql import workflows as workflow_sql
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.job import Job
from pgbeat.jobs.workflows import repair_workflows
from pgbeat.worker import operations

HELD = "9999-12-29 00:00:00+00"


def workflow(conn: psycopg.Connection[Any]) -> dict[str, int]:
    flow = pgbeat.Workflow()
    a = flow.add("noop", name="a", max_attempts=1)
    flow.add("noop", name="b", after=a)
    flow.add("noop", name="c", after=a, on_parent_failure="run")
    return pgbeat.enqueue_workflow(conn, flow).jobs


def run(conn: psycopg.Connection[Any], job_id: int, *, cancel_asked: bool = False) -> Job:
    """The step as a worker's claim leaves it: running, attempt 1, under a lease."""
    conn.execute(
        "UPDATE jobs SET status = 'running', attempts = 1, started_at = now(),"
        " locked_until = now() + interval '1 minute',"
        " cancel_requested_at = CASE WHEN %s THEN now() END WHERE id = %s",
        [cancel_asked, job_id],
    )
    now = datetime.now(UTC)
    return Job(job_id, "noop", None, 1, 1, now, now, None)


def children(conn: psycopg.Connection[Any], jobs: dict[str, int]) -> dict[str, str]:
    """b's and c's state: held, due (released), or their final status."""
    rows = conn.execute(
        "SELECT id, CASE WHEN status = 'pending' AND run_at = %s THEN 'held'"
        " WHEN status = 'pending' THEN 'due' ELSE status END FROM jobs WHERE id = ANY(%s)",
        [HELD, [jobs["b"], jobs["c"]]],
    ).fetchall()
    by_id = dict(rows)
    return {"b": by_id[jobs["b"]], "c": by_id[jobs["c"]]}


def status(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute("SELECT status FROM jobs WHERE id = %s", [job_id]).fetchone()
    assert row is not None
    return str(row[0])


DONE = {"b": "due", "c": "due"}
FAILED = {"b": "cancelled", "c": "due"}  # c runs anyway


def complete(conn: psycopg.Connection[Any], a: int) -> str:
    ended = operations.complete_jobs(conn, [run(conn, a)], ['"ok"'])
    assert ended.steps  # the statement says it ended a step: the worker claims again
    return "done"


def fail(conn: psycopg.Connection[Any], a: int) -> str:
    assert operations.fail_jobs(conn, [(run(conn, a), "boom")]).steps
    return "failed"


def retry_asked_to_stop(conn: psycopg.Connection[Any], a: int) -> str:
    job = run(conn, a, cancel_asked=True)
    assert operations.retry_jobs(conn, [(job, "boom", timedelta(seconds=5))]) == {a}
    return "cancelled"


def snooze_asked_to_stop(conn: psycopg.Connection[Any], a: int) -> str:
    job = run(conn, a, cancel_asked=True)
    assert operations.snooze_jobs(conn, [(job, timedelta(seconds=5))]) == {a}
    return "cancelled"


def stop_asked(conn: psycopg.Connection[Any], a: int) -> str:
    assert operations.stop_jobs(conn, [(run(conn, a, cancel_asked=True), "stopped")]) == {a}
    return "cancelled"


def release_asked_to_stop(conn: psycopg.Connection[Any], a: int) -> str:
    assert operations.release_jobs(conn, [run(conn, a, cancel_asked=True)]) == {a}
    return "cancelled"


def reaped_out_of_attempts(conn: psycopg.Connection[Any], a: int) -> str:
    run(conn, a)
    conn.execute("UPDATE jobs SET locked_until = now() - interval '1 s' WHERE id = %s", [a])
    assert operations.reap_expired(conn) == [(a, "noop", "failed")]
    return "failed"


def unreadable(conn: psycopg.Connection[Any], a: int) -> str:
    run(conn, a)
    params = {"ids": [a], "errors": ["a date outside years 1-9999"]}
    assert conn.execute(claim_sql.JOBS_FAIL_UNREADABLE, params, prepare=False).fetchall() == [(a,)]
    return "failed"


def cancel_job(conn: psycopg.Connection[Any], a: int) -> str:
    assert pgbeat.cancel_job(conn, a)
    return "cancelled"


PATHS: dict[str, Callable[[psycopg.Connection[Any], int], str]] = {
    "complete": complete,
    "fail": fail,
    "retry asked to stop": retry_asked_to_stop,
    "snooze asked to stop": snooze_asked_to_stop,
    "stop": stop_asked,
    "release asked to stop": release_asked_to_stop,
    "reaper": reaped_out_of_attempts,
    "unreadable claim": unreadable,
    "cancel_job": cancel_job,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_each_path_that_ends_a_step_advances_its_workflow(
    conn: psycopg.Connection[Any], path: str
) -> None:
    jobs = workflow(conn)
    assert children(conn, jobs) == {"b": "held", "c": "held"}
    ended = PATHS[path](conn, jobs["a"])
    assert status(conn, jobs["a"]) == ended
    assert children(conn, jobs) == (DONE if ended == "done" else FAILED)


def test_a_cascade_is_advanced_round_by_round_in_one_statement(
    conn: psycopg.Connection[Any],
) -> None:
    flow = pgbeat.Workflow()
    step = flow.add("noop", name="s0")
    for i in range(1, 6):
        step = flow.add("noop", name=f"s{i}", after=step)
    jobs = pgbeat.enqueue_workflow(conn, flow).jobs
    assert pgbeat.cancel_job(conn, jobs["s0"])
    rows = conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
    assert rows == [("cancelled", 6)]


def test_the_repair_pass_cancels_a_chain_at_once(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    a = flow.add("noop", name="a")
    flow.add("noop", name="c", after=flow.add("noop", name="b", after=a))
    jobs = pgbeat.enqueue_workflow(conn, flow).jobs
    by_hand = "UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = %s"
    conn.execute(by_hand, [jobs["a"]])
    assert status(conn, jobs["b"]) == "pending"  # SQL by hand: no advance
    assert repair_workflows(conn) == (0, 1)  # b cancelled by the repair...
    assert status(conn, jobs["c"]) == "cancelled"  # ...and c by its advance, same statement


def test_cancel_workflow_advances_what_it_cancels(conn: psycopg.Connection[Any]) -> None:
    flow = pgbeat.Workflow()
    a = flow.add("noop", name="a")
    flow.add("noop", name="b", after=a, on_parent_failure="run")
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    conn.execute("UPDATE jobs SET status = 'running' WHERE id = %s", [enqueued.jobs["a"]])
    rows = conn.execute(
        workflow_sql.WORKFLOW_JOBS_CANCEL, {"id": enqueued.id, "reason": "operator"}
    ).fetchall()
    assert sorted(r[1] for r in rows) == ["cancelled", "running"]  # b cancelled, a told
    assert status(conn, enqueued.jobs["b"]) == "cancelled"


def test_jobs_has_no_row_trigger_on_update(conn: psycopg.Connection[Any]) -> None:
    """A row trigger on UPDATE makes PostgreSQL fetch the old row of every row a claim or
    a completion updates, whatever its WHEN clause (2.5-8 % of a plain drain)."""
    rows = conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal"
        " AND tgtype & 1 = 1 AND tgtype & 16 = 16"  # FOR EACH ROW, UPDATE
    ).fetchall()
    assert rows == []


def _statement_constants() -> dict[str, str]:
    import importlib
    import pkgutil

    import pgbeat.db.sql as package

    found: dict[str, str] = {}
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and isinstance(value, str):
                found[f"{module.name}.{name}"] = value
    return found


ENDS_A_JOB = re.compile(r"UPDATE jobs(?: AS j)?\s+SET status = (CASE.*?END|'\w+')", re.S)


def test_every_statement_that_can_end_a_job_advances_workflows() -> None:
    """A new statement that ends jobs without the advance would strand workflows until the
    repair pass: every one that sets an ended status calls pgbeat_workflow_advance."""
    statements = _statement_constants()
    ending = {
        name
        for name, text in statements.items()
        if (match := ENDS_A_JOB.search(text))
        and re.search(r"'(done|failed|cancelled)'", match.group(1))
    }
    assert len(ending) >= 12  # the scan found them: outcomes, reaper, cancels, repair
    assert sorted(n for n in ending if "pgbeat_workflow_advance(" not in statements[n]) == []
