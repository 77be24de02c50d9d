"""An operator's statements on jobs, shared by the CLI and the dashboard: counts, the
summary, list and show, the checks of ``pgbeat status``, and the actions on ids (retry,
cancel, run now, delete)."""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.ended_steps import _ADVANCED, _CANCEL_SET, _CANCEL_TOLD

# -- administration -------------------------------------------------------------------------

# Job counts by status and kind (a full scan: an operator's command, not a hot path).
JOBS_COUNT_BY_STATUS_KIND: LiteralString = """
SELECT status, kind, count(*) FROM jobs GROUP BY status, kind ORDER BY status, kind"""

# The queue's health in one row: due-but-unclaimed jobs and the oldest one's wait (jobs_ready),
# and failures in the last hour.
JOBS_SUMMARY: LiteralString = """
SELECT
    (SELECT count(*) FROM jobs WHERE status = 'pending' AND run_at <= now()),
    (SELECT extract(epoch FROM now() - min(run_at))::float8
       FROM jobs WHERE status = 'pending' AND run_at <= now()),
    (SELECT count(*) FROM jobs
       WHERE status = 'failed' AND finished_at > now() - interval '1 hour')"""

# A listed job's error line, for every face (pgbeat/jobs/reads.py): the first line of its
# last error, at most 200 characters. The dashboard's JOBS_PAGE takes it too.
_ERROR_LINE: LiteralString = (
    "left(split_part(coalesce(last_error, ''), E'\\n', 1), 200) AS error_line"
)

# The newest jobs, optionally of one status and kind (primary key, newest first).
JOBS_LIST: LiteralString = (
    """
SELECT id, kind, status, attempts, max_attempts, snoozes, run_at, created_at, finished_at,
       unique_key, job_key, last_error, tags, """
    + _ERROR_LINE
    + """
FROM jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(tag)s::text IS NULL OR tags @> ARRAY[%(tag)s::text])
ORDER BY id DESC
LIMIT %(limit)s"""
)

# Pending jobs by kind and queue, to tell which no live worker claims (a scan of the
# pending rows: an operator's command).
JOBS_PENDING_KINDS: LiteralString = """
SELECT kind, queue, count(*) FROM jobs WHERE status = 'pending'
GROUP BY kind, queue ORDER BY kind, queue"""

# Which of these unique keys exist (jobs_unique), to tell a missed period from an enqueued one.
JOBS_EXISTING_KEYS: LiteralString = """
SELECT kind, unique_key FROM jobs
WHERE (kind, unique_key) IN (SELECT * FROM unnest(%(kinds)s::text[], %(keys)s::text[]))"""

# -- operators' actions: one statement each, which the CLI and the dashboard both run -----
# (pgbeat/jobs/actions.py). Each takes ids and re-checks the status in its WHERE clause, so a job
# whose status changed since the operator looked is skipped, never acted on.

# Retry: jobs that are not running back to pending, due now, attempts reset (primary key).
# Of the given jobs of one job_key only the newest, and none whose key another live job
# holds (jobs_live_key): a key has one live job. A running job is its worker's. Announced
# on pgbeat_jobs as an enqueue is (one notification at commit, however many rows): an
# UPDATE fires no insert trigger, and a worker resting a limited queue that ran dry would
# otherwise not look at it again until its next notification.
JOBS_RETRY: LiteralString = """
UPDATE jobs AS j
SET status = 'pending', attempts = 0, run_at = now(), locked_until = NULL, finished_at = NULL,
    superseded_at = NULL, cancel_requested_at = NULL, result = NULL
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status <> 'running'
  AND (j.job_key IS NULL OR NOT EXISTS (
      SELECT FROM jobs AS other
      WHERE other.kind = j.kind AND other.job_key = j.job_key AND other.id <> j.id
        AND ((other.superseded_at IS NULL AND other.status IN ('pending', 'running'))
             OR (other.id > j.id AND other.id = ANY(%(ids)s::bigint[])))))
RETURNING id, pg_notify(pgbeat_channel('pgbeat_jobs'), '')"""

# The failed jobs (of one kind, if given) that `jobs retry --failed` puts back, oldest
# first, and how many failed jobs there are: of the failed jobs of one job_key only the
# newest, since a key has one live job. Sorts the failed jobs: an operator's command.
JOBS_FAILED_TO_RETRY: LiteralString = """
SELECT coalesce(array_agg(id ORDER BY id) FILTER (WHERE newest), '{}'), count(*)
FROM (
    SELECT id, job_key IS NULL
               OR row_number() OVER (PARTITION BY kind, job_key ORDER BY id DESC) = 1 AS newest
    FROM jobs
    WHERE status = 'failed' AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
) AS failed"""

# Cancel (primary key): a pending job is cancelled at once; a running one is asked to stop
# (cancel_requested_at), and NOTIFY pgbeat_cancel, payload the job's id, tells its worker at
# commit; its outcome then ends it cancelled. Who or why goes to last_error. Returns each
# job's status after it (cancelled, or running: told to stop); no row: the job is not live.
# A cancelled workflow step advances its workflow (ended_steps.py).
JOBS_CANCEL: LiteralString = (
    _CANCEL_SET
    + """
    WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('pending', 'running')"""
    + _CANCEL_TOLD
    + _ADVANCED
    + """
SELECT id, status, notified FROM ended, advanced"""
)

# Run now: pending jobs due now (primary key), announced as JOBS_RETRY's are (a worker
# waits for a resting queue's next due job by its old run_at).
JOBS_RUN_NOW: LiteralString = """
UPDATE jobs SET run_at = now()
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending'
RETURNING id, pg_notify(pgbeat_channel('pgbeat_jobs'), '')"""

# Delete: finished (done, failed, cancelled) jobs, gone with their record (primary key).
JOBS_DELETE: LiteralString = """
DELETE FROM jobs WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('done', 'failed', 'cancelled')
RETURNING id"""

# Which live job holds a key, to explain a refused retry (jobs_live_key).
JOBS_KEY_HOLDER: LiteralString = """
SELECT live.id, live.job_key FROM jobs AS j JOIN jobs AS live
    ON live.kind = j.kind AND live.job_key = j.job_key AND live.id <> j.id
   AND live.superseded_at IS NULL AND live.status IN ('pending', 'running')
WHERE j.id = %(id)s"""

# The status of one job, to explain a refused retry or cancel (primary key).
JOBS_STATUS: LiteralString = "SELECT status FROM jobs WHERE id = %(id)s"
