"""The statements behind the Prometheus queue gauges, each reading a bounded number of rows.

A scrape must stay cheap on a table of millions of jobs: nothing here reads the whole
table unless it holds at most ``cap`` rows. Beyond that, pending, running and failed jobs
are counted up to the cap through their partial indexes, and the rest is estimated from a
random sample of the table's pages.
"""

from __future__ import annotations

from typing import LiteralString

# How many rows jobs holds, counting no further than %(cap)s + 1 (reads at most that many).
JOBS_COUNT_UP_TO: LiteralString = """
SELECT count(*) FROM (SELECT FROM jobs LIMIT %(cap)s::bigint + 1) AS first_rows"""

# Jobs by status and kind: a full scan, run only on a table of at most cap rows.
JOBS_DEPTH_ALL: LiteralString = "SELECT status, kind, count(*) FROM jobs GROUP BY status, kind"

# Pending, running and failed jobs by kind, reading at most %(cap)s rows of each status
# (jobs_ready, jobs_running, jobs_failed_id: the partial indexes of those states).
JOBS_DEPTH_ACTIVE: LiteralString = """
SELECT 'pending', kind, count(*)
FROM (SELECT kind FROM jobs WHERE status = 'pending' LIMIT %(cap)s) AS pending GROUP BY kind
UNION ALL
SELECT 'running', kind, count(*)
FROM (SELECT kind FROM jobs WHERE status = 'running' LIMIT %(cap)s) AS running GROUP BY kind
UNION ALL
SELECT 'failed', kind, count(*)
FROM (SELECT kind FROM jobs WHERE status = 'failed' LIMIT %(cap)s) AS failed GROUP BY kind"""

# The size of jobs in pages, of which a sample takes a percentage.
JOBS_PAGES: LiteralString = """
SELECT pg_relation_size('jobs'::regclass) / current_setting('block_size')::bigint"""

# Jobs by status and kind among the rows of a random %(percent)s percent of the table's
# pages (TABLESAMPLE SYSTEM reads only those pages).
JOBS_DEPTH_SAMPLE: LiteralString = """
SELECT status, kind, count(*) FROM jobs TABLESAMPLE SYSTEM (%(percent)s) GROUP BY status, kind"""

# How long the oldest due, unclaimed job has waited (jobs_ready: the index's first entry).
JOBS_OLDEST_DUE_AGE: LiteralString = """
SELECT extract(epoch FROM now() - min(run_at))::float8 FROM jobs
WHERE status = 'pending' AND run_at <= now()"""

# How long ago the oldest finished job finished, for the metrics gauge (jobs_finished).
JOBS_OLDEST_FINISHED_AGE: LiteralString = """
SELECT extract(epoch FROM now() - min(finished_at))::float8 FROM jobs
WHERE finished_at IS NOT NULL"""
