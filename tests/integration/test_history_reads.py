"""A schedule's history read newest first from two partial indexes (migration 0014): the
periods' and the manual runs', merged, paged and filtered as one list.

Rows are written by SQL at chosen times, periods and manual runs interleaved, so that the
expected order is known without the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from pgbeat.db.sql import history as history_sql
from pgbeat.scheduling import state
from pgbeat.ui.schedule_data import history_rows
from tests.helpers import plan_nodes

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# (seconds after T0, outcome): periods and manual runs interleaved, oldest first.
ROWS = [(0, "enqueued"), (5, "manual"), (10, "skipped"), (11, "manual"), (20, "enqueued"),
        (21, "manual"), (30, "missed")]  # fmt: skip


def write_history(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, inserted_by) "
        "SELECT %s, %s::timestamptz + make_interval(secs => s), o, 'test' "
        "FROM unnest(%s::int[], %s::text[]) AS r(s, o)",
        (name, T0, [s for s, _ in ROWS], [o for _, o in ROWS]),
    )


def newest_first(rows: list[tuple[int, str]]) -> list[tuple[datetime, str]]:
    return [(T0 + timedelta(seconds=s), o) for s, o in sorted(rows, reverse=True)]


def test_history_merges_periods_and_manual_runs_newest_first(
    conn: psycopg.Connection[Any],
) -> None:
    pgbeat.upsert_schedule(conn, "mixed", every="10s")
    write_history(conn, "mixed")
    expected = newest_first(ROWS)

    every = state.schedule_history(conn, "mixed", limit=50)
    assert [(r.fire_at, r.outcome) for r in every] == expected

    first = state.schedule_history(conn, "mixed", limit=3)
    assert [(r.fire_at, r.outcome) for r in first] == expected[:3]
    rest = state.schedule_history(conn, "mixed", limit=3, before=first[-1].fire_at)
    assert [(r.fire_at, r.outcome) for r in rest] == expected[3:6]

    pages = history_rows(conn, ["mixed"], 4)
    assert [(r["fire_at"], r["outcome"]) for r in pages["mixed"]] == expected[:4]
    manual = history_rows(conn, ["mixed"], 10, outcome="manual")
    assert [(r["fire_at"], r["outcome"]) for r in manual["mixed"]] == [
        row for row in expected if row[1] == "manual"
    ]
    periods = history_rows(conn, ["mixed"], 10, outcome="enqueued")
    assert [r["outcome"] for r in periods["mixed"]] == ["enqueued", "enqueued"]


def test_history_reads_use_the_partial_indexes_not_a_scan(conn: psycopg.Connection[Any]) -> None:
    """At 200,000 rows of other schedules, both reads probe the two indexes by schedule."""
    pgbeat.upsert_schedule(conn, "mixed", every="10s")
    write_history(conn, "mixed")
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome) "
        "SELECT 'other_' || (i %% 100), %s::timestamptz - make_interval(secs => i), "
        "CASE WHEN i %% 50 = 0 THEN 'manual' ELSE 'enqueued' END "
        "FROM generate_series(1, 200000) AS i",
        (T0,),
    )
    conn.execute("ANALYZE pgbeat_schedule_history")
    indexes = {
        name
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'pgbeat_schedule_history'"
        )
    }
    assert "pgbeat_schedule_history_manual" in indexes
    assert "pgbeat_schedule_history_recent" not in indexes  # dropped: one entry per period
    for statement, params in (
        (history_sql.HISTORY_OF_SCHEDULE, {"name": "mixed", "limit": 20, "before": None}),
        (
            history_sql.HISTORY_RECENT_OF_SCHEDULES,
            {"names": ["mixed"], "limit": 20, "outcome": None, "before": None},
        ),
    ):
        row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
        assert row is not None
        plan = row[0][0]["Plan"]
        read = {node.get("Index Name") for node in plan_nodes(plan)}
        assert {"pgbeat_schedule_history_period", "pgbeat_schedule_history_manual"} <= read
        scanned = {n.get("Relation Name") for n in plan_nodes(plan) if n["Node Type"] == "Seq Scan"}
        assert "pgbeat_schedule_history" not in scanned
