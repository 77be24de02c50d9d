"""Every SQL statement pgbeat runs, named TABLE_VERB, with ``%(name)s`` parameters.

Statements that decide on time use the database clock (``now()``) or take ``now`` as a
parameter, never a replica's clock. Each carries one comment: what it does, which index.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

# -- database clock -----------------------------------------------------------------------

# The database's clock: the one time every replica agrees on.
DATABASE_NOW: LiteralString = "SELECT now()"

# -- migrations ---------------------------------------------------------------------------

# Serialises `pgbeat migrate` across processes until the end of the transaction (a
# transaction-level advisory lock: safe behind a transaction pooler, never left held).
MIGRATIONS_LOCK: LiteralString = "SELECT pg_advisory_xact_lock(%(key)s)"

# Where applied migrations are recorded.
MIGRATIONS_CREATE_TABLE: LiteralString = """
CREATE TABLE IF NOT EXISTS pgbeat_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""

# Versions already applied (primary key).
MIGRATIONS_APPLIED: LiteralString = "SELECT version FROM pgbeat_migrations ORDER BY version"

# Whether pgbeat_migrations exists yet (before the first migrate it does not).
MIGRATIONS_TABLE_EXISTS: LiteralString = "SELECT to_regclass('pgbeat_migrations') IS NOT NULL"

# Records one applied migration, in the migration's own transaction.
MIGRATIONS_RECORD: LiteralString = (
    "INSERT INTO pgbeat_migrations (version, name) VALUES (%(version)s, %(name)s)"
)

# The same record in `pgbeat migrate --print`'s script, where values are literals.
MIGRATIONS_RECORD_SCRIPT = sql.SQL(
    "INSERT INTO pgbeat_migrations (version, name) VALUES ({version}, {name}) "
    "ON CONFLICT DO NOTHING;"
)

# -- enqueue ------------------------------------------------------------------------------

# Inserts one job; a duplicate (kind, unique_key) inserts nothing and returns no row (jobs_unique).
JOBS_INSERT: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, queue, priority, limit_key,
                  meta)
VALUES (%(kind)s, %(payload)s,
        coalesce(%(run_at)s::timestamptz, now() + %(delay)s::interval),
        %(unique_key)s, %(max_attempts)s, %(queue)s, %(priority)s, %(limit_key)s,
        %(meta)s::jsonb)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id"""

# Inserts many jobs in one statement from parallel arrays; duplicates are skipped (jobs_unique).
# A job without run_at runs its delay (seconds, 0 if none) after the database's now().
# meta (the caller's trace context) is the same for every job of the call.
JOBS_INSERT_MANY: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, queue, priority, limit_key,
                  meta)
SELECT kind, payload, coalesce(run_at, now() + delay_seconds * interval '1 second'),
       unique_key, max_attempts, queue, priority, limit_key,
       %(meta)s::jsonb
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[], %(run_ats)s::timestamptz[],
            %(delay_seconds)s::float8[], %(unique_keys)s::text[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[])
     AS new_job(kind, payload, run_at, delay_seconds, unique_key, max_attempts,
                queue, priority, limit_key)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id"""

# -- worker -------------------------------------------------------------------------------

# Leases up to %(limit)s due jobs in claim order (higher priority first, then run_at, then
# id), skipping rows other workers hold (jobs_claim_order: the head of the index, no sort).
# Queues that are paused or limited are left to JOBS_CLAIM_LIMITED: the scan skips those
# the worker saw last (%(held)s, a constant the planner can estimate; a subquery there made
# it expect almost no rows and sort the backlog), and the update re-checks pgbeat_queues,
# so a queue paused or limited since is never claimed here. The lease and the run's start
# (started_at, migration 0013) are set and committed at once: no lock outlives this
# statement. `id = ANY(ARRAY(...))` keeps the plan a primary-key lookup even before ANALYZE
# has seen the table (a join here turned into a sequential scan per claim on a fresh
# table). Dates outside years 1-9999 come back NULL and the payload as text: the worker
# decodes each row alone, so one row the driver could not read fails alone instead of
# every claim.
JOBS_CLAIM: LiteralString = """
UPDATE jobs
SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval,
    started_at = now()
WHERE id = ANY(ARRAY(
    SELECT id FROM jobs
    WHERE status = 'pending' AND run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
      AND queue <> ALL(%(held)s::text[])
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
))
  AND queue <> ALL(ARRAY(
      SELECT name FROM pgbeat_queues
      WHERE paused OR concurrency IS NOT NULL OR key_concurrency IS NOT NULL
         OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL))
RETURNING id, kind, payload::text AS payload, attempts, max_attempts,
          CASE WHEN run_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN run_at END AS run_at,
          CASE WHEN created_at BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'
               THEN created_at END AS created_at,
          unique_key, queue, priority, limit_key, job_key"""

# Fails claimed rows the worker could not decode (a date outside years 1-9999, a payload
# nested too deeply for Python), each with its reason (primary key).
JOBS_FAIL_UNREADABLE: LiteralString = """
UPDATE jobs
SET status = 'failed', locked_until = NULL, finished_at = now(),
    last_error = (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)]
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'"""

# Subscribes to the notifications of migrations/0002's insert trigger.
JOBS_LISTEN: LiteralString = "LISTEN pgbeat_jobs"

# Seconds until the next pending job the fast claim may take falls due, by the database
# clock, so an idle worker wakes when a delayed job becomes due (jobs_ready). Asked after a
# fast claim found nothing: the jobs due before it are those of the paused and limited
# queues the worker saw (%(held)s), so the scan starts 5 s back (a job that fell due
# between the claim and this look comes back negative: claim again) and never walks a paused
# queue's backlog. JOBS_SECONDS_TO_NEXT_LIMITED covers the limited queues.
JOBS_SECONDS_TO_NEXT: LiteralString = """
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM jobs
WHERE status = 'pending' AND run_at > now() - interval '5 seconds'
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
  AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
  AND queue <> ALL(%(held)s::text[])"""

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

# The newest jobs, optionally of one status and kind (primary key, newest first).
JOBS_LIST: LiteralString = """
SELECT id, kind, status, attempts, max_attempts, run_at, created_at, finished_at,
       unique_key, job_key, last_error
FROM jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
ORDER BY id DESC
LIMIT %(limit)s"""

# Everything about one job (primary key).
JOBS_SHOW: LiteralString = """
SELECT id, kind, status, attempts, max_attempts, run_at, created_at, started_at, finished_at,
       unique_key, job_key, superseded_at, cancel_requested_at, last_error, payload,
       locked_until, keep_until, result
FROM jobs WHERE id = %(id)s"""

# -- operators' actions: one statement each, which the CLI and the dashboard both run -----
# (jobs/actions.py). Each takes ids and re-checks the status in its WHERE clause, so a job
# whose status changed since the operator looked is skipped, never acted on.

# Retry: jobs that are not running back to pending, due now, attempts reset (primary key).
# Of the given jobs of one job_key only the newest, and none whose key another live job
# holds (jobs_live_key): a key has one live job. A running job is its worker's.
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
RETURNING id"""

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
JOBS_CANCEL: LiteralString = """
UPDATE jobs
SET status = CASE status WHEN 'pending' THEN 'cancelled' ELSE status END,
    finished_at = CASE status WHEN 'pending' THEN now() ELSE finished_at END,
    cancel_requested_at = CASE status WHEN 'running' THEN coalesce(cancel_requested_at, now())
                          ELSE cancel_requested_at END,
    last_error = CASE WHEN status = 'pending' OR cancel_requested_at IS NULL THEN %(reason)s
                      ELSE last_error END
WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('pending', 'running')
RETURNING id, status,
          pg_notify(CASE status WHEN 'running' THEN 'pgbeat_cancel' ELSE 'pgbeat_finished' END,
                    id::text)"""

# Run now: pending jobs due now (primary key).
JOBS_RUN_NOW: LiteralString = """
UPDATE jobs SET run_at = now()
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending' RETURNING id"""

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

# -- processes (heartbeats) -------------------------------------------------------------------

# Registers or refreshes this process (primary key); a scheduler's file changes on reload.
PROCESSES_UPSERT: LiteralString = """
INSERT INTO pgbeat_processes (id, role, host, pid, version, schedules_hash, details)
VALUES (%(id)s, %(role)s, %(host)s, %(pid)s, %(version)s, %(schedules_hash)s, %(details)s)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), details = excluded.details,
    schedules_hash = excluded.schedules_hash"""

# Removes this process on a clean exit (primary key).
PROCESSES_DELETE: LiteralString = "DELETE FROM pgbeat_processes WHERE id = %(id)s"

# Forgets processes whose heartbeat stopped: they died without saying goodbye.
PROCESSES_PRUNE: LiteralString = """
DELETE FROM pgbeat_processes WHERE heartbeat_at < now() - %(stale_after)s::interval"""

# The live processes, with their heartbeat's age by the database clock.
PROCESSES_LIST: LiteralString = """
SELECT id, role, host, pid, version, started_at,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_s,
       schedules_hash, details
FROM pgbeat_processes
WHERE heartbeat_at >= now() - %(stale_after)s::interval
ORDER BY role, host, pid"""

# How many workers have beaten within max_age.
PROCESSES_FRESH_WORKERS: LiteralString = """
SELECT count(*) FROM pgbeat_processes
WHERE role = 'worker' AND heartbeat_at >= now() - %(max_age)s::interval"""

# Which of these unique keys exist (jobs_unique), to tell a missed period from an enqueued one.
JOBS_EXISTING_KEYS: LiteralString = """
SELECT kind, unique_key FROM jobs
WHERE (kind, unique_key) IN (SELECT * FROM unnest(%(kinds)s::text[], %(keys)s::text[]))"""
