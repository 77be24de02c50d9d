"""Thousands of schedules in one tick: one statement, a plan that stays linear.

The claim statement once took 75 s for 10,000 periods when the planner, expecting a single
row, joined them in nested loops; these tests keep its plan free of such joins and run a
tick of many periods end to end. The full-size runs are bench/schedule_scale.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from bench.schedule_scale import ZONES, _cron_at, insert_schedules

import pgbeat
from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql.jobs import enqueue as enqueue_sql
from pgbeat.scheduling import periods, planning
from pgbeat.scheduling.catalog import Catalog
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import in_thread, plan_nodes, wait_for

COUNT = 2_000


def schedules_firing_at(fire: datetime) -> list[Schedule]:
    return [
        Schedule(
            name=f"customer_{n}",
            kind="report",
            cron=_cron_at(fire, ZONES[n % len(ZONES)]),
            timezone=ZONES[n % len(ZONES)],
            payload={"customer": n},
            jitter=timedelta(seconds=60) if n % 2 else None,
            overlap="skip" if n % 7 == 0 else "allow",
        )
        for n in range(COUNT)
    ]


def next_minute(conn: psycopg.Connection[Any]) -> datetime:
    now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    return (now + timedelta(minutes=2)).replace(second=0, microsecond=0)


INDEXED = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")


def quadratic_joins(node: dict[str, Any]) -> list[str]:
    """Nested loops whose inner side is not an index lookup: each outer row scans it all."""
    found = []
    children = node.get("Plans", [])
    if node["Node Type"] == "Nested Loop" and children[-1]["Node Type"] not in INDEXED:
        found.append(f"{children[0]['Node Type']} x {children[-1]['Node Type']}")
    for child in children:
        found += quadratic_joins(child)
    return found


def test_a_tick_of_thousands_of_periods_joins_them_by_hash(
    database_url: str, conn: psycopg.Connection[Any], monkeypatch: Any
) -> None:
    fire = next_minute(conn)
    insert_schedules(database_url, schedules_firing_at(fire))
    captured: dict[str, Any] = {}
    original = periods.PeriodBatch._params

    def capture(self: periods.PeriodBatch, replica: str) -> dict[str, str]:
        captured["params"] = params = original(self, replica)
        return params

    monkeypatch.setattr(periods.PeriodBatch, "_params", capture)
    scheduler = Scheduler(database_url, None, heartbeat=False)
    scheduler.tick(conn, fire - timedelta(seconds=30))
    result = scheduler.tick(conn, fire + timedelta(milliseconds=5))
    assert len(result.inserted) == COUNT and result.skipped == []
    (plan,) = conn.execute(  # type: ignore[misc]
        "EXPLAIN (FORMAT JSON) " + history_sql.HISTORY_CLAIM_PERIODS, captured["params"]
    ).fetchone()
    assert not quadratic_joins(plan[0]["Plan"]), plan
    rows = conn.execute(
        "SELECT count(*), count(DISTINCT j.unique_key), min(j.run_at - h.fire_at),"
        " max(j.run_at - h.fire_at)"
        " FROM pgbeat_schedule_history AS h JOIN jobs AS j ON j.id = h.job_id"
        " WHERE h.outcome = 'enqueued'"
    ).fetchone()
    assert rows is not None and rows[:2] == (COUNT, COUNT)
    assert timedelta(0) == rows[2] and rows[3] < timedelta(seconds=60)  # half are jittered


def seq_scans(node: dict[str, Any]) -> list[str]:
    """The tables a plan reads by a sequential scan."""
    return [n["Relation Name"] for n in plan_nodes(node) if n["Node Type"] == "Seq Scan"]


def test_on_tables_analyzed_empty_the_claim_probes_by_index(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A new deployment: jobs and the history analyzed while empty, so the planner costs a
    scan of them at nothing. Under the claim's settings its statements still probe them by
    index (a scan of jobs per period made the first 10,000-period tick quadratic: 1.1 s)."""
    fire = next_minute(conn)
    insert_schedules(database_url, schedules_firing_at(fire)[:300])
    conn.execute("ANALYZE")
    catalog = Catalog()
    catalog.load(conn)
    made = planning.plan(catalog, catalog.take_due(fire), fire)
    assert len(made.batch) == 300
    ids: list[int | None] = list(range(10**9, 10**9 + 300))
    with conn.transaction():
        conn.execute(history_sql.HISTORY_CLAIM_SETTINGS)
        for statement, params in [
            (history_sql.HISTORY_CLAIM_PERIODS, made.batch._params("test")),
            (enqueue_sql.PERIOD_JOBS_INSERT, made.batch.jobs_params(ids)),
        ]:
            row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert row is not None
            scanned = seq_scans(row[0][0]["Plan"])
            assert "jobs" not in scanned and "pgbeat_schedule_history" not in scanned, row


@pytest.mark.slow
def test_periods_built_ahead_are_the_ones_a_tick_would_build(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    """The loop builds the next fire's periods while it waits; they must be the same."""
    for n in range(50):
        pgbeat.upsert_schedule(conn, f"every3_{n}", every="3s", catch_up="none", jitter="2s")
    with in_thread(scheduler, join=10):
        wait_for(lambda: scheduler.prepared_ticks >= 1, timeout=20, message="a prepared tick")
        pgbeat.upsert_schedule(conn, "every3_0", every="3s", catch_up="none")  # a change
        before = scheduler.prepared_ticks
        wait_for(lambda: scheduler.prepared_ticks > before, timeout=20, message="more")
    rows = conn.execute(
        "SELECT split_part(unique_key, '@', 1), count(*), count(DISTINCT unique_key),"
        " min(split_part(unique_key, '@', 2)::timestamptz), max(split_part(unique_key, '@', 2)"
        "::timestamptz) FROM jobs GROUP BY 1"
    ).fetchall()
    assert len(rows) == 50
    for name, count, distinct, first, last in rows:
        assert count == distinct == (last - first) / timedelta(seconds=3) + 1, name
    history = conn.execute(
        "SELECT count(*) FROM pgbeat_schedule_history AS h JOIN jobs AS j ON j.id = h.job_id"
        " WHERE j.run_at - h.fire_at < interval '2s'"
    ).fetchone()
    assert history == (sum(row[1] for row in rows),)


def loops_over_ctes(node: dict[str, Any]) -> list[str]:
    """Nested loops with a CTE's rows (or a Materialize of them) on either side."""
    found = []
    children = node.get("Plans", [])
    if node["Node Type"] == "Nested Loop":
        for child in children:
            inner = child.get("Plans", [{}])[0] if child["Node Type"] == "Materialize" else child
            if inner.get("Node Type") == "CTE Scan":
                found.append(f"Nested Loop over CTE {inner.get('CTE Name')}")
    for child in children:
        found += loops_over_ctes(child)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("count", [10_000, 50_000])
def test_the_claim_of_many_new_periods_cannot_go_quadratic(
    database_url: str, conn: psycopg.Connection[Any], count: int
) -> None:
    """A minute after a tick of ``count`` periods, with statistics that know that history
    (the planner then expects a handful of new periods): neither statement of the claim
    has a nested loop whose inner side is not an index probe, nor one over a CTE."""
    fire = next_minute(conn)
    previous = fire - timedelta(minutes=1)
    every = timedelta(minutes=1)
    insert_schedules(
        database_url, [Schedule(name=f"beat_{n}", kind="beat", every=every) for n in range(count)]
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, unique_key, run_at, status)"
        " SELECT 'beat', '{}', 'beat_' || n || '@' || %(key)s, %(at)s, 'done'"
        " FROM generate_series(0, %(count)s - 1) AS n",
        {"key": previous.strftime("%Y-%m-%dT%H:%M:%SZ"), "at": previous, "count": count},
    )
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, job_id)"
        " SELECT split_part(unique_key, '@', 1), run_at, 'enqueued', id FROM jobs"
    )
    conn.execute("ANALYZE")
    catalog = Catalog()
    catalog.load(conn)
    groups = catalog.take_due(previous)  # as if this replica had ticked a minute ago
    catalog.settle(groups, previous, {group.policy: fire for group in groups})
    made = planning.plan(catalog, catalog.take_due(fire), fire)
    assert len(made.batch) == count
    ids: list[int | None] = list(range(10**9, 10**9 + count))
    statements = [
        (history_sql.HISTORY_CLAIM_PERIODS, made.batch._params("test")),
        (enqueue_sql.PERIOD_JOBS_INSERT, made.batch.jobs_params(ids)),
    ]
    for statement, params in statements:
        row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
        assert row is not None
        plan = row[0][0]["Plan"]
        assert not quadratic_joins(plan), plan
        assert not loops_over_ctes(plan), plan
