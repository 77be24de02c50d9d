"""The statements on the live job of a key (migration 0004): cancel it, move it, find it.
Keyed inserts and upserts are in enqueue.py.

A ``job_key`` names the live job of its kind: pending or running, not superseded. Every
statement here finds it through ``jobs_live_key`` with a condition that implies that
index's predicate, so the planner can use it.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.ended_steps import _ADVANCED, _CANCEL_TOLD

# Cancels the live job of a key (jobs_live_key): a pending one becomes cancelled; a running
# one is superseded (its key is free at once) and asked to stop (cancel_requested_at, and
# NOTIFY pgbeat_cancel with its id tells its worker at commit): it ends cancelled, never
# runs again. One statement, so a claim committed meanwhile is seen on the row's newest
# version, never missed. A cancelled workflow step advances its workflow (ended_steps.py).
JOBS_CANCEL_KEYED: LiteralString = (
    """
WITH ended AS (
    UPDATE jobs
    SET status = CASE status WHEN 'pending' THEN 'cancelled' ELSE status END,
        finished_at = CASE status WHEN 'pending' THEN now() ELSE finished_at END,
        superseded_at = CASE status WHEN 'running' THEN now() ELSE superseded_at END,
        cancel_requested_at = CASE status WHEN 'running' THEN now() ELSE cancel_requested_at END,
        last_error = %(reason)s
    WHERE kind = %(kind)s AND job_key = %(job_key)s
      AND job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')"""
    + _CANCEL_TOLD
    + _ADVANCED
    + """
SELECT id, status = 'running', notified FROM ended, advanced"""
)

# Moves the run_at of the pending live job of a key (jobs_live_key); inserts nothing. The
# notification wakes idle workers at commit, as an insert does, for a job moved earlier.
JOBS_RESCHEDULE_KEYED: LiteralString = """
UPDATE jobs SET run_at = coalesce(%(run_at)s::timestamptz, now() + %(delay)s::interval)
WHERE kind = %(kind)s AND job_key = %(job_key)s
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status = 'pending'
RETURNING id, run_at, pg_notify(pgbeat_channel('pgbeat_jobs'), '')"""

# The live job of a key (jobs_live_key).
JOBS_FIND_KEYED: LiteralString = """
SELECT id, kind, job_key, status, payload, run_at, attempts, max_attempts, created_at
FROM jobs
WHERE kind = %(kind)s AND job_key = %(job_key)s
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')"""
