"""The claim's index set (migration 0023, db/sql/jobs/queue_heads.py): which indexes a
pending job enters, and that every statement reading a queue's pending jobs reads them
from the two indexes of a queue's pending jobs, in their order, a bounded head at a time,
with no sort of the backlog and no sequential scan, on fresh and on analyzed statistics.
The plans are read with EXPLAIN, never timed (docs/benchmarks.md measures the claims)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.pooler import session_options
from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import claim_heads as heads_sql
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.worker.worker import SESSION_SETTINGS
from tests.helpers import plan_nodes

PAGE = 8192  # an empty B-tree is its metapage alone
QUEUE_INDEXES = {"jobs_claim_queue_unkeyed", "jobs_claim_queue_keyed"}
SCANS = {"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan"}


def entered(conn: psycopg.Connection[Any]) -> set[str]:
    """The B-tree indexes on jobs that hold an entry (more than their metapage)."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
        " JOIN pg_am AS a ON a.oid = c.relam WHERE i.indrelid = 'jobs'::regclass"
        " AND a.amname = 'btree' AND pg_relation_size(c.oid) > %s",
        (PAGE,),
    )
    return {name for (name,) in rows.fetchall()}


def test_a_plain_pending_job_enters_four_btrees_and_a_keyed_one_six(
    conn: psycopg.Connection[Any],
) -> None:
    """What an insert pays: a plain job the primary key, jobs_ready, jobs_claim_order and
    its queue's unkeyed index, as before round four (docs/benchmarks.md, "What an insert
    pays"); a keyed one the keyed index and jobs_claim_key instead of the unkeyed one."""
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", {}) for _ in range(50)])
    plain = {"jobs_pkey", "jobs_ready", "jobs_claim_order", "jobs_claim_queue_unkeyed"}
    assert entered(conn) == plain
    pgbeat.enqueue(conn, "noop", limit_key="customer:1")
    keyed = {"jobs_claim_queue_keyed", "jobs_claim_key"}
    assert entered(conn) == plain | keyed


def fill(conn: psycopg.Connection[Any]) -> None:
    """A plain queue behind 20,000 due jobs of a foreign kind, a limited queue, a keyed and
    a fair one over 500 keys with unkeyed jobs beside, 300 queues of delayed jobs."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, queue, priority, limit_key)"
        " SELECT CASE WHEN q = 'default' AND i % 2 = 0 THEN 'other' ELSE 'noop' END, '{}',"
        " now() - interval '1 hour' + i * interval '1 ms', q, (i % 3)::smallint - 1,"
        " CASE WHEN q IN ('keyed', 'fair') AND i % 4 <> 0 THEN 'key' || (i % 500) END"
        " FROM generate_series(1, 10000) AS i,"
        " unnest(ARRAY['default', 'default', 'default', 'default', 'limited', 'keyed', 'fair'])"
        "   AS q"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, queue) SELECT 'noop', '{}',"
        " now() + interval '1 day', 'tenant' || i FROM generate_series(1, 300) AS i"
    )
    pgbeat.configure_queue(conn, "limited", concurrency=50)
    pgbeat.configure_queue(conn, "keyed", key_concurrency=1)
    pgbeat.configure_queue(conn, "fair", fair=True)


@contextmanager
def filled(database_url: str, statistics: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection with the worker's settings to a database fill() filled, its statistics
    "fresh" (none since) or "analyzed"."""
    options = session_options(database_url, SESSION_SETTINGS)
    with psycopg.connect(database_url, autocommit=True, options=options) as conn:
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        fill(conn)
        if statistics == "analyzed":
            conn.execute("ANALYZE jobs")
        yield conn


# Each statement that reads a queue's pending jobs, with the queue it reads (None: the
# statement reads several) and whether each read of those indexes must be a bounded head.
READS = {
    "JOBS_CLAIM_BY_QUEUE": (claim_sql, None, True),
    "JOBS_CLAIM_LIMITED": (limited_sql, "limited", True),
    "JOBS_CLAIM_LIMITED_HEAD": (limited_sql, "keyed", True),
    "JOBS_CLAIM_FAIR": (limited_sql, "fair", True),
    "JOBS_CLAIM_BY_QUEUE_KIND": (heads_sql, None, True),
    "JOBS_DUE_QUEUES": (heads_sql, None, False),  # one probe per queue: EXISTS
    "QUEUES_HELD": (queue_sql, None, True),
    "QUEUES_LIST": (queue_sql, None, False),  # a page's counts: the page's queues
}


def unbounded(node: dict[str, Any], sorting: bool = False, limited: bool = False) -> list[str]:
    """The reads of pending jobs that a Sort sorts without a Limit between (a sort of the
    backlog; tests.helpers.sorts_backlog on a text plan), or, for ``limited``, any read of a
    queue's index without a Limit above it."""
    found = []
    kind = node["Node Type"]
    if kind == "Limit":
        sorting, limited = False, False
    elif kind == "Sort":
        sorting = True
    if kind in SCANS and node.get("Relation Name") == "jobs":
        index = node.get("Index Name") or ""
        if sorting and (index.startswith(("jobs_claim", "jobs_ready")) or not index):
            found.append(f"sorted: {kind} {node.get('Index Name')}")
        if limited and node.get("Index Name") in QUEUE_INDEXES:
            found.append(f"unbounded: {kind} {node.get('Index Name')}")
    for child in node.get("Plans", []):
        child_sorting = sorting and child.get("Parent Relationship") not in ("InitPlan", "SubPlan")
        found += unbounded(child, child_sorting, limited)
    return found


@pytest.mark.parametrize("statistics", ["fresh", "analyzed"])
@pytest.mark.parametrize("kinds", [["noop", "absent"], None])
def test_every_read_of_a_queue_uses_its_two_indexes_a_bounded_head_at_a_time(
    database_url: str, statistics: str, kinds: list[str] | None
) -> None:
    """Under the worker's settings (worker.SESSION_SETTINGS; a limited claim's are the same,
    set by QUEUES_LOCK), for the worker's kinds and for a claim of every kind (a skip scan
    of the queue's kinds): no sequential scan of jobs, no sort of what an index read
    without a limit, the unkeyed jobs read from their index and the keyed ones from theirs
    or jobs_claim_key, and none of the dropped indexes."""
    with filled(database_url, statistics) as conn:
        params = {
            "limit": 100,
            "lease": "5 minutes",
            "kinds": kinds,
            "queues": ["default", "tenant7"],
            "held": ["limited", "keyed", "fair"],
            "scan": 200,
            "keys": 200,
            "after": None,
            "steps": 1,
            "chunk": 1000,
            "again": ["default"],
            "ahead": 100,
            "name": None,
            "span": 5000,
        }
        for label, (module, queue, bounded) in READS.items():
            if kinds is None and label in ("JOBS_CLAIM_BY_QUEUE_KIND", "JOBS_DUE_QUEUES"):
                continue  # a worker with kinds only (claiming.py's _by_kind)
            statement = getattr(module, label)
            with conn.transaction():
                row = conn.execute(
                    "EXPLAIN (FORMAT JSON) " + statement, {**params, "queue": queue}
                ).fetchone()
                assert row is not None
            plan = row[0][0]["Plan"]
            nodes = list(plan_nodes(plan))
            names = {n.get("Index Name") for n in nodes if n.get("Relation Name") == "jobs"}
            assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], (label, plan)
            assert "jobs_claim_queue_unkeyed" in names, (label, names)
            # the keyed jobs: their queue's index, or jobs_claim_key (led by queue too)
            assert names & {"jobs_claim_queue_keyed", "jobs_claim_key"}, (label, names)
            assert not names & {"jobs_claim_queue", "jobs_claim_unkeyed", "jobs_claim_kind"}
            assert not unbounded(plan, limited=bounded), (label, unbounded(plan, limited=bounded))


def joins_on_keys(node: dict[str, Any]) -> list[str]:
    """The join conditions and filters of a plan that name limit_key."""
    found = []
    for node_ in plan_nodes(node):
        for field in ("Join Filter", "Hash Cond", "Merge Cond"):
            if "limit_key" in node_.get(field, ""):
                found.append(f"{node_['Node Type']}: {node_[field]}")
    return found


@pytest.mark.parametrize("statistics", ["fresh", "analyzed"])
@pytest.mark.parametrize("limit", ["key_concurrency", "key_rate"])
def test_the_keyed_head_claim_joins_nothing_to_its_head(
    database_url: str, statistics: str, limit: str
) -> None:
    """JOBS_CLAIM_LIMITED_HEAD under the worker's settings: each head row's key budget is a
    scalar subquery of the row, never a join a kept plan could turn into head x keys
    comparisons; a key's starts are one bounded probe of pgbeat_queue_starts_key_window;
    a key's running jobs one probe of jobs_running_key; the head (numbered by a window) is
    a bounded read, never a sort of the backlog; the picked rows are updated by tuple
    address."""
    options = session_options(database_url, SESSION_SETTINGS)
    with psycopg.connect(database_url, autocommit=True, options=options) as conn:
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        fill(conn)
        if limit == "key_rate":  # fill's key_concurrency = 1 replaced
            pgbeat.configure_queue(conn, "keyed", key_concurrency=None, key_rate="1/1h")
        conn.execute(
            "INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)"
            " SELECT 'keyed', 'key' || i, now() FROM generate_series(1, 300) AS i"
        )
        if statistics == "analyzed":
            conn.execute("ANALYZE")
        params = {"limit": 100, "lease": "5 minutes", "kinds": ["noop", "absent"]}
        params |= {"queue": "keyed", "scan": 116}
        with conn.transaction():
            conn.execute(queue_sql.QUEUES_LOCK, {"queue": "keyed"})
            row = conn.execute(
                "EXPLAIN (FORMAT JSON) " + limited_sql.JOBS_CLAIM_LIMITED_HEAD, params
            ).fetchone()
        assert row is not None
        plan = row[0][0]["Plan"]
        assert not joins_on_keys(plan), joins_on_keys(plan)
        assert not unbounded(plan, limited=True), unbounded(plan, limited=True)
        starts = [n for n in plan_nodes(plan) if n.get("Relation Name") == "pgbeat_queue_starts"]
        assert all(n["Node Type"] != "Seq Scan" for n in starts), starts
        per_key = {n.get("Index Name") for n in starts if "limit_key" in n.get("Index Cond", "")}
        assert per_key == {"pgbeat_queue_starts_key_window"}, starts
        # a key's running jobs: one probe of jobs_running_key, never every running job
        per_key = {
            n.get("Index Name")
            for n in plan_nodes(plan)
            if n.get("Relation Name") == "jobs"
            and "running" in (n.get("Index Name") or "")
            and "limit_key" in n.get("Index Cond", "")
        }
        assert per_key == {"jobs_running_key"}, per_key
        assert not [
            n
            for n in plan_nodes(plan)
            if n.get("Index Name") == "jobs_running" and "limit_key" in n.get("Filter", "")
        ], plan
        (update,) = [n for n in plan_nodes(plan) if n.get("Operation") == "Update"]
        scans = [n["Node Type"] for n in update["Plans"] if n["Parent Relationship"] == "Outer"]
        assert scans == ["Tid Scan"], update  # the picked rows by address, as the plain claim


@pytest.mark.parametrize("statistics", ["fresh", "analyzed"])
@pytest.mark.parametrize("keyed", [False, True])
def test_the_one_head_claim_reads_its_index_a_bounded_head_once(
    database_url: str, statistics: str, keyed: bool
) -> None:
    """JOBS_CLAIM_ONE_HEAD (and its keyed twin) under the worker's settings, behind the
    20,000 foreign due jobs of fill(): one bounded read of its own index, no sort, no other
    index of pending jobs, the queue's held state probed once (not per row), the rows
    updated by tuple address."""
    with filled(database_url, statistics) as conn:
        label = "JOBS_CLAIM_ONE_KEYED_HEAD" if keyed else "JOBS_CLAIM_ONE_HEAD"
        params = {"limit": 100, "lease": "5 minutes", "queue": "default", "kind": "noop"}
        with conn.transaction():
            row = conn.execute(
                "EXPLAIN (FORMAT JSON) " + getattr(heads_sql, label), params
            ).fetchone()
        assert row is not None
        plan = row[0][0]["Plan"]
        nodes = list(plan_nodes(plan))
        reads = [
            n.get("Index Name") or n["Node Type"]
            for n in nodes
            if n.get("Relation Name") == "jobs" and n["Node Type"].endswith("Scan")
        ]
        own = "jobs_claim_queue_keyed" if keyed else "jobs_claim_queue_unkeyed"
        assert sorted(reads) == sorted([own, "Tid Scan"]), (label, reads)
        assert not [n for n in nodes if n["Node Type"] == "Sort"], plan
        assert not unbounded(plan, limited=True), unbounded(plan, limited=True)
        held = [n for n in nodes if n.get("Relation Name") == "pgbeat_queues"]
        assert [n["Parent Relationship"] for n in held] == ["InitPlan"], held
