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
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, queue, priority, limit_key)
VALUES (%(kind)s, %(payload)s,
        coalesce(%(run_at)s::timestamptz, now() + %(delay)s::interval),
        %(unique_key)s, %(max_attempts)s, %(queue)s, %(priority)s, %(limit_key)s)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id"""

# Inserts many jobs in one statement from parallel arrays; duplicates are skipped (jobs_unique).
# A job without run_at runs its delay (seconds, 0 if none) after the database's now().
JOBS_INSERT_MANY: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, queue, priority, limit_key)
SELECT kind, payload, coalesce(run_at, now() + delay_seconds * interval '1 second'),
       unique_key, max_attempts, queue, priority, limit_key
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[], %(run_ats)s::timestamptz[],
            %(delay_seconds)s::float8[], %(unique_keys)s::text[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[])
     AS new_job(kind, payload, run_at, delay_seconds, unique_key, max_attempts,
                queue, priority, limit_key)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id"""

# Inserts the due periods of many schedules at once; returns the keys that were new (jobs_unique).
# Each period (key, kind, fire time in Unix epoch seconds, template number) joins the
# template its schedule shares with others (payload, max_attempts, keep time). Arrays come
# as literals the scheduler writes in one string each: psycopg encodes a 10,000-element
# list in 10-30 ms. NOT EXISTS drops periods already enqueued with one jobs_unique probe
# each, a third of what a conflict costs. OFFSET 0 keeps it a probe (as an anti-join the
# planner may hash the whole table); it reads the period's columns only (probing with the
# template's kind took 4x longer with 10,000 templates). ON CONFLICT still settles races
# between replicas.
JOBS_INSERT_PERIODS: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, keep_until)
SELECT p.kind, t.payload, to_timestamp(p.fire_epoch), p.unique_key, t.max_attempts,
       to_timestamp(p.fire_epoch + t.keep_seconds)
FROM unnest(%(unique_keys)s::text[], %(kinds)s::text[], %(fire_epochs)s::float8[],
            %(templates)s::int[])
     AS p(unique_key, kind, fire_epoch, template)
JOIN unnest(%(template_numbers)s::int[], %(payloads)s::jsonb[], %(max_attempts)s::int[],
            %(keep_seconds)s::float8[])
     AS t(template, payload, max_attempts, keep_seconds) USING (template)
WHERE NOT EXISTS (
    SELECT FROM jobs AS j WHERE j.kind = p.kind AND j.unique_key = p.unique_key OFFSET 0
)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING unique_key"""

# -- worker -------------------------------------------------------------------------------

# Leases up to %(limit)s due jobs in claim order (higher priority first, then run_at, then
# id), skipping rows other workers hold (jobs_claim_order: the head of the index, no sort).
# Queues that are paused or limited are left to JOBS_CLAIM_LIMITED: the scan skips those
# the worker saw last (%(held)s, a constant the planner can estimate; a subquery there made
# it expect almost no rows and sort the backlog), and the update re-checks pgbeat_queues,
# so a queue paused or limited since is never claimed here. The lease is set and committed
# at once: no lock outlives this statement. `id = ANY(ARRAY(...))` keeps the plan a
# primary-key lookup even before ANALYZE has seen the table (a join here turned into a
# sequential scan per claim on a fresh table). Dates outside years 1-9999 come back NULL
# and the payload as text: the worker decodes each row alone, so one row the driver could
# not read fails alone instead of every claim.
JOBS_CLAIM: LiteralString = """
UPDATE jobs
SET status = 'running', attempts = attempts + 1, locked_until = now() + %(lease)s::interval
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

# Seconds until the earliest pending job the fast claim may take falls due, by the database
# clock, so an idle worker wakes when a delayed job becomes due (jobs_ready). The paused
# and limited queues the worker saw (%(held)s) are left out: JOBS_SECONDS_TO_NEXT_LIMITED
# covers the limited ones.
JOBS_SECONDS_TO_NEXT: LiteralString = """
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM jobs
WHERE status = 'pending'
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
  AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
  AND queue <> ALL(%(held)s::text[])"""

# Outcome statements take parallel arrays (ids[i] ran as attempts[i]) and look rows up by
# primary key with `id = ANY(...)`; array_position picks each row's own values. The attempt
# fences out a run whose lease expired and whose job was claimed again since.

# Marks finished runs done (primary key).
JOBS_COMPLETE: LiteralString = """
UPDATE jobs SET status = 'done', locked_until = NULL, finished_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]
  AND status IN ('running', 'pending')"""

# Puts failed runs back to pending at their retry time: an absolute run_at, or a delay
# from the database clock (primary key). A superseded run (job_keys.py: a newer job took
# its key) is not retried: its job ends cancelled, its error after the reason.
JOBS_RETRY: LiteralString = """
UPDATE jobs
SET status = CASE WHEN superseded_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    finished_at = CASE WHEN superseded_at IS NULL THEN finished_at ELSE now() END,
    locked_until = NULL,
    last_error = CASE WHEN superseded_at IS NULL THEN '' ELSE coalesce(last_error || '; ', '') END
                 || (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)],
    run_at = CASE WHEN superseded_at IS NOT NULL THEN run_at ELSE
             coalesce((%(run_ats)s::timestamptz[])[array_position(%(ids)s::bigint[], id)],
                      now() + (%(delays)s::interval[])[array_position(%(ids)s::bigint[], id)])
             END
WHERE id = ANY(%(ids)s::bigint[])
  AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]
  AND status IN ('running', 'pending')"""

# Parks runs in the failed dead letter with their error (primary key).
JOBS_FAIL: LiteralString = """
UPDATE jobs
SET status = 'failed', locked_until = NULL, finished_at = now(),
    last_error = (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)]
WHERE id = ANY(%(ids)s::bigint[])
  AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]
  AND status IN ('running', 'pending')"""

# Returns running jobs to pending at shutdown without charging the attempt (primary key);
# a superseded one (job_keys.py) is not run again: it ends cancelled.
JOBS_RELEASE: LiteralString = """
UPDATE jobs
SET status = CASE WHEN superseded_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    finished_at = CASE WHEN superseded_at IS NULL THEN finished_at ELSE now() END,
    last_error = CASE WHEN superseded_at IS NULL THEN last_error
                      ELSE concat_ws('; ', last_error, 'released at shutdown') END,
    locked_until = NULL, attempts = greatest(attempts - 1, 0)
WHERE id = ANY(%(ids)s::bigint[])
  AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]
  AND status = 'running'"""

# Returns jobs whose lease expired (their worker died) to pending, or to failed once their
# attempts are spent, so a job that keeps killing its worker ends (jobs_running). A
# superseded job (job_keys.py) is not run again: it ends cancelled.
JOBS_REAP: LiteralString = """
UPDATE jobs
SET status = CASE WHEN superseded_at IS NOT NULL THEN 'cancelled'
                  WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
    run_at = CASE WHEN superseded_at IS NULL AND attempts < max_attempts THEN now()
                  ELSE run_at END,
    finished_at = CASE WHEN superseded_at IS NOT NULL OR attempts >= max_attempts
                       THEN now() END,
    locked_until = NULL,
    last_error = CASE WHEN superseded_at IS NULL THEN '' ELSE coalesce(last_error || '; ', '') END
                 || 'lease expired during attempt ' || attempts
                 || ' (worker died or lost the database)'
WHERE status = 'running' AND locked_until < now()
RETURNING id, kind, status"""

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
SELECT id, kind, status, attempts, max_attempts, run_at, created_at, finished_at,
       unique_key, job_key, superseded_at, last_error, payload, locked_until, keep_until
FROM jobs WHERE id = %(id)s"""

# Puts one finished or waiting job back to pending, due now, with its attempts reset
# (primary key). Running jobs are left alone: their worker still holds them. A job whose
# job_key another live job holds now is left alone too (jobs_live_key): two live jobs of
# one key would break the key's promise (and its unique index).
JOBS_RETRY_ONE: LiteralString = """
UPDATE jobs AS j
SET status = 'pending', attempts = 0, run_at = now(), locked_until = NULL, finished_at = NULL,
    superseded_at = NULL
WHERE j.id = %(id)s AND j.status <> 'running'
  AND NOT EXISTS (
      SELECT FROM jobs AS live
      WHERE live.kind = j.kind AND live.job_key = j.job_key AND live.id <> j.id
        AND live.superseded_at IS NULL AND live.status IN ('pending', 'running'))
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

# Puts these failed jobs back to pending with attempts reset (primary key), but not one whose
# job_key another live job holds (jobs_live_key): that one stays failed.
JOBS_RETRY_FAILED: LiteralString = """
UPDATE jobs AS j
SET status = 'pending', attempts = 0, run_at = now(), locked_until = NULL, finished_at = NULL,
    superseded_at = NULL
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status = 'failed'
  AND NOT EXISTS (
      SELECT FROM jobs AS live
      WHERE live.kind = j.kind AND live.job_key = j.job_key
        AND live.superseded_at IS NULL AND live.status IN ('pending', 'running'))
RETURNING id"""

# Cancels one pending job, with who or why in last_error (primary key). Stopping a job on
# purpose is not a failure: it lands in cancelled, outside the failed dead letter.
JOBS_CANCEL: LiteralString = """
UPDATE jobs SET status = 'cancelled', last_error = %(reason)s, finished_at = now()
WHERE id = %(id)s AND status = 'pending'
RETURNING id"""

# Which live job holds a key, to explain a refused retry (jobs_live_key).
JOBS_KEY_HOLDER: LiteralString = """
SELECT live.id, live.job_key FROM jobs AS j JOIN jobs AS live
    ON live.kind = j.kind AND live.job_key = j.job_key AND live.id <> j.id
   AND live.superseded_at IS NULL AND live.status IN ('pending', 'running')
WHERE j.id = %(id)s"""

# The status of one job, to explain a refused retry or cancel (primary key).
JOBS_STATUS: LiteralString = "SELECT status FROM jobs WHERE id = %(id)s"

# Deletes one batch of finished jobs older than the cut-off. A scheduled job is never
# deleted before keep_until (its schedule's catch-up window), or a restarted scheduler
# would enqueue its period again. Batches keep locks and WAL bursts short.
JOBS_PURGE_BATCH: LiteralString = """
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE status = ANY(%(statuses)s::text[])
      AND coalesce(finished_at, created_at) < now() - %(older_than)s::interval
      AND (keep_until IS NULL OR keep_until < now())
    LIMIT %(batch)s
)"""

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
