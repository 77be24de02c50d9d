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
