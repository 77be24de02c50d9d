"""The worker's connections keep one generic plan per statement (worker.SESSION_SETTINGS):
a plan made while the jobs table was empty must still read the right index, never a
sequential scan or a sort of the backlog, once 140,000 jobs are there and no ANALYZE has
run. The statements whose kept plan would not are never kept (run with prepare=False)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.named_statements import NamedStatements
from pgbeat.db.named_statements import named as named_statement
from pgbeat.db.pooler import session_options
from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import claim_after
from pgbeat.db.sql.jobs import claim_heads as heads_sql
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.db.sql.jobs import meta as meta_sql
from pgbeat.db.sql.jobs import outcomes as outcome_sql
from pgbeat.job import Job
from pgbeat.worker import due_queues, operations
from pgbeat.worker.claiming import TWINS, Claimer
from pgbeat.worker.worker import SESSION_SETTINGS
from tests.helpers import sorts_backlog

LEASE = timedelta(minutes=5)

# What the worker's claim and outcome connections keep a plan of, and the index it must read.
KEPT = {
    "JOBS_CLAIM": (claim_sql, "jobs_claim_order"),
    "JOBS_CLAIM_BY_QUEUE": (claim_sql, "Index Scan using jobs_claim_queue_unkeyed"),
    "JOBS_CLAIM_SKIPPING": (claim_sql, "jobs_claim_order"),
    "JOBS_SECONDS_TO_NEXT": (claim_sql, "Index Scan using jobs_"),
    "JOBS_COMPLETE": (outcome_sql, "jobs_pkey"),
    "JOBS_RETRY": (outcome_sql, "jobs_pkey"),
    "JOBS_SNOOZE": (outcome_sql, "jobs_pkey"),
    "JOBS_FAIL": (outcome_sql, "jobs_pkey"),
    "JOBS_REAP": (outcome_sql, "jobs_running"),
    "JOBS_META": (meta_sql, "jobs_pkey"),
    "QUEUES_HELD": (queue_sql, "jobs_claim_queue_keyed"),  # its bounded probe of each held queue
    "JOBS_CLAIM_BY_QUEUE_KIND": (heads_sql, "Index Scan using jobs_claim_queue_keyed"),
    "JOBS_DUE_QUEUES": (heads_sql, "using jobs_claim_queue_unkeyed"),
    "JOBS_CLAIM_ONE_HEAD": (heads_sql, "Index Scan using jobs_claim_queue_unkeyed"),
    "JOBS_CLAIM_ONE_KEYED_HEAD": (heads_sql, "Index Scan using jobs_claim_queue_keyed"),
    "JOBS_KINDS_AHEAD": (heads_sql, "Index Scan using jobs_claim_order"),
    "JOBS_CLAIM_AFTER": (claim_after, "Index Scan using jobs_claim_order"),
    "JOBS_CLAIM_SKIPPING_AFTER": (claim_after, "Index Scan using jobs_claim_order"),
    "JOBS_CLAIM_ONE_HEAD_AFTER": (claim_after, "Index Scan using jobs_claim_queue_unkeyed"),
    "JOBS_CLAIM_ONE_KEYED_HEAD_AFTER": (claim_after, "Index Scan using jobs_claim_queue_keyed"),
}
# The claims' twins start their index scan at the position after the last claim's rows.
POSITIONED = re.compile(r"Index Cond: \(.*\(priority = \$\d+\).*ROW\(run_at, id\) > ROW\(\$")
# What they run but never keep: a plan made on an empty table reads the wrong index.
NEVER_KEPT = {
    "JOBS_FAIL_UNREADABLE": claim_sql,
    "JOBS_SECONDS_TO_NEXT_LIMITED": limited_sql,
    "JOBS_RELEASE": outcome_sql,
    "JOBS_STOP": outcome_sql,
    "JOBS_RENEW": outcome_sql,
}
# The rest of those modules: the limited claims keep their plans under QUEUES_LOCK's
# settings (tests/integration/test_queues_cli.py checks them); JOBS_STATE runs on the
# caller's connection (pgbeat.wait); LISTEN and UNLISTEN plan nothing; JOBS_WARM_ADVANCE
# runs once a connection, its plans the workflow advance's own (test_workflows.py).
ELSEWHERE = {
    "JOBS_CLAIM_LIMITED",
    "JOBS_CLAIM_LIMITED_HEAD",
    "JOBS_CLAIM_LIMITED_HEAD_AFTER",
    "JOBS_CLAIM_LIMITED_KEYS",
    "JOBS_CLAIM_FAIR",
    "JOBS_STATE",
    "JOBS_LISTEN",
    "JOBS_LISTEN_CANCEL",
    "JOBS_LISTEN_FINISHED",
    "JOBS_UNLISTEN_FINISHED",
    "JOBS_WARM_ADVANCE",
}


def _shape(statement: str) -> str:
    """A statement's text with its parameters blanked, as psycopg's ($n) or ours (%(x)s)."""
    return re.sub(r"\s+", " ", re.sub(r"\$\d+|%\(\w+\)s", "?", statement)).strip()


def _statements(module: ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    }


def test_every_statement_of_the_worker_modules_is_classified() -> None:
    """A new statement must be put in KEPT (with the index its plan reads) or NEVER_KEPT."""
    found = _statements(claim_sql) | _statements(outcome_sql) | _statements(meta_sql)
    found |= _statements(heads_sql) | _statements(limited_sql) | _statements(claim_after)
    assert found | {"QUEUES_HELD"} == set(KEPT) | set(NEVER_KEPT) | ELSEWHERE


def _run_every_statement(conn: psycopg.Connection[Any]) -> None:
    """Each statement once, through the worker's own functions where it has one."""
    conn.execute("INSERT INTO jobs (kind, payload, run_at) VALUES ('noop', '{}', '-infinity')")
    fast = Claimer(LEASE, ["noop"])
    assert fast.claim(conn, 50) == []  # JOBS_CLAIM, with QUEUES_HELD; JOBS_FAIL_UNREADABLE
    fast.seconds_to_next(conn)  # JOBS_SECONDS_TO_NEXT
    pgbeat.pause_queue(conn, "paused")
    skipping = Claimer(LEASE, ["noop"])
    assert skipping.claim(conn, 50) == []  # JOBS_CLAIM_SKIPPING: a held queue, few jobs
    by_queue = Claimer(LEASE, ["noop"], ["default"])
    assert by_queue.claim(conn, 50) == []  # JOBS_CLAIM_BY_QUEUE
    by_queue._next_due(conn, "api", 0.0)  # JOBS_SECONDS_TO_NEXT_LIMITED
    by_kind = Claimer(LEASE, ["noop"])
    assert by_kind.claim(conn, 50) == []  # reads the held queues and JOBS_KINDS_AHEAD
    by_kind._foreign_ahead = 100  # as if foreign kinds filled the head of the claim order
    assert by_kind._claim_fast(conn, 50) == []  # JOBS_DUE_QUEUES, JOBS_CLAIM_BY_QUEUE_KIND
    for keyed in (False, True):  # the hint's one head, unkeyed and keyed
        by_kind._due.heads = [due_queues.Head("default", "noop", keyed)]
        by_kind._due._walked = {"default": time.monotonic() + 60}  # walked after any change
        by_kind._due._next = by_kind._due._refresh = time.monotonic() + 60
        assert by_kind._claim_fast(conn, 50) == []  # JOBS_CLAIM_ONE_(KEYED_)HEAD
    position = {"after_priority": 0, "after_run_at": datetime.now(UTC), "after_id": 0}
    for twin in TWINS.values():  # the claims from the last claim's position
        params = {**fast._params(50), "queue": "default", "kind": "noop", **position}
        assert conn.execute(twin, params).fetchall() == []
    now = datetime.now(UTC)
    job = Job(1, "noop", {}, 1, 3, now, now, None)
    operations.complete_jobs(conn, [job])
    operations.retry_jobs(conn, [(job, "boom", timedelta(seconds=2))])
    operations.snooze_jobs(conn, [(job, timedelta(seconds=2))])
    operations.fail_jobs(conn, [(job, "boom")])
    operations.release_jobs(conn, [job])
    operations.renew_leases(conn, [job], LEASE)
    operations.reap_expired(conn)
    conn.execute(meta_sql.JOBS_META, {"ids": [1]}).fetchall()


@pytest.mark.slow  # 140,000 rows
def test_kept_plans_made_on_an_empty_table_read_the_indexes_at_scale(database_url: str) -> None:
    options = session_options(database_url, SESSION_SETTINGS)
    with psycopg.connect(database_url, autocommit=True, options=options) as conn:
        conn.prepare_threshold = 0  # prepare at once (the worker's connections: from the 5th)
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        conn.execute("ANALYZE jobs")  # empty
        _run_every_statement(conn)
        assert conn.execute("SELECT status FROM jobs").fetchall() == [("failed",)]
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at, status, locked_until, finished_at, "
            "queue, priority, limit_key) "
            "SELECT 'noop', '{}', now() - interval '1 hour', s.status, "
            "CASE WHEN s.status = 'running' THEN now() + interval '1 hour' END, "
            "CASE WHEN s.status = 'done' THEN now() END, "
            "CASE WHEN i % 3 = 0 THEN 'api' ELSE 'default' END, (i % 5)::smallint - 2, "
            "'key' || (i % 500) "
            "FROM generate_series(1, 140000) AS i, LATERAL (SELECT CASE "
            "WHEN i <= 100000 THEN 'pending' WHEN i <= 120000 THEN 'running' ELSE 'done' END "
            "AS status) AS s"
        )
        prepared = {
            _shape(text): (name, params, generic, custom)
            for name, text, params, generic, custom in conn.execute(
                "SELECT name, statement, cardinality(parameter_types), generic_plans, "
                "custom_plans FROM pg_prepared_statements"
            )
        }
        for label, (module, index) in KEPT.items():
            shape = _shape(getattr(module, label))
            assert shape in prepared, f"{label} was not prepared"
            name, params, generic, custom = prepared[shape]
            assert generic >= 1 and custom == 0, (label, generic, custom)
            arguments = f"({', '.join(['NULL'] * params)})" if params else ""
            plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN EXECUTE {name}{arguments}"))
            assert "Seq Scan on jobs" not in plan and not sorts_backlog(plan), (label, plan)
            assert index in plan, (label, plan)
            assert module is not claim_after or POSITIONED.search(plan), (label, plan)
        for label, module in NEVER_KEPT.items():
            assert _shape(getattr(module, label)) not in prepared, f"{label} was kept"


# Every claim statement, with the queue it claims in the test below (None: every queue).
CLAIMS = {
    "JOBS_CLAIM": None,
    "JOBS_CLAIM_SKIPPING": None,
    "JOBS_CLAIM_BY_QUEUE": None,
    "JOBS_CLAIM_LIMITED": "limited",
    "JOBS_CLAIM_LIMITED_HEAD": "keyed",
    "JOBS_CLAIM_LIMITED_KEYS": "keyed",
    "JOBS_CLAIM_FAIR": "fair",
}


def _claim_modules() -> dict[str, tuple[ModuleType, str | None]]:
    """CLAIMS' statements with their modules."""
    return {label: (limited_sql if q else claim_sql, q) for label, q in CLAIMS.items()}


def test_every_claim_statement_is_in_the_delayed_statistics_test() -> None:
    statements = _statements(claim_sql) | _statements(limited_sql)
    claims = {name for name in statements if name.startswith("JOBS_CLAIM")}
    assert claims == set(CLAIMS)


@pytest.mark.slow  # 40,000 rows
def test_no_claim_plan_kept_after_analyze_saw_only_delayed_jobs_sorts_the_burst(
    database_url: str,
) -> None:
    """A quiet night: ANALYZE sees every pending job delayed (in a plain queue, a limited
    one, a key-limited one and a fair one), each claim statement keeps its plan, then the
    jobs all fall due. No kept plan may sort the due backlog (issue 34): each reads the
    head of its index, whatever the statistics said."""
    options = session_options(database_url, SESSION_SETTINGS)
    with psycopg.connect(database_url, autocommit=True, options=options) as conn:
        conn.prepare_threshold = 0
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        pgbeat.configure_queue(conn, "limited", concurrency=50)
        pgbeat.configure_queue(conn, "keyed", key_concurrency=1)
        pgbeat.configure_queue(conn, "fair", fair=True)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at, queue, limit_key) SELECT 'noop', '{}',"
            " now() + interval '1 day' + i * interval '1 ms', q,"
            " CASE WHEN q IN ('keyed', 'fair') THEN 'key' || (i % 500) END"
            " FROM generate_series(1, 10000) AS i,"
            " unnest(ARRAY['default', 'limited', 'keyed', 'fair']) AS q"
        )
        conn.execute("ANALYZE jobs")
        params = {
            "limit": 50,
            "lease": LEASE,
            "kinds": ["noop"],
            "queues": None,
            "held": ["limited", "keyed", "fair"],
            "scan": 128,
            "keys": 128,
            "after": None,
            "steps": 1,
        }
        named = NamedStatements()  # the limited claims' usual way (db/named_statements.py)
        for label, queue in CLAIMS.items():  # each plan is made now, on those statistics
            with conn.transaction():
                if queue is not None:
                    conn.execute(queue_sql.QUEUES_LOCK, {"queue": queue})
                statement = getattr(limited_sql if queue else claim_sql, label)
                found = conn.execute(statement, {**params, "queue": queue}, prepare=True)
                assert all(row[0] is None for row in found.fetchall()), label  # none due
            if queue is not None:
                lock = (queue_sql.QUEUES_LOCK, {"queue": queue})
                found = named.run(
                    conn, conn.cursor(), [lock, (statement, {**params, "queue": queue})]
                )
                assert all(row[0] is None for row in found.fetchall()), label
        position = {"after_priority": 0, "after_run_at": datetime.now(UTC), "after_id": 0}
        for twin in TWINS.values():  # the claims from a position, likewise
            twin_params = {**params, "queue": "default", "kind": "noop", **position}
            assert conn.execute(twin, twin_params, prepare=True).fetchall() == []
        keyed_twin = claim_after.JOBS_CLAIM_LIMITED_HEAD_AFTER  # and the keyed head's
        keyed_params = {**params, "queue": "keyed", **position}
        with conn.transaction():
            conn.execute(queue_sql.QUEUES_LOCK, {"queue": "keyed"})
            found = conn.execute(keyed_twin, keyed_params, prepare=True)
            assert all(row[0] is None for row in found.fetchall())
        lock = (queue_sql.QUEUES_LOCK, {"queue": "keyed"})
        found = named.run(conn, conn.cursor(), [lock, (keyed_twin, keyed_params)])
        assert all(row[0] is None for row in found.fetchall())
        conn.execute("UPDATE jobs SET run_at = run_at - interval '2 days'")  # the burst
        prepared = {
            _shape(text): (name, params)
            for name, text, params in conn.execute(
                "SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements"
            )
        }
        twins = {name: (claim_after, None) for name in _statements(claim_after)}
        for label, (module, _) in {**_claim_modules(), **twins}.items():
            statement = getattr(module, label)
            name, count = prepared[_shape(statement)]
            arguments = ", ".join(["NULL"] * count)
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE {name}({arguments})"))
            plans = [plan]
            if module is limited_sql or "budget" in statement:  # also kept by name
                one = named_statement(statement)
                arguments = ", ".join(["NULL"] * len(one.parameters))
                explain = conn.execute(f"EXPLAIN EXECUTE {one.name}({arguments})")
                plans.append("\n".join(r[0] for r in explain))
            for plan in plans:
                assert not sorts_backlog(plan), (label, plan)
                assert re.search(r"Index (Only )?Scan using jobs_claim", plan), (label, plan)
                # keys matched row by row (a nested loop of the head with its keys' budgets)
                assert not re.search(r"Join Filter: \(.*limit_key", plan), (label, plan)
