"""``python -m bench.workflow_statements``: what one statement of a fan-out's drain costs
beside the same statement of independent jobs, on one connection with the worker's session
settings (docs/workflows.md, "The first step and the count-down, measured").

Rows:

- ``complete``: the completion of ``--batch`` running children of a fan-out (1 root,
  ``--children`` children, 1 summary; the root ended, so each statement counts the summary
  down) against the completion of as many running independent jobs, alternated;
- ``claim``: the claim of ``--batch`` held children where they are held (the root ended
  with a ready row, JOBS_CLAIM_READY) against the claim of as many due independent jobs
  (JOBS_CLAIM), alternated;
- ``root_end``: the statement that ends the root of a fresh fan-out, on a new connection
  and on one whose outcome session was warmed (sessions.warm_outcome_session).

Client wall times in ms (median, quartiles) of every statement after the first five.

    python -m bench.workflow_statements [--children 10000] [--batch 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from bench import database, machine
from bench.workflow_bench import fan_out
from pgbeat.db.pooler import session_options
from pgbeat.job import Job
from pgbeat.worker import operations
from pgbeat.worker.claiming import Claimer
from pgbeat.worker.ready_parents import ReadyParents
from pgbeat.worker.sessions import SESSION_SETTINGS, warm_outcome_session

LEASE = timedelta(minutes=5)
WARMUP = 5  # statements of each side left out of the figures
CHILDREN_OF_ROOT = """
UPDATE jobs SET status = 'running', attempts = 1, started_at = now(),
       locked_until = now() + interval '1 hour'
WHERE status = 'pending'
  AND (workflow_id IS NULL
       OR id IN (SELECT child_id FROM pgbeat_workflow_edges WHERE parent_id = %(root)s))"""


def summary(times: list[float]) -> dict[str, float]:
    kept = times[WARMUP:]
    quartiles = statistics.quantiles(kept, n=4)
    return {
        "median_ms": round(statistics.median(kept), 3),
        "p25_ms": round(quartiles[0], 3),
        "p75_ms": round(quartiles[2], 3),
        "statements": len(kept),
    }


def timed(action: Callable[..., Any], *args: Any) -> float:
    started = time.perf_counter()
    action(*args)
    return (time.perf_counter() - started) * 1000


def root_id(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT job_id FROM pgbeat_workflow_steps WHERE name = 'root'").fetchone()
    assert row is not None
    return int(row[0])


def measure_complete(url: str, children: int, batch: int) -> dict[str, Any]:
    """Completions of the fan-out's children against independent jobs', alternated."""
    options = session_options(url, SESSION_SETTINGS)
    with psycopg.connect(url, autocommit=True, options=options) as conn:
        pgbeat.enqueue_workflow(conn, fan_out(children))
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("plain", {"i": i}) for i in range(children)])
        root = root_id(conn)
        conn.execute("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", [root])
        conn.execute("DELETE FROM pgbeat_workflow_ready")  # the children: running, as claimed
        conn.execute(CHILDREN_OF_ROOT, {"root": root})
        conn.execute("VACUUM ANALYZE")
        steps = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM jobs WHERE status = 'running'"
                " AND workflow_id IS NOT NULL ORDER BY id"
            )
        ]
        plain = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM jobs WHERE status = 'running' AND workflow_id IS NULL ORDER BY id"
            )
        ]
        now = datetime.now(UTC)
        times: dict[str, list[float]] = {"children": [], "independent": []}
        for n, at in enumerate(range(0, children - batch, batch)):
            sides = [("children", steps), ("independent", plain)]
            for side, ids in sides if n % 2 else reversed(sides):
                jobs = [Job(i, "noop", {}, 1, 3, now, now, None) for i in ids[at : at + batch]]
                times[side].append(timed(operations.complete_jobs, conn, jobs))
    return {side: summary(values) for side, values in times.items()}


def measure_claim(url: str, children: int, batch: int) -> dict[str, Any]:
    """Claims of held children where they are held against claims of due jobs, alternated."""
    options = session_options(url, SESSION_SETTINGS)
    with psycopg.connect(url, autocommit=True, options=options) as conn:
        pgbeat.enqueue_workflow(conn, fan_out(children))
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("plain", {"i": i}) for i in range(children)])
        conn.execute("VACUUM ANALYZE")
        operations.complete_jobs(conn, Claimer(LEASE, ["noop"]).claim(conn, 1))  # the root
        ready, kids, plain = ReadyParents(), Claimer(LEASE, ["noop"]), Claimer(LEASE, ["plain"])
        times: dict[str, list[float]] = {"children": [], "independent": []}
        for n in range(children // batch - 2):
            sides: list[tuple[str, Callable[[], Any]]] = [
                ("children", lambda: ready.claim(conn, kids._params(batch))),
                ("independent", lambda: plain.claim(conn, batch)),
            ]
            for side, claim in sides if n % 2 else reversed(sides):
                times[side].append(timed(claim))
    return {side: summary(values) for side, values in times.items()}


def measure_root_end(url: str, children: int, rounds: int) -> dict[str, Any]:
    """The root's end on a new outcome connection, cold and warmed, alternated."""
    options = session_options(url, SESSION_SETTINGS)
    times: dict[str, list[float]] = {"cold": [], "warmed": []}
    for n in range(2 * rounds):
        side = "warmed" if n % 2 else "cold"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "TRUNCATE jobs, pgbeat_workflows, pgbeat_workflow_steps, pgbeat_workflow_edges,"
                " pgbeat_workflow_ready"
            )
            pgbeat.enqueue_workflow(conn, fan_out(children))
            conn.execute("VACUUM ANALYZE")
        with psycopg.connect(url, autocommit=True, options=options) as conn:
            if side == "warmed":
                warm_outcome_session(conn)
            root = Claimer(LEASE, ["noop"]).claim(conn, 1)
            times[side].append(timed(operations.complete_jobs, conn, root))
    return {side: [round(v, 2) for v in values] for side, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workflow_statements", description=__doc__
    )
    parser.add_argument("--children", type=int, default=10_000, help="fan-out width (10,000)")
    parser.add_argument("--batch", type=int, default=100, help="jobs a statement (100)")
    parser.add_argument("--rounds", type=int, default=3, help="root ends of each side (3)")
    args = parser.parse_args(argv)
    admin = database.admin_url()
    report: dict[str, Any] = {"load_average_1m_at_start": machine.load()}
    measures: dict[str, Callable[[str], Any]] = {
        "complete": lambda url: measure_complete(url, args.children, args.batch),
        "claim": lambda url: measure_claim(url, args.children, args.batch),
        "root_end": lambda url: measure_root_end(url, args.children, args.rounds),
    }
    for name, measure in measures.items():
        with database.fresh_database(admin, f"wf_statements_{name}") as url:
            with psycopg.connect(url, autocommit=True) as conn:
                pgbeat.apply_migrations(conn)
            report[name] = measure(url)
    report["load_average_1m_at_end"] = machine.load()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
