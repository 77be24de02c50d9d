"""The fragments with which every statement that can end a job advances the workflows of
the steps it ended (migration 0033): the worker's outcomes and reaper, the cancels (by id,
by key, by workflow, by a schedule's overlap), the fail of an unreadable claim, and the
workflow repair pass.

Each such statement updates jobs in a CTE named ``ended`` that returns ``id``, ``status``
(after the update) and ``workflow_id``. Once the update is complete, one call of
``pgbeat_workflow_advance`` takes the steps it ended (ids, negated for failed or
cancelled) in the same statement, so the advance commits with the end, as the row trigger
it replaced did. A statement that ended no step tests a NULL per row and calls nothing:
plain jobs no longer pay for an ``AFTER ... FOR EACH ROW`` trigger on every claim and
completion (docs/workflows.md, "Storage").
"""

from __future__ import annotations

from typing import LiteralString

# The cancel of JOBS_CANCEL and WORKFLOW_JOBS_CANCEL: a pending job cancelled at once, a
# running one asked to stop (cancel_requested_at; its outcome then ends it cancelled), why
# in last_error unless a stop was asked already. Each statement goes on with its WHERE.
_CANCEL_SET: LiteralString = """
WITH ended AS (
    UPDATE jobs
    SET status = CASE status WHEN 'pending' THEN 'cancelled' ELSE status END,
        finished_at = CASE status WHEN 'pending' THEN now() ELSE finished_at END,
        cancel_requested_at = CASE status WHEN 'running' THEN coalesce(cancel_requested_at, now())
                              ELSE cancel_requested_at END,
        last_error = CASE WHEN status = 'pending' OR cancel_requested_at IS NULL THEN %(reason)s
                          ELSE last_error END"""

# What a cancel's update returns (closing ``ended``): the rows for the advance, and the
# notification of each, on pgbeat_cancel for a running job (its worker stops the run), on
# pgbeat_finished for one cancelled (whoever waits for it).
_CANCEL_TOLD: LiteralString = """
    RETURNING id, status, workflow_id,
              pg_notify(pgbeat_channel(CASE status WHEN 'running' THEN 'pgbeat_cancel'
                                                    ELSE 'pgbeat_finished' END), id::text)
              AS notified
)"""

# An aggregate over ``ended``: the advance of the steps it ended, true when there were
# some, false when none (no call). Ended means done, failed or cancelled after the update:
# every statement here changes only pending or running rows, so each is a step's end.
_ADVANCE_ENDED: LiteralString = """
CASE WHEN bool_or(workflow_id IS NOT NULL AND status IN ('done', 'failed', 'cancelled'))
     THEN pgbeat_workflow_advance(
              array_agg(CASE status WHEN 'done' THEN id ELSE -id END)
              FILTER (WHERE workflow_id IS NOT NULL
                        AND status IN ('done', 'failed', 'cancelled')))
     ELSE false END"""

# The second CTE of a statement that returns one row per job it changed: the advance, one
# row, that the final SELECT joins (``FROM ended, advanced``). A CTE that calls a volatile
# function is never folded into the query that reads it: it runs once, after ``ended`` is
# read whole (an aggregate), whichever side the join reads first.
_ADVANCED: LiteralString = (
    """,
advanced AS (SELECT"""
    + _ADVANCE_ENDED
    + """ AS advanced FROM ended)"""
)
