"""How fast `pgbeat jobs list --tag T` and the dashboard's tag filter answer on a large
jobs table (the jobs_tags index, migration 0016).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test python -m bench.tags_bench

Fills a fresh database with --rows finished jobs (inserted by SQL, as history would
leave them): a tenth tagged `tenant:<n>` over 1,000 tenants (a rare tag: ~500 jobs each at
5,000,000 rows), a twentieth also `billing` (a common tag), the rest untagged. Then, for
each tag, the median of 5 runs of the CLI's statement (reads.list_jobs, 50 rows) and of
the dashboard's first page (ui/jobs_data.jobs_page: 50 rows and the capped count).
docs/tags.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import psycopg

import pgbeat
from bench import database, machine
from pgbeat.jobs import reads
from pgbeat.ui import jobs_data
from pgbeat.ui.filters import JobFilter

FILL = """
INSERT INTO jobs (kind, payload, status, attempts, run_at, created_at, finished_at, tags)
SELECT 'report', '{}', 'done', 1, now() - n * interval '1 ms', now() - n * interval '1 ms',
       now() - n * interval '1 ms',
       CASE WHEN n %% 20 = 0 THEN ARRAY['tenant:' || (n / 20) %% 1000, 'billing']
            WHEN n %% 10 = 0 THEN ARRAY['tenant:' || (n / 10) %% 1000] END
FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS n"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median_ms(call: Any, runs: int = 5) -> float:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return round(statistics.median(seconds) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tags_bench", description=__doc__)
    parser.add_argument("--rows", type=int, default=5_000_000)
    args = parser.parse_args()
    admin = database.admin_url()
    results: dict[str, Any] = {"rows": args.rows, "load_before": machine.load()}
    with (
        database.fresh_database(admin, "tags") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        pgbeat.apply_migrations(conn)
        started = time.monotonic()
        for start in range(1, args.rows + 1, 500_000):
            stop = min(args.rows, start + 499_999)
            conn.execute(FILL, {"start": start, "stop": stop})
            log(f"{stop:,} rows")
        conn.execute("VACUUM ANALYZE jobs")
        results["fill_seconds"] = round(time.monotonic() - started, 1)
        for tag in ("tenant:7", "billing", "absent"):
            results[tag] = {
                "jobs list --tag (ms)": median_ms(
                    lambda tag=tag: reads.list_jobs(conn, status=None, kind=None, limit=50, tag=tag)
                ),
                "dashboard page (ms)": median_ms(
                    lambda tag=tag: jobs_data.jobs_page(
                        conn, JobFilter(tag=tag), None, jobs_data.clock(conn)[1], None
                    )
                ),
            }
    results["load_after"] = machine.load()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
