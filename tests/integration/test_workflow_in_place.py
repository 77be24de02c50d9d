"""A large fan-out's children claimed where they are held (migration 0032): the parent's end
writes one pgbeat_workflow_ready row instead of a new version of each child; claims that
came up short take its children a window at a time, release the ones their worker may not
run, and a row no claim moved on for a while is released whole. Semantics are a fan-out's
as ever: every child once, after its parent ended done, the summary after every child."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgbeat
from pgbeat.db.sql.jobs import claim_ready as ready_sql
from pgbeat.jobs.workflows import repair_workflows
from pgbeat.testing import drain
from tests.helpers import end_jobs, wait_for

WIDTH = 1200  # children of one parent: over the 1,000 that are claimed in place
HELD = "9999-12-29 00:00:00+00"


def fan_out(width: int = WIDTH, **child: Any) -> pgbeat.Workflow:
    """root -> ``width`` children -> summary; ``child``: fields of every child."""
    flow = pgbeat.Workflow("reports")
    root = flow.add("step", {"name": "root"}, name="root")
    kids = [flow.add("step", {"name": f"c{i}"}, after=root, **child) for i in range(width)]
    flow.add("step", {"name": "summary"}, after=kids, name="summary")
    return flow


def counting_registry(ran: list[str]) -> pgbeat.Registry:
    registry = pgbeat.Registry()
    lock = threading.Lock()

    @registry.handler("step")
    def step(payload: dict[str, Any]) -> None:
        with lock:
            ran.append(payload["name"])

    return registry


def end_root(conn: psycopg.Connection[Any], enqueued: pgbeat.EnqueuedWorkflow) -> None:
    """The root ends done as a worker's outcome would end it (the advance runs)."""
    root = enqueued.jobs["root"]
    conn.execute("UPDATE jobs SET status = 'running', attempts = 1 WHERE id = %s", [root])
    end_jobs(conn, [root], "done")


def children_by_state(conn: psycopg.Connection[Any], workflow_id: int) -> dict[str, int]:
    rows = conn.execute(
        "SELECT CASE WHEN j.status = 'pending' AND j.run_at = %s THEN 'held'"
        "            WHEN j.status = 'pending' AND j.run_at <= now() THEN 'due'"
        "            ELSE j.status END, count(*)"
        " FROM pgbeat_workflow_steps AS s JOIN jobs AS j ON j.id = s.job_id"
        " WHERE s.workflow_id = %s AND j.payload->>'name' LIKE 'c%%' GROUP BY 1",
        [HELD, workflow_id],
    ).fetchall()
    return {state: n for state, n in rows}


def ready_rows(conn: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in conn.execute("SELECT parent_id FROM pgbeat_workflow_ready").fetchall()]


def test_the_parents_end_writes_one_row_and_leaves_its_children_held(
    conn: psycopg.Connection[Any],
) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    end_root(conn, enqueued)
    assert ready_rows(conn) == [enqueued.jobs["root"]]
    assert children_by_state(conn, enqueued.id) == {"held": WIDTH}


def test_a_smaller_fan_out_is_released_as_before(conn: psycopg.Connection[Any]) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, fan_out(999))
    end_root(conn, enqueued)
    assert ready_rows(conn) == []
    assert children_by_state(conn, enqueued.id) == {"due": 999}


def test_a_failed_parent_cancels_its_large_fan_out(conn: psycopg.Connection[Any]) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    root = enqueued.jobs["root"]
    conn.execute("UPDATE jobs SET status = 'running', attempts = 1 WHERE id = %s", [root])
    end_jobs(conn, [root], "failed")
    assert ready_rows(conn) == []
    assert children_by_state(conn, enqueued.id) == {"cancelled": WIDTH}


@pytest.mark.parametrize("listen", [True, False], ids=["listening", "polling"])
def test_a_worker_runs_every_child_once_after_the_parent_and_the_summary_last(
    conn: psycopg.Connection[Any], run_worker: Any, listen: bool
) -> None:
    """With LISTEN the parent's end is announced; without it (a pooler) the worker finds the
    ready row at its next read of the held queues."""
    ran: list[str] = []
    run_worker(
        counting_registry(ran),
        concurrency=50,
        heartbeat=False,
        listen=listen,
        poll_interval=timedelta(milliseconds=100),
    )
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    wait_for(lambda: "summary" in ran, timeout=60, message="the summary ran")
    assert sorted(ran) == sorted(["root", "summary", *(f"c{i}" for i in range(WIDTH))])
    assert ran[0] == "root" and ran[-1] == "summary"
    assert ready_rows(conn) == []
    # each child started after the root ended; its run_at is the root's end, so the wait
    # for its parent is not counted as queue delay (started_at - run_at)
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE c.started_at < r.finished_at),"
        "       count(*) FILTER (WHERE c.run_at <> r.finished_at),"
        "       count(*) FILTER (WHERE c.attempts <> 1 OR c.status <> 'done')"
        " FROM pgbeat_workflow_steps AS s JOIN jobs AS c ON c.id = s.job_id,"
        "      jobs AS r WHERE r.id = %s AND s.workflow_id = %s AND c.payload->>'name' LIKE 'c%%'",
        [enqueued.jobs["root"], enqueued.id],
    ).fetchone()
    assert row == (0, 0, 0)
    summary = conn.execute(
        "SELECT s.started_at >= (SELECT max(finished_at) FROM jobs WHERE workflow_id = %s"
        "                        AND id <> s.id) FROM jobs AS s WHERE s.id = %s",
        [enqueued.id, enqueued.jobs["summary"]],
    ).fetchone()
    assert summary == (True,)


def test_children_the_claiming_worker_may_not_run_are_released_into_their_queues(
    conn: psycopg.Connection[Any],
) -> None:
    """A window's children of another kind, of a queue the worker does not take, or of a
    paused queue: released (due since the parent's end), never left held."""
    pgbeat.pause_queue(conn, "paused")
    flow = pgbeat.Workflow()
    root = flow.add("step", {"name": "root"}, name="root")
    for i in range(WIDTH):
        fields: dict[str, Any] = [{}, {"queue": "paused"}, {"queue": "elsewhere"}][i % 3]
        flow.add("step" if i % 4 else "other", {"name": f"c{i}"}, after=root, **fields)
    enqueued = pgbeat.enqueue_workflow(conn, flow)
    end_root(conn, enqueued)
    params = {
        "limit": 100,
        "lease": timedelta(minutes=1),
        "kinds": ["step"],
        "queues": ["default", "paused"],
    }
    claimed = 0
    while True:
        cursor = conn.execute(ready_sql.JOBS_CLAIM_READY, params)
        rows = cursor.fetchall()
        names = [c.name for c in cursor.description or ()]
        claimed += sum(1 for row in rows if row[0] is not None)
        if not rows[0][names.index("more")]:
            break
    mine = sum(1 for i in range(WIDTH) if i % 4 and i % 3 == 0)
    assert claimed == mine
    rows = conn.execute(
        "SELECT j.kind, j.queue, j.status, j.run_at = r.finished_at, count(*)"
        " FROM jobs AS j, jobs AS r WHERE r.id = %s AND j.workflow_id = %s AND j.id <> r.id"
        " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3",
        [enqueued.jobs["root"], enqueued.id],
    ).fetchall()
    for kind, queue, status, since_the_end, _ in rows:
        running = kind == "step" and queue == "default"
        assert (status, since_the_end) == ("running" if running else "pending", True), rows
    assert ready_rows(conn) == []


def test_claims_at_once_take_each_child_once(database_url: str, conn: Any) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, fan_out(3000))
    end_root(conn, enqueued)
    taken: list[list[int]] = [[], [], [], []]
    barrier = threading.Barrier(len(taken))

    def claim(into: list[int]) -> None:
        params = {"limit": 37, "lease": timedelta(minutes=1), "kinds": None, "queues": None}
        with psycopg.connect(database_url, autocommit=True) as own:
            barrier.wait(10)
            while True:
                rows = own.execute(ready_sql.JOBS_CLAIM_READY, params).fetchall()
                into.extend(row[0] for row in rows if row[0] is not None)
                if not any(row[0] is not None for row in rows) and not ready_rows(own):
                    return

    threads = [threading.Thread(target=claim, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    every = [job_id for into in taken for job_id in into]
    assert len(every) == len(set(every)) == 3000
    assert children_by_state(conn, enqueued.id) == {"running": 3000}


def test_a_ready_row_no_claim_moved_on_is_released_whole(conn: psycopg.Connection[Any]) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    end_root(conn, enqueued)
    stale = {"stale": timedelta(seconds=1)}
    assert conn.execute(ready_sql.READY_RELEASE_STALE, stale).fetchone() == (0, True)
    assert children_by_state(conn, enqueued.id) == {"held": WIDTH}
    conn.execute("UPDATE pgbeat_workflow_ready SET touched = now() - interval '2 seconds'")
    assert conn.execute(ready_sql.READY_RELEASE_STALE, stale).fetchone() == (WIDTH, False)
    assert children_by_state(conn, enqueued.id) == {"due": WIDTH}
    assert ready_rows(conn) == []


def test_busy_workers_release_what_they_cannot_take_in_time(
    conn: psycopg.Connection[Any], run_worker: Any
) -> None:
    """A worker whose claims of due jobs stay full (a backlog of 4 s for its 5 slots) never
    takes the children in place; its read of the held queues releases them once the ready
    row has not moved on for a second, into the claim order behind that backlog."""
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("busy", {}) for _ in range(800)])
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    end_root(conn, enqueued)
    registry = pgbeat.Registry()
    registry.handler("busy")(lambda payload: time.sleep(0.025))
    registry.handler("step")(lambda payload: None)
    run_worker(registry, concurrency=5, heartbeat=False)
    wait_for(lambda: not ready_rows(conn), timeout=20, message="the ready row gone")
    backlog = conn.execute("SELECT count(*) FROM jobs WHERE kind = 'busy' AND status = 'pending'")
    assert backlog.fetchone() != (0,)  # the claims were still full: no claim took a child
    assert children_by_state(conn, enqueued.id) == {"due": WIDTH}


def test_the_repair_pass_leaves_them_to_the_claims(conn: psycopg.Connection[Any]) -> None:
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    end_root(conn, enqueued)
    assert repair_workflows(conn) == (0, 0)
    assert children_by_state(conn, enqueued.id) == {"held": WIDTH}


@pytest.mark.slow  # 1,202 jobs one by one: 5-20 s
def test_testing_drain_runs_a_large_fan_out(conn: psycopg.Connection[Any]) -> None:
    ran: list[str] = []
    pgbeat.enqueue_workflow(conn, fan_out())
    assert drain(conn, counting_registry(ran), schedules=False) == {"done": WIDTH + 2}
    assert len(ran) == WIDTH + 2 and ran[0] == "root" and ran[-1] == "summary"
    assert ready_rows(conn) == []


@pytest.mark.parametrize("step", [1, 7])
def test_each_window_is_claimed_once_whether_its_ids_are_close_or_spread(
    conn: psycopg.Connection[Any], step: int
) -> None:
    """A window's children are read by a range of ids when they lie within 4 windows' span
    (one INSERT made them, usually in a row), else one by one (other sessions' inserts
    interleaved: here every 7th id)."""
    name = conn.execute("SELECT pg_get_serial_sequence('jobs', 'id')").fetchone()
    assert name is not None
    conn.execute(sql.SQL("ALTER SEQUENCE {} INCREMENT BY {}").format(
        sql.SQL(name[0]), sql.Literal(step)))  # fmt: skip
    enqueued = pgbeat.enqueue_workflow(conn, fan_out())
    end_root(conn, enqueued)
    params = {"limit": 100, "lease": timedelta(minutes=1), "kinds": None, "queues": None}
    taken: list[int] = []
    while True:
        rows = conn.execute(ready_sql.JOBS_CLAIM_READY, params).fetchall()
        taken += [row[0] for row in rows if row[0] is not None]
        if not rows[0][-1]:  # more
            break
    assert len(taken) == len(set(taken)) == WIDTH
    assert children_by_state(conn, enqueued.id) == {"running": WIDTH}
