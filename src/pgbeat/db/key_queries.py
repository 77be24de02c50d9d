"""The statements of jobs by key (migration 0004), named TABLE_VERB, with ``%(name)s`` parameters.

A ``job_key`` names the live job of its kind: pending or running, not superseded. Every
statement here finds it through ``jobs_live_key`` with a condition that implies that
index's predicate, so the planner can use it and ``ON CONFLICT`` can name it as its arbiter.
"""

from __future__ import annotations

from typing import LiteralString

# Inserts keyed jobs from parallel arrays (one per key: the caller drops repeats); a key
# whose live job exists inserts nothing and returns no row (jobs_live_key). A NULL max_wait
# leaves run_at as asked (least() ignores NULLs); otherwise run_at is at most now + max_wait.
# meta (the caller's trace context) is the same for every job of the call.
JOBS_INSERT_KEYED: LiteralString = """
INSERT INTO jobs (kind, job_key, payload, run_at, max_attempts, queue, priority, limit_key,
                  meta)
SELECT kind, job_key, payload,
       least(coalesce(run_at, now() + delay_seconds * interval '1 second'),
             now() + %(max_wait)s::interval),
       max_attempts, queue, priority, limit_key,
       %(meta)s::jsonb
FROM unnest(%(kinds)s::text[], %(job_keys)s::text[], %(payloads)s::jsonb[],
            %(run_ats)s::timestamptz[], %(delay_seconds)s::float8[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[])
     AS new_job(kind, job_key, payload, run_at, delay_seconds, max_attempts,
                queue, priority, limit_key)
ON CONFLICT (kind, job_key)
    WHERE job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING id, kind, job_key"""

# Inserts keyed jobs, or rewrites the pending live job of each key (jobs_live_key): the new
# payload; run_at the new one (replace), the later (keep_latest) or the earlier
# (keep_earliest) of the two, never past created_at (the first request) + max_wait; a full
# new budget of attempts on top of those spent. Outcome statements fence runs by attempt,
# so attempts is never lowered, and a job that ran before moves one on: a reaped run still
# going on somewhere cannot then mark the new values done. DO UPDATE locks the conflicting
# row and tests its newest version, and waits for an uncommitted insert of the key instead
# of skipping it. A key whose live job is running returns no row: the caller supersedes it
# and comes back. The statement-level insert trigger wakes idle workers on commit, updates
# included. The queue, priority and limit key are the new request's.
JOBS_UPSERT_KEYED: LiteralString = """
INSERT INTO jobs (kind, job_key, payload, run_at, max_attempts, queue, priority, limit_key,
                  meta)
SELECT kind, job_key, payload,
       least(coalesce(run_at, now() + delay_seconds * interval '1 second'),
             now() + %(max_wait)s::interval),
       max_attempts, queue, priority, limit_key,
       %(meta)s::jsonb
FROM unnest(%(kinds)s::text[], %(job_keys)s::text[], %(payloads)s::jsonb[],
            %(run_ats)s::timestamptz[], %(delay_seconds)s::float8[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[])
     AS new_job(kind, job_key, payload, run_at, delay_seconds, max_attempts,
                queue, priority, limit_key)
ON CONFLICT (kind, job_key)
    WHERE job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')
DO UPDATE SET
    payload = excluded.payload,
    run_at = least(CASE %(on_conflict)s::text
                       WHEN 'keep_latest' THEN greatest(jobs.run_at, excluded.run_at)
                       WHEN 'keep_earliest' THEN least(jobs.run_at, excluded.run_at)
                       ELSE excluded.run_at
                   END,
                   jobs.created_at + %(max_wait)s::interval),
    attempts = jobs.attempts + sign(jobs.attempts)::int,
    max_attempts = jobs.attempts + sign(jobs.attempts)::int + excluded.max_attempts,
    last_error = NULL,
    queue = excluded.queue, priority = excluded.priority, limit_key = excluded.limit_key
WHERE jobs.status = 'pending'
RETURNING id, kind, job_key"""

# Takes the keys from their running jobs (jobs_live_key): each run goes on, but its row
# leaves the index and will never run again (see JOBS_RETRY, JOBS_RELEASE, JOBS_REAP).
JOBS_SUPERSEDE_KEYED: LiteralString = """
UPDATE jobs SET superseded_at = now(), last_error = %(reason)s
WHERE (kind, job_key) IN (SELECT * FROM unnest(%(kinds)s::text[], %(job_keys)s::text[]))
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status = 'running'
RETURNING id"""

# Cancels the live job of a key (jobs_live_key): a pending one becomes cancelled; a running
# one is superseded (its key is free at once) and asked to stop (cancel_requested_at, and
# NOTIFY pgbeat_cancel with its id tells its worker at commit): it ends cancelled, never
# runs again. One statement, so a claim committed meanwhile is seen on the row's newest
# version, never missed.
JOBS_CANCEL_KEYED: LiteralString = """
UPDATE jobs
SET status = CASE status WHEN 'pending' THEN 'cancelled' ELSE status END,
    finished_at = CASE status WHEN 'pending' THEN now() ELSE finished_at END,
    superseded_at = CASE status WHEN 'running' THEN now() ELSE superseded_at END,
    cancel_requested_at = CASE status WHEN 'running' THEN now() ELSE cancel_requested_at END,
    last_error = %(reason)s
WHERE kind = %(kind)s AND job_key = %(job_key)s
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')
RETURNING id, status = 'running',
          pg_notify(CASE status WHEN 'running' THEN 'pgbeat_cancel' ELSE 'pgbeat_finished' END,
                    id::text)"""

# Moves the run_at of the pending live job of a key (jobs_live_key); inserts nothing. The
# notification wakes idle workers at commit, as an insert does, for a job moved earlier.
JOBS_RESCHEDULE_KEYED: LiteralString = """
UPDATE jobs SET run_at = coalesce(%(run_at)s::timestamptz, now() + %(delay)s::interval)
WHERE kind = %(kind)s AND job_key = %(job_key)s
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status = 'pending'
RETURNING id, run_at, pg_notify('pgbeat_jobs', '')"""

# The live job of a key (jobs_live_key).
JOBS_FIND_KEYED: LiteralString = """
SELECT id, kind, job_key, status, payload, run_at, attempts, max_attempts, created_at
FROM jobs
WHERE kind = %(kind)s AND job_key = %(job_key)s
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')"""
