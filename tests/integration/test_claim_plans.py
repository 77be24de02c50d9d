"""The scheduler's claim: plans that stay linear on fresh and analyzed tables, and the
second try that takes over when the first, without ON CONFLICT, meets a period's row.

The plans are read with EXPLAIN, never timed (bench/claim_scale.py measures the claim):
the history is probed once per period, never hashed whole; no table is scanned; each
period's checks are planned once, not once per column that reads them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from bench.schedule_scale import insert_schedules

from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql.jobs import enqueue as enqueue_sql
from pgbeat.scheduling import planning
from pgbeat.scheduling.catalog import Catalog
from pgbeat.scheduling.periods import PeriodBatch
from pgbeat.scheduling.schedule import Overlap, Schedule
from tests.helpers import plan_nodes, wait_for
from tests.integration.test_schedule_scale import next_minute, quadratic_joins

COUNT = 300
HISTORY = "pgbeat_schedule_history"


def beats(count: int) -> list[Schedule]:
    """``count`` schedules every minute, a third of them with an overlap rule."""
    overlaps: tuple[Overlap, ...] = ("allow", "skip", "buffer_one")
    return [
        Schedule(
            name=f"beat_{n}",
            kind="beat",
            every=timedelta(minutes=1),
            overlap=overlaps[n % 3],
            pause_after_failures=3 if n % 5 == 0 else None,
        )
        for n in range(count)
    ]


def batch_at(conn: psycopg.Connection[Any], fire: datetime) -> PeriodBatch:
    """The periods a replica that ticked a minute earlier claims at ``fire``."""
    catalog = Catalog()
    catalog.load(conn)
    previous = fire - timedelta(minutes=1)
    groups = catalog.take_due(previous)
    catalog.settle(groups, previous, {group.policy: fire for group in groups})
    made = planning.plan(catalog, catalog.take_due(fire), fire)
    assert len(made.batch) == COUNT
    return made.batch


def previous_minute(conn: psycopg.Connection[Any], fire: datetime) -> None:
    """Each schedule's period of the minute before ``fire``: a done job and its history row."""
    previous = fire - timedelta(minutes=1)
    conn.execute(
        "INSERT INTO jobs (kind, payload, unique_key, run_at, status)"
        " SELECT 'beat', '{}', 'beat_' || n || '@' || %(key)s, %(at)s, 'done'"
        " FROM generate_series(0, %(count)s - 1) AS n",
        {"key": previous.strftime("%Y-%m-%dT%H:%M:%SZ"), "at": previous, "count": COUNT},
    )
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, job_id)"
        " SELECT split_part(unique_key, '@', 1), run_at, 'enqueued', id FROM jobs"
    )


def plans(conn: psycopg.Connection[Any], batch: PeriodBatch) -> dict[str, dict[str, Any]]:
    """The plans of the claim's statements under the claim's settings, by name."""
    ids: list[int | None] = list(range(10**9, 10**9 + COUNT))
    statements = {
        "HISTORY_CLAIM_NEW_PERIODS": (history_sql.HISTORY_CLAIM_NEW_PERIODS, batch._params("t")),
        "HISTORY_CLAIM_PERIODS": (history_sql.HISTORY_CLAIM_PERIODS, batch._params("t")),
        "PERIOD_JOBS_INSERT_NEW": (enqueue_sql.PERIOD_JOBS_INSERT_NEW, batch.jobs_params(ids)),
        "PERIOD_JOBS_INSERT": (enqueue_sql.PERIOD_JOBS_INSERT, batch.jobs_params(ids)),
    }
    found = {}
    with conn.transaction():
        conn.execute(history_sql.HISTORY_CLAIM_SETTINGS)
        for name, (statement, params) in statements.items():
            row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert row is not None
            found[name] = row[0][0]["Plan"]
    return found


def hashed_tables(node: dict[str, Any]) -> list[str]:
    """The tables read whole into a hash table (the inner side of a hash join)."""
    return [
        inner["Relation Name"]
        for hashed in plan_nodes(node)
        if hashed["Node Type"] == "Hash"
        for inner in plan_nodes(hashed)
        if "Relation Name" in inner
    ]


def index_uses(node: dict[str, Any], index: str) -> int:
    return sum(1 for n in plan_nodes(node) if n.get("Index Name") == index)


def _claim_behind(
    conn: psycopg.Connection[Any],
    database_url: str,
    batch: PeriodBatch,
    plant: Callable[[psycopg.Connection[Any]], object],
    waiting: str,
) -> Any:
    """``batch``'s claim on a connection of its own while another writer holds what
    ``plant`` wrote on its, uncommitted: once the claim waits on that writer's lock, the
    writer commits; the claim's result."""
    result: dict[str, Any] = {}
    with psycopg.connect(database_url) as other, psycopg.connect(database_url) as claimer:
        plant(other)
        claimer_pid = claimer.info.backend_pid

        def claim() -> None:
            try:
                result["claims"] = batch.claim(claimer, "this")
            except Exception as exc:  # reported below, in the test's thread
                result["error"] = exc

        thread = threading.Thread(target=claim, daemon=True)
        thread.start()
        wait_for(
            lambda: (
                conn.execute(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                    (claimer_pid,),
                ).fetchone()
                == (True,)
            ),
            timeout=30,
            message=waiting,
        )
        other.commit()
        thread.join(timeout=60)
        assert not thread.is_alive() and "error" not in result, result
    return result["claims"]


@pytest.mark.parametrize(
    "tables", ["fresh", "cold with history", "analyzed empty", "analyzed with history"]
)
def test_the_claim_probes_the_history_once_per_period_whatever_the_statistics(
    database_url: str, conn: psycopg.Connection[Any], tables: str
) -> None:
    """Fresh: never analyzed. Cold with history: a minute of periods written since, never
    analyzed (the second tick of a new deployment). Analyzed empty: a new deployment.
    Analyzed with history: the planner knows a minute of periods and expects few new ones;
    there it once hashed the whole history instead of probing it, a cost that grows with
    the history, not the tick."""
    fire = next_minute(conn)
    insert_schedules(database_url, beats(COUNT))
    if tables.endswith("with history"):
        previous_minute(conn, fire)
    if tables.startswith("analyzed"):
        conn.execute("ANALYZE")
    batch = batch_at(conn, fire)
    for name, plan in plans(conn, batch).items():
        scanned = [n["Relation Name"] for n in plan_nodes(plan) if n["Node Type"] == "Seq Scan"]
        assert "jobs" not in scanned and HISTORY not in scanned, (name, plan)
        assert not quadratic_joins(plan), (name, plan)
        assert HISTORY not in hashed_tables(plan), (name, plan)
        assert "jobs" not in hashed_tables(plan), (name, plan)
        if not name.startswith("PERIOD_JOBS_INSERT"):
            probes = [
                n
                for n in plan_nodes(plan)
                if n.get("Index Name") == "pgbeat_schedule_history_period"
                and n.get("Parent Relationship") == "SubPlan"
                and "fire_at =" in n.get("Index Cond", "")
            ]
            assert len(probes) == 1, (name, plan)  # the decided periods: a probe each
            # each period's checks, planned once: live job, waiting period, failures
            assert index_uses(plan, "jobs_live_schedule") == 1, (name, plan)
            assert index_uses(plan, "pgbeat_schedule_history_buffered") == 1, (name, plan)


def test_a_missed_period_found_on_time_is_enqueued_by_the_second_try(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A period another replica recorded as missed: the first try (no ON CONFLICT) meets
    its row and writes nothing; the second makes it enqueued, with its job, once."""
    fire = next_minute(conn)
    insert_schedules(database_url, beats(COUNT))
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, inserted_by)"
        " VALUES ('beat_7', %s, 'missed', 'catch_up=none', 'other')",
        (fire,),
    )
    claims = batch_at(conn, fire).claim(conn, "this")
    assert len(claims.inserted) == COUNT and not claims.existing
    rows = conn.execute(
        "SELECT h.outcome, h.inserted_by, j.unique_key FROM pgbeat_schedule_history AS h"
        " JOIN jobs AS j ON j.id = h.job_id WHERE h.schedule = 'beat_7'"
    ).fetchall()
    assert rows == [("enqueued", "this", "beat_7@" + fire.strftime("%Y-%m-%dT%H:%M:%SZ"))]
    (jobs,) = conn.execute("SELECT count(*) FROM jobs").fetchone()  # type: ignore[misc]
    assert jobs == COUNT


def test_a_period_another_replica_writes_meanwhile_is_left_to_it(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Another writer's uncommitted row for one period: the first try waits on it and, once
    it commits, is refused; the second try leaves that period to it and claims the rest."""
    fire = next_minute(conn)
    insert_schedules(database_url, beats(COUNT))
    batch = batch_at(conn, fire)
    claims = _claim_behind(
        conn,
        database_url,
        batch,
        lambda other: other.execute(
            "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, inserted_by)"
            " VALUES ('beat_7', %s, 'skipped', 'other')",
            (fire,),
        ),
        "the claim waiting on the other writer's row",
    )
    key = "beat_7@" + fire.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert claims.existing == [key] and len(claims.inserted) == COUNT - 1
    assert key not in claims.inserted
    rows = conn.execute(
        "SELECT outcome, inserted_by, job_id FROM pgbeat_schedule_history WHERE schedule = 'beat_7'"
    ).fetchall()
    assert rows == [("skipped", "other", None)]
    counted = conn.execute(
        "SELECT count(*), count(DISTINCT unique_key), count(*) FILTER (WHERE unique_key = %s)"
        " FROM jobs",
        (key,),
    ).fetchone()
    assert counted == (COUNT - 1, COUNT - 1, 0)


def test_of_many_periods_the_one_whose_job_exists_without_history_keeps_that_job(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The jobs' insert returns a count: when it falls short (a period's job inserted by an
    older pgbeat, without a history row), the claim asks which of its jobs went in, and
    only that period counts as existing, its history row pointed at the job found (beat_3:
    overlap "allow", so the live job does not make it skip)."""
    fire = next_minute(conn)
    insert_schedules(database_url, beats(COUNT))
    key = "beat_3@" + fire.strftime("%Y-%m-%dT%H:%M:%SZ")
    row = conn.execute(
        "INSERT INTO jobs (kind, payload, unique_key, run_at) VALUES ('beat', '{}', %s, %s)"
        " RETURNING id",
        (key, fire),
    ).fetchone()
    assert row is not None
    claims = batch_at(conn, fire).claim(conn, "this")
    assert claims.existing == [key] and len(claims.inserted) == COUNT - 1
    history = conn.execute(
        "SELECT outcome, job_id FROM pgbeat_schedule_history WHERE schedule = 'beat_3'"
    ).fetchall()
    assert history == [("enqueued", row[0])]
    counted = conn.execute(
        "SELECT count(*), count(DISTINCT unique_key), count(*) FILTER"
        " (WHERE h.job_id IS NULL) FROM jobs AS j"
        " LEFT JOIN pgbeat_schedule_history AS h ON h.job_id = j.id"
    ).fetchone()
    assert counted == (COUNT, COUNT, 0)


def test_a_job_another_writer_inserts_meanwhile_under_a_period_s_key_is_kept(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Another writer's uncommitted job under a period's key (beat_3: overlap "allow"): the
    jobs' plain first insert waits on it and, once it commits, is refused whole; the insert
    with ON CONFLICT then leaves that job alone and links the period to it."""
    fire = next_minute(conn)
    insert_schedules(database_url, beats(COUNT))
    batch = batch_at(conn, fire)
    key = "beat_3@" + fire.strftime("%Y-%m-%dT%H:%M:%SZ")
    planted: list[int] = []

    def plant(other: psycopg.Connection[Any]) -> None:
        row = other.execute(
            "INSERT INTO jobs (kind, payload, unique_key, run_at) VALUES ('beat', '{}', %s, %s)"
            " RETURNING id",
            (key, fire),
        ).fetchone()
        assert row is not None
        planted.append(row[0])

    claims = _claim_behind(
        conn, database_url, batch, plant, "the jobs' insert waiting on the other writer's job"
    )
    assert claims.existing == [key] and len(claims.inserted) == COUNT - 1
    history = conn.execute(
        "SELECT outcome, job_id FROM pgbeat_schedule_history WHERE schedule = 'beat_3'"
    ).fetchall()
    assert history == [("enqueued", planted[0])]
    counted = conn.execute(
        "SELECT count(*), count(DISTINCT unique_key), count(*) FILTER (WHERE unique_key = %s)"
        " FROM jobs",
        (key,),
    ).fetchone()
    assert counted == (COUNT, COUNT, 1)
