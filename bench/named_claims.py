"""``python -m bench.named_claims``: what a limited claim costs the claiming thread sent as
named statements in one simple query (db/named_statements.py) against the same claim in
a pipeline, on one connection, the two alternated claim by claim (so the machine's load
weighs on both alike).

Two shapes on a fresh database: ``empty``, a concurrency-limited queue whose one slot is
taken (each claim locks the queue's row, reads its budget, 0, and takes nothing: the fixed
cost of a limited claim), and ``keyed``, 100 jobs of a ``key_concurrency = 1`` queue over
100 keys, each claimed and put back pending (a claim of 100 rows). Each reports the
claiming thread's CPU a claim (``time.thread_time``: pgbeat's and psycopg's work in the
client) and the claim's wall time, medians after a warm-up. docs/benchmarks.md quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from bench import database, machine
from bench.report import save_report
from pgbeat.db.kept_cursor import KeptCursor
from pgbeat.db.named_statements import NamedStatements
from pgbeat.db.pooler import session_options
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.worker.locked_claim import claim_locked
from pgbeat.worker.sessions import SESSION_SETTINGS

WARM_UP = 100  # claims of each way not counted (plans made, caches filled): --warm-up
PUT_BACK = (
    "UPDATE jobs SET status = 'pending', attempts = 0, locked_until = NULL, started_at = NULL"
    " WHERE status = 'running' AND queue = 'keyed'"
)


def plant(conn: psycopg.Connection[Any]) -> None:
    """Queue ``full`` (concurrency 1, its slot taken) and ``keyed`` (100 keys, 1 each)."""
    pgbeat.apply_migrations(conn)
    pgbeat.configure_queue(conn, "full", concurrency=1)
    pgbeat.configure_queue(conn, "keyed", key_concurrency=1)
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", {}, queue="full") for _ in range(2)])
    pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("noop", {}, queue="keyed", limit_key=f"k{i}") for i in range(100)]
    )
    conn.execute(
        "UPDATE jobs SET status = 'running', attempts = 1, started_at = now(),"
        " locked_until = now() + interval '1 hour'"
        " WHERE id = (SELECT min(id) FROM jobs WHERE queue = 'full')"
    )
    conn.execute("VACUUM ANALYZE jobs")


def measure(url: str, claims: int, warm_up: int = WARM_UP) -> dict[str, Any]:
    """Alternate the two ways, claim by claim, in both shapes; medians per way and shape."""
    found: dict[str, Any] = {}
    lease = timedelta(minutes=5)
    with (
        psycopg.connect(url, autocommit=True, options=session_options(url, SESSION_SETTINGS))
        as conn,
        psycopg.connect(url, autocommit=True) as other,
    ):  # fmt: skip
        kept, named = KeptCursor(), NamedStatements()
        shapes = {
            "empty": (limited_sql.JOBS_CLAIM_LIMITED, "full", 0),
            "keyed": (limited_sql.JOBS_CLAIM_LIMITED_HEAD, "keyed", 100),
        }
        for shape, (statement, queue, expect) in shapes.items():
            params = {"queue": queue, "limit": 100, "lease": lease, "kinds": None, "scan": 128}
            times: dict[str, list[tuple[float, float]]] = {"pipelined": [], "named": []}
            for i in range(warm_up + claims):
                order = ("pipelined", "named") if i % 2 else ("named", "pipelined")
                for way in order:
                    cpu, wall = time.thread_time(), time.perf_counter()
                    rows, _ = claim_locked(
                        conn, statement, params, kept, named if way == "named" else None
                    )
                    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
                    if len(rows) != expect:
                        raise RuntimeError(f"{shape} {way}: claimed {len(rows)}, not {expect}")
                    if expect:
                        other.execute(PUT_BACK)
                    if i >= warm_up:
                        times[way].append((cpu, wall))
            for way, pairs in times.items():
                found[f"{shape}_{way}"] = {
                    "loop_cpu_us": round(1e6 * statistics.median(c for c, _ in pairs), 1),
                    "wall_us": round(1e6 * statistics.median(w for _, w in pairs), 1),
                }
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.named_claims", description=__doc__)
    parser.add_argument("--claims", type=int, default=2000, help="of each way and shape")
    parser.add_argument("--warm-up", type=int, default=WARM_UP, help="claims not counted")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "command": ["python", "-m", "bench.named_claims", *sys.argv[1:]],
        "revision": machine.source_revision(machine.REPO_ROOT),
        "load_average_1m_at_start": machine.load(),
    }
    with database.fresh_database(database.admin_url(), "named_claims") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            plant(conn)
        report["claims"] = measure(url, args.claims, args.warm_up)
    report["load_average_1m_at_end"] = machine.load()
    for name, one in report["claims"].items():
        print(f"{name:16} loop CPU {one['loop_cpu_us']:7.1f} µs  wall {one['wall_us']:7.1f} µs")
    save_report(report, "named-claims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
