"""``python -m bench.statement_buffers``: what a plain drain's claims and completions cost the
server, per job, from ``pg_stat_statements`` (steadier than wall time on a shared machine).

A fresh database, ``--jobs`` plain jobs enqueued (with ``--fan-out``, a workflow of 1 root,
that many children and 1 summary), the statistics reset, one in-process Worker (100 slots)
drains them; then the top-level statements that update ``jobs`` (claims and completions,
with the workflow advance they call) are summed: shared buffers (hit + read + dirtied) and
execution time per job. Measures the pgbeat on
``PYTHONPATH``: for another revision, ``PYTHONPATH=<its src>:. python -m
bench.statement_buffers``. ``--without-trigger`` drops the workflow advance's row trigger
of migrations 0017-0032 where there is one. Needs a server with ``pg_stat_statements`` in
``shared_preload_libraries`` (DATABASE_URL); docs/workflows.md, "Plain jobs pay nothing".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import psycopg

import pgbeat
from bench import database, workflow_bench

SUMMED = """
SELECT coalesce(sum(total_exec_time), 0),
       coalesce(sum(shared_blks_hit + shared_blks_read + shared_blks_dirtied), 0)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND toplevel AND query ILIKE '%%UPDATE jobs%%'"""


def one_drain(jobs: int, trigger: bool, fan_out: bool = False) -> dict[str, float]:
    with workflow_bench.fresh(database.admin_url(), "statement_buffers", trigger=trigger) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

        def enqueue(conn: psycopg.Connection[Any]) -> None:
            if fan_out:
                pgbeat.enqueue_workflow(conn, workflow_bench.fan_out(jobs))
            else:
                workflow_bench.independent(jobs)(conn)
            conn.execute("SELECT pg_stat_statements_reset()")

        seconds = workflow_bench.drain(url, jobs + 2 if fan_out else jobs, enqueue)
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(SUMMED).fetchone()
    assert row is not None
    return {
        "seconds": seconds,
        "exec_ms_per_job": float(row[0]) / jobs,
        "buffers_per_job": float(row[1]) / jobs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.statement_buffers", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs drained (20,000)")
    parser.add_argument("--runs", type=int, default=4, help="drains (4)")
    parser.add_argument("--without-trigger", action="store_true", help="drop the advance trigger")
    parser.add_argument("--fan-out", action="store_true", help="a fan-out of --jobs children")
    args = parser.parse_args(argv)
    runs = [one_drain(args.jobs, not args.without_trigger, args.fan_out) for _ in range(args.runs)]
    report = {
        "jobs": args.jobs,
        "runs": [{k: round(v, 4) for k, v in run.items()} for run in runs],
        "buffers_per_job_median": round(statistics.median(r["buffers_per_job"] for r in runs), 2),
        "exec_ms_per_job_median": round(statistics.median(r["exec_ms_per_job"] for r in runs), 4),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
