"""The dashboard's reads of jobs.

Every statement reads a bounded set of rows through an index: a status's partial index
(``jobs_ready``, ``jobs_running``, ``jobs_failed_*``), the finished-time index, or the
primary key in a bounded id range. Counts stop at ``cap + 1`` rows. The dashboard's
connections run under a statement timeout. Optional filters are written
``(%(x)s IS NULL OR ...)``: the dashboard never prepares statements, so PostgreSQL plans
each one with its values and drops the unused tests.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

from pgbeat.db.sql.jobs.actions import _ERROR_LINE  # one rule for a listed job's error

# -- clock and newest job ---------------------------------------------------------------------

# The database clock and the largest job id (primary key, one probe).
UI_NOW: LiteralString = "SELECT now(), (SELECT max(id) FROM jobs)"

# -- overview --------------------------------------------------------------------------------

# Job counts by state, each capped at %(cap)s + 1 rows: due, scheduled, and among those the
# workflow steps held for their parents (run_at 9999-12-29: in no queue yet) (jobs_ready),
# running (jobs_running), failed (jobs_failed_id), done in 24 h (jobs_finished).
JOBS_OVERVIEW_COUNTS: LiteralString = """
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'pending' AND run_at <= now()
                         LIMIT %(cap)s + 1) AS due) AS due,
  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'pending' AND run_at > now()
                         LIMIT %(cap)s + 1) AS later) AS scheduled,
  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'pending'
                           AND run_at = '9999-12-29 00:00:00+00'
                         LIMIT %(cap)s + 1) AS held) AS held,
  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'running'
                         LIMIT %(cap)s + 1) AS r) AS running,
  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'failed'
                         LIMIT %(cap)s + 1) AS f) AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE finished_at > now() - interval '24 hours'
                           AND status = 'done' LIMIT %(cap)s + 1) AS d) AS done_24h,
  (SELECT extract(epoch FROM now() - min(run_at))::float8 FROM jobs
    WHERE status = 'pending' AND run_at <= now()) AS oldest_due_s"""

# Jobs finished per minute over the last hour, by outcome (jobs_finished range scan).
JOBS_FINISHED_PER_MINUTE: LiteralString = """
SELECT floor(extract(epoch FROM now() - finished_at) / 60)::int AS minutes_ago,
       count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM jobs
WHERE finished_at > now() - interval '60 minutes'
GROUP BY 1"""

# -- jobs list -------------------------------------------------------------------------------

# The job filters of the list, its count, and the bulk actions. %(floor)s bounds a search
# that no partial index narrows to the newest ids (primary key range). A tag is found
# through jobs_tags (GIN): tags @> ARRAY[tag] implies its predicate.
_JOBS_FILTER = sql.SQL("""
    (%(status)s::text IS NULL OR status = %(status)s::text)
AND (%(due)s::boolean IS NULL OR (run_at <= now()) = %(due)s::boolean)
AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
AND (%(key_like)s::text IS NULL OR unique_key LIKE %(key_like)s::text)
AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
AND (%(id)s::bigint IS NULL OR id = %(id)s::bigint)
AND (%(created_from)s::timestamptz IS NULL OR created_at >= %(created_from)s::timestamptz)
AND (%(created_to)s::timestamptz IS NULL OR created_at < %(created_to)s::timestamptz)
AND (%(finished_from)s::timestamptz IS NULL OR finished_at >= %(finished_from)s::timestamptz)
AND (%(finished_to)s::timestamptz IS NULL OR finished_at < %(finished_to)s::timestamptz)
AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb)
AND (%(error_like)s::text IS NULL OR (status = 'failed' AND last_error ILIKE %(error_like)s::text))
AND (%(signature)s::text IS NULL OR pgbeat_error_signature(last_error) = %(signature)s::text)
AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
AND (%(priority)s::smallint IS NULL OR priority = %(priority)s::smallint)
AND (%(limit_key)s::text IS NULL OR limit_key = %(limit_key)s::text)
AND (%(tag)s::text IS NULL OR tags @> ARRAY[%(tag)s::text])
AND (%(workflow)s::bigint IS NULL
     OR id = ANY(ARRAY(SELECT job_id FROM pgbeat_workflow_steps
                       WHERE workflow_id = %(workflow)s::bigint)))
AND (%(floor)s::bigint IS NULL OR id >= %(floor)s::bigint)
AND (%(max_id)s::bigint IS NULL OR id <= %(max_id)s::bigint)""")

# One page of matching jobs, newest first, strictly below the %(before)s cursor (keyset on
# the primary key or a status's partial index on id).
JOBS_PAGE = sql.SQL("""
SELECT id, kind, status, attempts, max_attempts, run_at, created_at, finished_at,
       unique_key, {error_line},
       locked_until, payload, tags
FROM jobs
WHERE {filter} AND (%(before)s::bigint IS NULL OR id < %(before)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s""").format(filter=_JOBS_FILTER, error_line=sql.SQL(_ERROR_LINE))

# How many jobs match, stopping at %(cap)s + 1.
JOBS_COUNT_MATCHING = sql.SQL("""
SELECT count(*) FROM (SELECT 1 FROM jobs WHERE {filter} LIMIT %(cap)s + 1) AS matching
""").format(filter=_JOBS_FILTER)

# -- actions: the ids an all-matching action runs on (pgbeat/jobs/actions.py acts on them) ---------

# Every job matching the filter, never above %(max_id)s (the newest id when the operator
# confirmed): the action's own statement then re-checks each one's status.
JOBS_MATCHING_IDS = sql.SQL("""
SELECT id FROM jobs WHERE {filter} ORDER BY id""").format(filter=_JOBS_FILTER)

# -- job detail ------------------------------------------------------------------------------

# Every column of one job, including those later migrations add (primary key).
JOBS_DETAIL: LiteralString = "SELECT * FROM jobs WHERE id = %(id)s"

# -- failures --------------------------------------------------------------------------------

# Failed jobs of the window grouped by kind and error signature, over the newest %(cap)s
# failures only (jobs_failed_finished, newest first).
JOBS_FAILURE_GROUPS: LiteralString = """
SELECT kind, signature, count(*) AS failures, min(finished_at) AS first_seen,
       max(finished_at) AS last_seen, max(id) AS example_id
FROM (
    SELECT kind, pgbeat_error_signature(last_error) AS signature, finished_at, id
    FROM jobs
    WHERE status = 'failed' AND finished_at >= now() - %(window)s::interval
    ORDER BY finished_at DESC
    LIMIT %(cap)s
) AS recent
GROUP BY kind, signature
ORDER BY failures DESC, last_seen DESC
LIMIT 200"""

# -- a queue's busy limit keys (a read of jobs alone: here, not in ../queues.py) -------------

# The limit keys of a queue that hold at least one running job, busiest first
# (jobs_running): which keys are saturated, for the dashboard.
QUEUES_RUNNING_KEYS: LiteralString = """
SELECT limit_key, count(*) FROM jobs
WHERE status = 'running' AND queue = %(name)s AND limit_key IS NOT NULL
GROUP BY limit_key ORDER BY count(*) DESC, limit_key LIMIT %(limit)s"""

# -- throughput and performance ----------------------------------------------------------------

# Jobs finished per hour over the last 24 hours: each hour's finished jobs counted by an
# index-only range scan of jobs_finished, its failed ones by jobs_failed_finished (no heap
# visit for either; about 700,000 index entries for 700,000 jobs a day).
JOBS_FINISHED_PER_HOUR: LiteralString = """
SELECT h.hours_ago,
       (SELECT count(*) FROM jobs
         WHERE finished_at > now() - (h.hours_ago + 1) * interval '1 hour'
           AND finished_at <= now() - h.hours_ago * interval '1 hour') AS finished,
       (SELECT count(*) FROM jobs
         WHERE status = 'failed' AND finished_at > now() - (h.hours_ago + 1) * interval '1 hour'
           AND finished_at <= now() - h.hours_ago * interval '1 hour') AS failed
FROM generate_series(0, 23) AS h(hours_ago)"""

# Per kind, over the newest %(cap)s jobs finished in the window (jobs_finished, newest first):
# counts by outcome, retries (attempts beyond the first), the durations of its runs and the
# queue wait of its last run, and the scan's oldest finish time and size. A run's duration
# is a done job's last run (finished_at - started_at, from the rows already scanned) or an
# attempt the workers recorded (retries, failures, snoozes, cancels; not releases:
# pgbeat_job_attempts_job, probed for the jobs that had more than one attempt or failed,
# the only ones with rows). The wait (started_at - run_at) is of done and failed jobs only:
# a cancelled one may not have run since its last start (migration 0013); a start before
# run_at (due again after the reaper, then completed by its first worker) counts as none.
# Rows finished before migration 0013 have no start and count in neither. The jobs and the
# attempts are one stream (`job` tells them apart), sorted and grouped once. Seconds come
# from date_part (float8): extract's numeric made the statement slower (docs/benchmarks.md).
# greatest() ignores a NULL, hence the explicit test of started_at.
JOBS_PERFORMANCE_BY_KIND: LiteralString = """
WITH recent AS MATERIALIZED (
    SELECT id, kind, status, attempts, run_at, started_at, finished_at
    FROM jobs
    WHERE finished_at > now() - %(window)s::interval
    ORDER BY finished_at DESC
    LIMIT %(cap)s
), timed AS (
    SELECT true AS job, kind, status, attempts, finished_at,
           CASE WHEN status = 'done' THEN date_part('epoch', finished_at - started_at)
           END AS duration_s,
           CASE WHEN status IN ('done', 'failed') AND started_at IS NOT NULL
                THEN greatest(date_part('epoch', started_at - run_at), 0) END AS wait_s
    FROM recent
    UNION ALL
    SELECT false, r.kind, NULL, NULL, NULL, a.duration_s, NULL
    FROM pgbeat_job_attempts AS a JOIN recent AS r ON r.id = a.job_id
    WHERE a.job_id = ANY(ARRAY(SELECT id FROM recent WHERE attempts > 1 OR status = 'failed'))
      AND a.duration_s IS NOT NULL AND a.outcome <> 'released'
)
SELECT kind, count(*) FILTER (WHERE job) AS finished,
       count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
       coalesce(sum(greatest(attempts - 1, 0)), 0) AS retries,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_s) AS duration_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_s) AS duration_p95,
       max(duration_s) AS duration_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY wait_s) AS wait_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY wait_s) AS wait_p95,
       min(min(finished_at)) OVER () AS scanned_from,
       sum(count(*) FILTER (WHERE job)) OVER () AS scanned
FROM timed
GROUP BY kind
ORDER BY finished DESC, kind
LIMIT 2000"""

# One kind over time: the same durations and waits per bucket of %(bucket_s)s seconds
# (0 = newest), over the newest %(cap)s jobs finished in the window (jobs_finished), then
# those of the kind.
JOBS_PERFORMANCE_OF_KIND: LiteralString = """
WITH recent AS MATERIALIZED (
    SELECT id, kind, status, attempts, run_at, started_at, finished_at
    FROM jobs
    WHERE finished_at > now() - %(window)s::interval
    ORDER BY finished_at DESC
    LIMIT %(cap)s
), mine AS (
    SELECT *, floor(extract(epoch FROM now() - finished_at) / %(bucket_s)s)::int AS bucket
    FROM recent WHERE kind = %(kind)s
), timed AS (
    SELECT bucket, status,
           CASE WHEN status = 'done' THEN date_part('epoch', finished_at - started_at)
           END AS duration_s,
           CASE WHEN status IN ('done', 'failed') AND started_at IS NOT NULL
                THEN greatest(date_part('epoch', started_at - run_at), 0) END AS wait_s
    FROM mine
    UNION ALL
    SELECT m.bucket, NULL, a.duration_s, NULL
    FROM pgbeat_job_attempts AS a JOIN mine AS m ON m.id = a.job_id
    WHERE a.job_id = ANY(ARRAY(SELECT id FROM mine WHERE attempts > 1 OR status = 'failed'))
      AND a.duration_s IS NOT NULL AND a.outcome <> 'released'
)
SELECT bucket, count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_s) AS duration_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_s) AS duration_p95,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY wait_s) AS wait_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY wait_s) AS wait_p95
FROM timed
GROUP BY bucket"""
