"""The statements of ``pgbeat.testing``: what a test enqueued, and the one-by-one claim of
``drain`` with what its jobs ended as, all on the test's own connection and inside its
transaction."""

from __future__ import annotations

from typing import LiteralString

# The jobs a test looks for, of one kind or of every kind, oldest first (jobs_unique's kind
# prefix; a test's database is small). JSON comes as text, decoded by pgbeat: a framework's
# connection may load jsonb its own way (Django's returns the text).
JOBS_ENQUEUED: LiteralString = """
SELECT id, kind, payload::text, status, queue, priority, limit_key, run_at, unique_key, job_key,
       attempts, max_attempts, last_error, tags, meta::text
FROM jobs
WHERE (%(kind)s::text IS NULL OR kind = %(kind)s::text)
ORDER BY id
LIMIT %(limit)s"""

# Claims the next due job for drain: higher priority first, then run_at, then id; due by
# the given time, or the database's now() when none is given (jobs_ready). No other
# session takes part: the lease only keeps the reaper away while the handler runs. JSON
# comes as text, as above.
JOBS_CLAIM_NEXT_DUE: LiteralString = """
UPDATE jobs
SET status = 'running', attempts = attempts + 1,
    locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    started_at = coalesce(%(now)s::timestamptz, now())
WHERE id = (
    SELECT id FROM jobs
    WHERE status = 'pending' AND run_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY priority DESC, run_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, kind, payload::text, attempts, max_attempts, run_at, created_at, unique_key,
          queue, priority, limit_key, job_key, tags, meta::text"""

# The final status of the jobs a drain ran, counted (primary key).
JOBS_COUNT_STATUS_OF: LiteralString = """
SELECT status, count(*) FROM jobs WHERE id = ANY(%(ids)s::bigint[]) GROUP BY status"""
