"""Named statements (db/named_statements.py): prepared once per connection, run together in
one simple query as one implicit transaction, their values quoted by the driver, prepared
again when someone deallocated them; and the limited claims that run on them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

import pgbeat
from pgbeat.db.literals import names_array
from pgbeat.db.named_statements import NamedStatements, named
from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.worker.locked_claim import claim_locked

ECHO = """
SELECT %(queue)s AS queue, %(after)s AS after, %(kinds)s AS kinds, %(lease)s AS lease,
       %(limit)s AS "limit", %(keys)s AS keys, 100 %% 7 AS percent"""
XID = "SELECT pg_current_xact_id()::text AS xid WHERE %(queue)s IS NOT NULL"
FAILS = "SELECT 1 / %(limit)s AS never"


def _prepared(conn: psycopg.Connection[Any]) -> dict[str, str]:
    rows = conn.execute("SELECT name, statement FROM pg_prepared_statements").fetchall()
    return {name: statement for name, statement in rows if name.startswith("pgbeat_")}


def test_a_statement_is_prepared_once_per_connection_and_again_on_another(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    statements = NamedStatements()
    for _ in range(3):
        cursor = statements.run(conn, conn.cursor(), [(XID, {"queue": "q"})])
        assert len(cursor.fetchall()) == 1
    assert list(_prepared(conn)) == [named(XID).name]
    with psycopg.connect(database_url, autocommit=True) as other:
        cursor = statements.run(other, other.cursor(), [(XID, {"queue": "q"})])
        assert len(cursor.fetchall()) == 1
        assert list(_prepared(other)) == [named(XID).name]
    # a name is its statement's: two instances on one session share what they prepared
    assert NamedStatements().run(conn, conn.cursor(), [(XID, {"queue": "q"})]).fetchall()


@pytest.mark.parametrize(
    "queue",
    ["plain", "it's", "back\\slash", "E'\\x41'", "ünïcødé ✓", "%(queue)s", "$1", "a'); DROP--"],
)
def test_values_come_back_exactly_as_given(conn: psycopg.Connection[Any], queue: str) -> None:
    params = {
        "queue": queue,
        "after": None,
        "kinds": names_array(["noop", "it's", 'qu"ote']),
        "lease": timedelta(minutes=5, microseconds=7),
        "limit": 2**31 - 1,
        "keys": -3,
    }
    row = NamedStatements().run(conn, conn.cursor(), [(ECHO, params)]).fetchone()
    assert row == (
        queue,
        None,
        ["noop", "it's", 'qu"ote'],
        timedelta(minutes=5, microseconds=7),
        2**31 - 1,
        -3,
        2,
    )


def test_the_steps_are_one_implicit_transaction_and_a_failed_one_undoes_the_others(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    statements = NamedStatements()
    cursor = statements.run(conn, conn.cursor(), [(NOTE_XID, {"queue": "a"}), (SAME_XID, {})])
    assert cursor.fetchall() == [(True,)]
    assert conn.info.transaction_status == TransactionStatus.IDLE  # committed at its end
    pgbeat.configure_queue(conn, "locked", concurrency=1)
    with pytest.raises(psycopg.errors.DivisionByZero):
        statements.run(
            conn,
            conn.cursor(),
            [(queue_sql.QUEUES_LOCK, {"queue": "locked"}), (FAILS, {"limit": 0})],
        )
    assert conn.info.transaction_status == TransactionStatus.IDLE
    with psycopg.connect(database_url, autocommit=True) as other:  # the row lock went with it
        other.execute("SET lock_timeout = '2s'")
        locked = other.execute(
            "SELECT name FROM pgbeat_queues WHERE name = 'locked' FOR UPDATE NOWAIT"
        ).fetchall()
        assert locked == [("locked",)]
    assert statements.run(conn, conn.cursor(), [(FAILS, {"limit": 1})]).fetchall() == [(1,)]


NOTE_XID = (
    "SELECT set_config('pgbeat_test.xid', pg_current_xact_id()::text, true)"
    " WHERE %(queue)s IS NOT NULL"
)
SAME_XID = "SELECT current_setting('pgbeat_test.xid') = pg_current_xact_id()::text"


def test_a_statement_deallocated_by_someone_else_is_prepared_again(
    conn: psycopg.Connection[Any],
) -> None:
    statements = NamedStatements()
    assert statements.run(conn, conn.cursor(), [(FAILS, {"limit": 1})]).fetchall() == [(1,)]
    conn.execute("DEALLOCATE ALL")  # as a session pooler's DISCARD ALL would
    assert statements.run(conn, conn.cursor(), [(FAILS, {"limit": 1})]).fetchall() == [(1,)]
    assert list(_prepared(conn)) == [named(FAILS).name]


def test_a_parameter_without_a_known_type_is_refused_before_any_sql() -> None:
    with pytest.raises(ValueError, match="no type known for the parameter 'tenant'"):
        named("SELECT %(tenant)s")


def test_a_pooled_connection_or_an_open_pipeline_runs_no_named_statement(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    assert NamedStatements.usable(conn)
    with conn.pipeline():
        assert not NamedStatements.usable(conn)  # no simple query inside a pipeline
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as pooled:
        assert not NamedStatements.usable(pooled)  # a transaction pooler's: no session


@pytest.mark.parametrize("statement", [
    queue_sql.QUEUES_LOCK,
    limited_sql.JOBS_CLAIM_LIMITED,
    limited_sql.JOBS_CLAIM_LIMITED_HEAD,
    limited_sql.JOBS_CLAIM_LIMITED_KEYS,
    limited_sql.JOBS_CLAIM_FAIR,
])  # fmt: skip
def test_every_limited_claim_has_its_parameters_typed(statement: Any) -> None:
    assert named(statement).parameters  # each takes the queue, at least


def test_named_and_pipelined_limited_claims_take_the_same_jobs(
    conn: psycopg.Connection[Any],
) -> None:
    """The same claim through both paths, on the same backlog: the same jobs, budget."""
    pgbeat.configure_queue(conn, "api", key_concurrency=1, concurrency=4)
    pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("noop", {}, queue="api", limit_key=k) for k in "aabbcd"]
    )
    params: dict[str, Any] = {
        "queue": "api",
        "limit": 10,
        "lease": timedelta(minutes=5),
        "kinds": None,
        "scan": 128,
    }
    taken: list[list[Any]] = []
    for how in (NamedStatements(), None):
        rows, budget = claim_locked(conn, limited_sql.JOBS_CLAIM_LIMITED_HEAD, params, None, how)
        assert budget is not None and budget[0] == 4
        taken.append(sorted((row[0], row[10]) for row in rows))
        conn.execute(
            "UPDATE jobs SET status = 'pending', attempts = 0, locked_until = NULL,"
            " started_at = NULL WHERE status = 'running'"
        )
    assert taken[0] == taken[1]
    assert [key for _, key in taken[0]] == ["a", "b", "c", "d"]


def test_the_bench_of_named_claims_measures_both_ways(server_url: str) -> None:
    """``python -m bench.named_claims``, a few claims: both ways, both shapes, each claim
    checked to take what it should (an empty budget: none; the keyed queue: all 100)."""
    from tests.helpers import run_bench

    done = run_bench(server_url, "bench.named_claims", "--claims", "3", "--warm-up", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("empty_pipelined", "empty_named", "keyed_pipelined", "keyed_named"):
        assert name in done.stdout
