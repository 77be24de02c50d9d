"""`pgbeat queues list|set|pause|resume`, `pgbeat enqueue --queue --priority --limit-key`, the
status line for kinds no worker claims, and the claim's plan over a large backlog."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from tests.helpers import run_cli_here, sorts_backlog
from tests.integration.ui_support import dashboard


@pytest.mark.slow  # runs the CLI in a subprocess
def test_set_list_pause_resume(database_url: str, conn: psycopg.Connection[Any]) -> None:
    result = run_cli_here(
        ["queues", "set", "api", "--concurrency", "5", "--key-rate", "10/1s"], database_url
    )
    assert result.returncode == 0, result.stderr
    assert "concurrency=5" in result.stdout and "key_rate=10/1s" in result.stdout
    assert run_cli_here(["queues", "set", "api", "--rate", "100/10s"], database_url).returncode == 0
    assert run_cli_here(["queues", "pause", "api"], database_url).returncode == 0
    pgbeat.enqueue(conn, "noop", queue="api")
    pgbeat.enqueue(conn, "noop", queue="mail")
    listed = run_cli_here(["queues", "list", "--json"], database_url)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["api"] == {
        "name": "api",
        "paused": True,
        "concurrency": 5,
        "key_concurrency": None,
        "rate": "100/10s",
        "key_rate": "10/1s",
        "fair": False,
        "pending": 1,
        "running": 0,
    }
    assert rows["mail"]["paused"] is False and rows["mail"]["pending"] == 1
    assert run_cli_here(["queues", "resume", "api"], database_url).returncode == 0
    assert (
        run_cli_here(["queues", "set", "api", "--concurrency", "none"], database_url).returncode
        == 0
    )
    row = conn.execute("SELECT paused, concurrency, rate_count FROM pgbeat_queues").fetchone()
    assert row == (False, None, 100)
    table = run_cli_here(["queues", "list"], database_url)
    assert table.returncode == 0 and "api" in table.stdout and "100/10s" in table.stdout


@pytest.mark.slow  # runs the CLI in a subprocess
@pytest.mark.parametrize(
    "args",
    [
        ["queues", "set", "api", "--concurrency", "-1"],
        ["queues", "set", "api", "--rate", "5/0s"],
        ["queues", "set", "api", "--rate", "banana"],
        ["queues", "set", "api", "--key-concurrency", "0"],
        ["queues", "set", "api"],
        ["queues", "set", "x" * 201, "--concurrency", "1"],
        ["queues", "pause", ""],
        ["enqueue", "noop", "--priority", "40000"],
        ["enqueue", "noop", "--priority", "high"],
        ["enqueue", "noop", "--queue", "q" * 201],
        ["enqueue", "noop", "--limit-key", ""],
        ["worker", "tests.apps.jobs_app:registry", "--queues", ","],
    ],
)
def test_bad_values_exit_1_with_one_line(
    database_url: str, conn: psycopg.Connection[Any], args: list[str]
) -> None:
    result = run_cli_here(args, database_url)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert conn.execute("SELECT count(*) FROM pgbeat_queues").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


@pytest.mark.slow  # runs the CLI in a subprocess
def test_enqueue_flags(database_url: str, conn: psycopg.Connection[Any]) -> None:
    result = run_cli_here(
        ["enqueue", "noop", "--queue", "mail", "--priority", "-3", "--limit-key", "c:1"],
        database_url,
    )
    assert result.returncode == 0, result.stderr
    row = conn.execute("SELECT queue, priority, limit_key FROM jobs").fetchone()
    assert row == ("mail", -3, "c:1")


def _new_kind_no_worker_takes(conn: psycopg.Connection[Any]) -> None:
    """A pending job of new_kind in queue mail, which the one live worker does not take."""
    pgbeat.enqueue(conn, "new_kind", queue="mail")
    pgbeat.enqueue(conn, "old_kind")
    details = json.dumps({"kinds": ["old_kind", "new_kind"], "queues": ["default"]})
    conn.execute(
        "INSERT INTO pgbeat_processes (id, role, host, pid, version, details) "
        "VALUES (gen_random_uuid(), 'worker', 'h', 1, 'v', %s)",
        (details,),
    )


@pytest.mark.slow  # runs the CLI in a subprocess
def test_status_names_kinds_no_live_worker_claims(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    _new_kind_no_worker_takes(conn)
    result = run_cli_here(["status", "--json"], database_url)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["unserved_kinds"] == [{"kind": "new_kind", "queue": "mail", "pending": 1}]
    assert any("new_kind" in warning for warning in found["warnings"])


def _plan(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> str:
    rows = conn.execute(f"EXPLAIN {statement}", params).fetchall()
    return "\n".join(row[0] for row in rows)


PARAMS = {"limit": 50, "lease": "5 minutes", "kinds": None, "queues": None, "held": ["api"]}


def test_the_claim_reads_the_head_of_an_index_never_sorts_the_backlog(
    conn: psycopg.Connection[Any],
) -> None:
    from pgbeat.db.sql.jobs import claim as claim_sql
    from pgbeat.db.sql.jobs import claim_limited as limited_sql

    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, queue, priority, limit_key) "
        "SELECT 'noop', '{}', now() - interval '1 hour', "
        "CASE WHEN i % 3 = 0 THEN 'api' ELSE 'default' END, (i % 5)::smallint - 2, "
        "'key' || (i % 500) FROM generate_series(1, 20000) AS i"
    )
    conn.execute("ANALYZE jobs")
    fast = _plan(conn, claim_sql.JOBS_CLAIM, PARAMS)
    assert "jobs_claim_order" in fast and "Sort" not in fast, fast
    by_queue = _plan(conn, claim_sql.JOBS_CLAIM_BY_QUEUE, PARAMS)
    assert "jobs_claim_queue" in by_queue and not sorts_backlog(by_queue), by_queue
    pgbeat.configure_queue(conn, "api", concurrency=10, key_concurrency=1)
    limited_params = {**PARAMS, "queue": "api", "scan": 256, "keys": 256, "after": None, "steps": 1}
    limited = _plan(conn, limited_sql.JOBS_CLAIM_LIMITED, limited_params)
    assert "jobs_claim_queue_unkeyed" in limited and not sorts_backlog(limited), limited
    head = _plan(conn, limited_sql.JOBS_CLAIM_LIMITED_HEAD, limited_params)
    assert "jobs_claim_queue" in head and not sorts_backlog(head), head
    keyed = _plan(conn, limited_sql.JOBS_CLAIM_LIMITED_KEYS, limited_params)
    assert "jobs_claim_key" in keyed and not sorts_backlog(keyed), keyed
    pgbeat.configure_queue(conn, "api", fair=True)
    fair = _plan(conn, limited_sql.JOBS_CLAIM_FAIR, {**limited_params, "keys": 256})
    assert "jobs_claim_key" in fair and "jobs_claim_queue_unkeyed" in fair, fair
    assert not sorts_backlog(fair), fair


@pytest.mark.parametrize("kept_by", ["name", "psycopg"])
@pytest.mark.parametrize(
    "name",
    [
        "JOBS_CLAIM_LIMITED",
        "JOBS_CLAIM_LIMITED_HEAD",
        "JOBS_CLAIM_LIMITED_HEAD_AFTER",
        "JOBS_CLAIM_LIMITED_KEYS",
        "JOBS_CLAIM_FAIR",
    ],
)
def test_a_limited_claims_kept_plan_made_on_an_empty_table_reads_the_index_at_scale(
    conn: psycopg.Connection[Any], name: str, kept_by: str
) -> None:
    """The limited claims keep one generic plan per connection (QUEUES_LOCK's settings),
    as a named statement (db/named_statements.py) or, run in a pipeline, as psycopg's:
    made while the tables were empty, it must still read the claim indexes, not sort the
    backlog, once 100,000 jobs are pending and no ANALYZE has run since, and prune a
    rate's old starts from the window's cutoff (5,000 starts)."""
    from pgbeat.db.named_statements import NamedStatements
    from pgbeat.db.sql import queues as queue_sql
    from pgbeat.db.sql.jobs import claim_after
    from pgbeat.db.sql.jobs import claim_limited as limited_sql

    statement = getattr(claim_after if name.endswith("_AFTER") else limited_sql, name)
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    conn.execute("ANALYZE jobs, pgbeat_queue_starts")  # empty
    keyed = name != "JOBS_CLAIM_LIMITED"
    pgbeat.configure_queue(
        conn,
        "api",
        concurrency=10,
        key_concurrency=1 if keyed else None,
        fair=name.endswith("FAIR"),
    )
    params = {**PARAMS, "queue": "api", "scan": 256, "keys": 256, "after": None, "steps": 1}
    params |= {"after_priority": 0, "after_run_at": "2000-01-01T00:00:00Z", "after_id": 0}
    if kept_by == "name":  # the plan is made now
        lock = (queue_sql.QUEUES_LOCK, {"queue": "api"})
        NamedStatements().run(conn, conn.cursor(), [lock, (statement, params)]).fetchall()
    else:
        with conn.transaction():
            conn.execute(queue_sql.QUEUES_LOCK, {"queue": "api"})
            conn.execute(statement, params, prepare=True).fetchall()
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, queue, limit_key) "
        "SELECT 'noop', '{}', now() - interval '1 hour', 'api', 'key' || (i % 500) "
        "FROM generate_series(1, 100000) AS i"
    )
    conn.execute(  # a rate's window of starts
        "INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at) "
        "SELECT 'api', 'key' || i, now() - i * interval '1 ms' FROM generate_series(1, 5000) AS i"
    )
    prepared = conn.execute(
        "SELECT name, parameter_types::text[] FROM pg_prepared_statements WHERE statement LIKE %s",
        ("%budget AS MATERIALIZED%",),
    ).fetchall()
    assert len(prepared) == 1, prepared
    order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
    name_of_plan, types = prepared[0]
    assert len(types) == len(order), (types, order)
    arguments = ", ".join(f"%s::{kind}" for kind in types)
    with conn.transaction():
        conn.execute(queue_sql.QUEUES_LOCK, {"queue": "api"})
        explain = psycopg.ClientCursor(conn)  # the values as literals: EXPLAIN takes no $n
        explain.execute(
            f"EXPLAIN EXECUTE {name_of_plan}({arguments})",
            [params[key] for key in order],
        )
        plan = "\n".join(row[0] for row in explain.fetchall())
        raise psycopg.Rollback()
    assert "Seq Scan on jobs" not in plan and not sorts_backlog(plan), plan
    index = "jobs_claim_key" if name.endswith(("KEYS", "FAIR")) else "jobs_claim_queue_keyed"
    assert index in plan, plan
    # the old starts are read from the window's cutoff on, not all of the queue's
    # (an index or bitmap scan, as the statistics chose; a join filter read them all)
    pruning = r"pgbeat_queue_starts_window.*\n\s+Index Cond: \(.*started_at <="
    assert re.search(pruning, plan), plan
    if name.endswith(("HEAD", "_AFTER", "KEYS", "FAIR")):  # a key's running jobs by key
        assert re.search(r"Scan (using|on) jobs_running_key", plan), plan
    if name.endswith("_AFTER"):  # the index scan starts at the position
        assert re.search(r"Index Cond: \(.*ROW\(run_at, id\) > ROW\(", plan), plan


def test_the_dashboard_names_the_same_kinds(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The Processes page lists what `pgbeat status` warns of (flow.unserved_kinds)."""
    _new_kind_no_worker_takes(conn)
    with dashboard(database_url) as ui:
        page = httpx.get(f"{ui.url}/processes", timeout=10)
    assert page.status_code == 200
    section = page.text.split('id="unserved-h"', 1)[1].split("</section>", 1)[0]
    assert "new_kind</a> in queue mail: 1 pending" in section
    assert "old_kind" not in section


def test_an_idle_worker_never_walks_a_paused_queues_backlog(
    conn: psycopg.Connection[Any],
) -> None:
    """JOBS_SECONDS_TO_NEXT after an empty fast claim: the next delayed job of the queues it
    takes, read from now() on, not past the 5,000 due jobs a paused queue holds."""
    from pgbeat.db.sql.jobs import claim as claim_sql
    from pgbeat.worker import operations

    pgbeat.pause_queue(conn, "reports")
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, queue) "
        "SELECT 'noop', '{}', now() - interval '1 hour', 'reports' FROM generate_series(1, 5000)"
    )
    pgbeat.enqueue(conn, "noop", delay=timedelta(seconds=30))
    conn.execute("ANALYZE jobs")
    seconds = operations.seconds_to_next_job(conn, ["noop"])
    assert seconds is not None and 25 < seconds <= 30
    params = {**PARAMS, "kinds": ["noop"], "held": ["reports"]}
    plan = "\n".join(
        str(row[0])
        for row in conn.execute(
            f"EXPLAIN (ANALYZE, FORMAT TEXT) {claim_sql.JOBS_SECONDS_TO_NEXT}", params
        )
    )
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)]
    assert sum(removed) < 100, plan
