"""The batch delete of old finished jobs, which retention (its turn: ../retention.py) and
`pgbeat jobs purge` share. It locks no row a claim could want: only finished rows are
locked, and locked ones are skipped.
"""

from __future__ import annotations

from typing import LiteralString

# Deletes one batch of jobs of these finished statuses that finished more than %(older_than)s
# ago (jobs_finished). A status outside done/failed/cancelled never matches, however it is
# asked for; a job inside keep_until (its schedule period's dedup window) stays, or a
# restarted scheduler would enqueue its period again. Locked rows are skipped, not waited
# for, and no pending row is locked: a claim never waits on a batch. A workflow's steps go
# together: none while a step of its workflow is live or finished within %(older_than)s
# (its steps through pgbeat_workflow_steps' UNIQUE (workflow_id, name), then the primary
# key: migration 0031). Returns each row's status.
JOBS_DELETE_FINISHED: LiteralString = """
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE finished_at < now() - %(older_than)s::interval
      AND status = ANY(%(statuses)s::text[])
      AND status IN ('done', 'failed', 'cancelled')
      AND (keep_until IS NULL OR keep_until < now())
      AND (workflow_id IS NULL OR NOT EXISTS (
          SELECT FROM pgbeat_workflow_steps AS s JOIN jobs AS step ON step.id = s.job_id
          WHERE s.workflow_id = jobs.workflow_id
            AND (step.status IN ('pending', 'running')
                 OR step.finished_at >= now() - %(older_than)s::interval)))
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
RETURNING status"""
