"""Flat jobs table against one partitioned by finished day, at a few million rows.

    DATABASE_URL=postgresql://...  python -m bench.partitions --rows 2000000

For each layout, in a database of its own: load ``--rows`` finished jobs spread over 8
days and ``--pending`` due ones, VACUUM ANALYZE, then time pgbeat's own statements:
claims (JOBS_CLAIM, 100 at a time) and their completions (JOBS_COMPLETE), the dashboard's
overview, per-minute and newest-jobs reads, and removing the oldest day: DELETE in
retention's batches (then the VACUUM that DELETE needs) against DETACH + DROP of its
partition. WAL bytes are ``pg_current_wal_lsn()`` deltas: run on a server of its own.
The partitioned layout is built here, for the measurement only (docs/scale.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, LiteralString

import psycopg

import pgbeat
from bench import database
from bench.measure import percentile
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import dashboard as dashboard_sql
from pgbeat.db.sql.jobs import outcomes as outcome_sql
from pgbeat.db.sql.jobs import retention as purge_sql

# The claim finds the rows it locked by tuple address (ctid), which names one row only in a
# plain table: in a partitioned one each partition has its own addresses, and an update of
# the parent by ctid would also take rows of other partitions at the same address. The
# partitioned twin is claimed by id instead, the form the claim had before that change.
CLAIM_BY_ID: LiteralString = claim_sql.JOBS_CLAIM.replace(
    "WHERE ctid = ANY(ARRAY(\n    SELECT ctid FROM jobs",
    "WHERE id = ANY(ARRAY(\n    SELECT id FROM jobs",
)
if CLAIM_BY_ID == claim_sql.JOBS_CLAIM:  # the claim's text changed: this bench must follow
    raise RuntimeError("bench/partitions.py: JOBS_CLAIM no longer reads its rows by ctid")
DAYS = 7  # whole days of finished jobs before today's; the oldest is the one removed
# The partitioned twin of the migrated jobs table: same columns and defaults, a DEFAULT
# partition for unfinished jobs (finished_at NULL), one partition per finished day. No
# primary key and no unique (kind, unique_key): a unique index of a partitioned table must
# contain the partition key, and finished_at is NULL until a job ends.
PARTITIONED = """
ALTER TABLE jobs RENAME TO jobs_flat;
CREATE TABLE jobs (LIKE jobs_flat INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (finished_at);
DROP TABLE jobs_flat;
CREATE TABLE jobs_live PARTITION OF jobs DEFAULT
    WITH (fillfactor = 70, autovacuum_enabled = off);
CREATE INDEX ON jobs (id);
CREATE INDEX jobs_ready ON jobs (run_at) WHERE status = 'pending';
CREATE INDEX jobs_running ON jobs (locked_until) WHERE status = 'running';
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_failed_id ON jobs (id) WHERE status = 'failed';
"""
# Day n: [midnight n days ago, the next midnight), in the autovacuum-off, fillfactor-100
# storage of a partition that only receives finished rows.
DAY_PARTITION = """
CREATE TABLE jobs_d{n} PARTITION OF jobs FOR VALUES
    FROM (date_trunc('day', now()) - interval '{n} days')
    TO (date_trunc('day', now()) - interval '{n} days' + interval '1 day')
    WITH (autovacuum_enabled = off)"""
# Finished jobs, finished evenly from midnight DAYS days ago until now.
LOAD_FINISHED = """
INSERT INTO jobs (kind, payload, status, attempts, run_at, created_at, finished_at)
SELECT 'noop', '{}', CASE WHEN i %% 50 = 0 THEN 'failed' ELSE 'done' END, 1, t, t, t
FROM (SELECT i, now() - (now() - date_trunc('day', now()) + %(days)s * interval '1 day')
                       * i / (%(rows)s + 1) AS t
      FROM generate_series(1, %(rows)s) AS i) AS spread"""
LOAD_PENDING = """
INSERT INTO jobs (kind, payload) SELECT 'noop', '{}' FROM generate_series(1, %(rows)s)"""
SIZE = "SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('jobs')"
SIZE_FLAT = "SELECT pg_total_relation_size('jobs')"
# The oldest day's jobs, and the age that DELETE's cut-off (now() - age) puts at its end.
OLDEST_DAY = """
SELECT count(*), now() - (date_trunc('day', now()) - %(days)s * interval '1 day')
FROM jobs WHERE finished_at < date_trunc('day', now()) - %(days)s * interval '1 day'"""


def lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def timed(conn: psycopg.Connection[Any], work: Callable[[], Any]) -> dict[str, float]:
    """Seconds and WAL bytes of ``work``."""
    before, started = lsn(conn), time.perf_counter()
    work()
    return {"seconds": round(time.perf_counter() - started, 3), "wal_mb": mb(lsn(conn) - before)}


def mb(value: float) -> float:
    return round(value / 2**20, 1)


def ms_stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(s * 1000 for s in samples)
    return {
        "p50_ms": round(percentile(ordered, 50), 2),
        "p99_ms": round(percentile(ordered, 99), 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


def build(url: str, partitioned: bool, rows: int, pending: int) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        if partitioned:
            conn.execute(PARTITIONED.encode())
            for n in range(DAYS + 1):
                conn.execute(DAY_PARTITION.format(n=n).encode())
        else:
            conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = off)")
        load = timed(conn, lambda: conn.execute(LOAD_FINISHED, {"rows": rows, "days": DAYS}))
        conn.execute(LOAD_PENDING, {"rows": pending})
        conn.execute("VACUUM ANALYZE")
        size = conn.execute(SIZE if partitioned else SIZE_FLAT).fetchone()
        return {"load": load, "size_mb": mb(float(size[0]) if size and size[0] else 0.0)}


def claim_statement(partitioned: bool) -> LiteralString:
    """The fast claim as the layout can run it (CLAIM_BY_ID says why)."""
    return CLAIM_BY_ID if partitioned else claim_sql.JOBS_CLAIM


def claims_and_completions(
    conn: psycopg.Connection[Any], rounds: int, partitioned: bool
) -> dict[str, Any]:
    claim_times, complete_times = [], []
    before = lsn(conn)
    claimed = 0
    for _ in range(rounds):
        started = time.perf_counter()
        jobs = conn.execute(claim_statement(partitioned), CLAIM_PARAMS).fetchall()
        claim_times.append(time.perf_counter() - started)
        ids = "{" + ",".join(str(j[0]) for j in jobs) + "}"
        attempts = "{" + ",".join(str(j[3]) for j in jobs) + "}"
        started = time.perf_counter()
        conn.execute(outcome_sql.JOBS_COMPLETE, {"ids": ids, "attempts": attempts, "results": "{}"})
        complete_times.append(time.perf_counter() - started)
        claimed += len(jobs)
    return {
        "jobs": claimed,
        "claim_100": ms_stats(claim_times),
        "complete_100": ms_stats(complete_times),
        "wal_bytes_per_job": round((lsn(conn) - before) / max(claimed, 1), 1),
    }


def plan(conn: psycopg.Connection[Any], statement: LiteralString, params: Any) -> list[str]:
    """The plan's node lines (EXPLAIN without ANALYZE: nothing is changed)."""
    rows = conn.execute(b"EXPLAIN (COSTS OFF) " + statement.encode(), params).fetchall()
    return [str(r[0]) for r in rows]


# The worker's fast-path claim: every queue, none held back (paused or limited).
CLAIM_PARAMS = {"limit": 100, "lease": "5 minutes", "kinds": None, "queues": None, "held": []}


def dashboard(conn: psycopg.Connection[Any], repeat: int) -> dict[str, Any]:
    reads: dict[str, tuple[LiteralString, dict[str, Any]]] = {
        "overview_counts": (dashboard_sql.JOBS_OVERVIEW_COUNTS, {"cap": 10_000}),
        "finished_per_minute": (dashboard_sql.JOBS_FINISHED_PER_MINUTE, {}),
        "newest_50": (
            action_sql.JOBS_LIST,
            {"status": None, "kind": None, "limit": 50, "tag": None},
        ),
        "now_and_max_id": (dashboard_sql.UI_NOW, {}),
    }
    found = {}
    for name, (statement, params) in reads.items():
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            conn.execute(statement, params).fetchall()
            samples.append(time.perf_counter() - started)
        found[name] = ms_stats(samples)
    return found


def remove_oldest_day(conn: psycopg.Connection[Any], partitioned: bool) -> dict[str, Any]:
    oldest = conn.execute(OLDEST_DAY, {"days": DAYS - 1}).fetchone()
    assert oldest is not None
    rows, age = int(oldest[0]), oldest[1]
    if partitioned:
        last = DAYS

        def drop() -> None:
            conn.execute(f"ALTER TABLE jobs DETACH PARTITION jobs_d{last}".encode())
            conn.execute(f"DROP TABLE jobs_d{last}".encode())

        return {"rows": rows, "detach_drop": timed(conn, drop)}
    statuses = ["done", "failed", "cancelled"]

    def delete() -> None:
        params = {"statuses": statuses, "older_than": age, "batch": 1000}
        while conn.execute(purge_sql.JOBS_DELETE_FINISHED, params).rowcount:
            pass

    deleted = timed(conn, delete)
    vacuum = timed(conn, lambda: conn.execute("VACUUM jobs"))
    return {"rows": rows, "delete_batches": deleted, "vacuum_after": vacuum}


def measure(admin: str, partitioned: bool, args: argparse.Namespace) -> dict[str, Any]:
    layout = "partitioned" if partitioned else "flat"
    print(f"partitions: {layout}: loading {args.rows:,} rows", file=sys.stderr, flush=True)
    with database.fresh_database(admin, f"scale_{layout}") as url:
        found = build(url, partitioned, args.rows, args.pending)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET enable_bitmapscan = off")  # as the worker's sessions run
            # plans for these values, partitions pruned at planning (the worker's own,
            # of its plain table, are generic: worker.SESSION_SETTINGS)
            conn.execute("SET plan_cache_mode = force_custom_plan")
            found["plans"] = {
                "claim": plan(conn, claim_statement(partitioned), CLAIM_PARAMS),
                "retention_batch": plan(
                    conn,
                    purge_sql.JOBS_DELETE_FINISHED,
                    {"statuses": ["done"], "older_than": "6 days", "batch": 1000},
                ),
            }
            found["dashboard"] = dashboard(conn, args.repeat)
            found["claim"] = claims_and_completions(conn, args.claims, partitioned)
            found["remove_oldest_day"] = remove_oldest_day(conn, partitioned)
            found["dashboard_after"] = dashboard(conn, args.repeat)
    return {"layout": layout, **found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitions", description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000, help="finished jobs loaded")
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--claims", type=int, default=200, help="claims of 100 jobs")
    parser.add_argument("--repeat", type=int, default=20, help="runs of each dashboard read")
    args = parser.parse_args(argv)
    admin = database.admin_url()
    results = [measure(admin, partitioned, args) for partitioned in (False, True)]
    print(json.dumps({"rows": args.rows, "pending": args.pending, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
