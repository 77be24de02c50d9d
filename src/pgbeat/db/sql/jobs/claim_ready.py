"""The claim of a large fan-out's children where they are held (migration 0032): the
advance left one ``pgbeat_workflow_ready`` row for the parent instead of releasing each
child, and these statements take its children a window at a time, or release what no
claim took in time (docs/workflows.md, "Storage").
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs.claim_parts import _CLAIMED_COLUMNS, _NOT_HELD_PROBED, _SET_RUNNING

# A held step's run_at (migration 0017).
_HELD: LiteralString = "'9999-12-29 00:00:00+00'"

# A child still held and a workflow step: a cancel or the repair pass may have moved it,
# and an edge the enqueue role inserted to a job that is no step does nothing (0033).
_STILL_HELD: LiteralString = "status = 'pending' AND workflow_id IS NOT NULL AND run_at = " + _HELD

# Whether the worker may run a held child (``j``): one of its kinds and queues, its queue
# neither paused nor limited nor fair now (those go through their own claims: the unlimited
# claims' own re-check, one probe of pgbeat_queues a row).
_MINE_KIND_QUEUE: LiteralString = """
           (%(kinds)s::text[] IS NULL OR j.kind = ANY(%(kinds)s::text[]))
           AND (%(queues)s::text[] IS NULL OR j.queue = ANY(%(queues)s::text[]))"""
_MINE: LiteralString = _MINE_KIND_QUEUE + _NOT_HELD_PROBED.replace("jobs.queue", "j.queue")
assert "held.name = j.queue" in _MINE

# The window's children still held, each with whether the worker may run it; each branch
# of JOBS_CLAIM_READY's ``held`` goes on with how it finds them.
_HELD_CHILDREN: LiteralString = (
    """
    SELECT j.ctid AS tid,"""
    + _MINE
    + """ AS mine
    FROM jobs AS j
    WHERE """
    + _STILL_HELD
)

# How many rows ``released`` (a CTE of the statement) released, announced once when any
# (not a notification per row: a stale release of 10,000 children called pg_notify 10,000
# times, each checked against the transaction's pending ones).
_TOLD: LiteralString = """,
told AS (
    SELECT c.n, CASE WHEN c.n > 0 THEN pg_notify(pgbeat_channel('pgbeat_jobs'), '') END
    FROM (SELECT count(*) AS n FROM released) AS c
)"""

# Takes the next window of %(limit)s children of the oldest ready parent (its row locked,
# so the claims of one fan-out take turns and each child is in one window): the edges in
# (parent_id, child_id) order after ``after`` (the edges' primary key, no sort), the
# children still held (_STILL_HELD), found by primary key: as one range of ids when the
# window's span is within 4 windows (one INSERT made them, in a row unless other
# sessions' inserts interleaved: 140 shared buffers a window of 100 against 437 by one
# descent of the index per child), else one by one (the `+ 0` keeps the array out of the
# range's index condition). The ones the worker may run become running, run_at the
# parent's end (their wait for a slot, never for the parent, is what queue delay counts);
# the rest are released into their queues, due since the parent's end, and announced. The
# row goes on after the window, or goes when the window came up short (the edges ran
# out). One row per claimed job, or one row of NULL job columns; ``more``: a ready parent
# is left (this one's window was full, or another's row is there).
JOBS_CLAIM_READY: LiteralString = (
    """
WITH r AS MATERIALIZED (
    SELECT parent_id, at, after FROM pgbeat_workflow_ready
    ORDER BY at, parent_id LIMIT 1
    FOR UPDATE
),
win AS MATERIALIZED (
    SELECT e.child_id FROM r CROSS JOIN LATERAL (
        SELECT child_id FROM pgbeat_workflow_edges AS e
        WHERE e.parent_id = r.parent_id AND e.child_id > r.after AND e.sole
        ORDER BY e.child_id LIMIT %(limit)s) AS e
),
span AS MATERIALIZED (
    SELECT min(child_id) AS lo, max(child_id) AS hi FROM win
),
held AS MATERIALIZED ("""
    + _HELD_CHILDREN
    + """
      AND (SELECT hi - lo FROM span) <= 4 * %(limit)s::int
      AND j.id BETWEEN (SELECT lo FROM span) AND (SELECT hi FROM span)
      AND j.id + 0 = ANY(ARRAY(SELECT child_id FROM win))
    UNION ALL"""
    + _HELD_CHILDREN
    + """
      AND (SELECT hi - lo FROM span) > 4 * %(limit)s::int
      AND j.id = ANY(ARRAY(SELECT child_id FROM win))
),
claimed AS (
    UPDATE jobs"""
    + _SET_RUNNING
    + """, run_at = (SELECT at FROM r)
    WHERE ctid = ANY(ARRAY(SELECT tid FROM held WHERE mine))
      AND """
    + _STILL_HELD
    + _CLAIMED_COLUMNS
    + """
),
released AS (
    UPDATE jobs SET run_at = (SELECT at FROM r)
    WHERE ctid = ANY(ARRAY(SELECT tid FROM held WHERE NOT mine))
      AND """
    + _STILL_HELD
    + """
    RETURNING 1
),
went_on AS (
    UPDATE pgbeat_workflow_ready AS ready SET after = w.last, touched = now()
    FROM (SELECT max(child_id) AS last, count(*) AS n FROM win) AS w
    WHERE ready.parent_id = (SELECT parent_id FROM r) AND w.n = %(limit)s::int
),
gone AS (
    DELETE FROM pgbeat_workflow_ready
    WHERE parent_id = (SELECT parent_id FROM r) AND (SELECT count(*) FROM win) < %(limit)s::int
)"""
    + _TOLD
    + """
SELECT claimed.*, (SELECT n FROM told) AS released,
       w.n = %(limit)s::int OR EXISTS (
           SELECT FROM pgbeat_workflow_ready
           WHERE parent_id IS DISTINCT FROM (SELECT parent_id FROM r)) AS more
FROM (SELECT count(*) AS n FROM win) AS w LEFT JOIN claimed ON true"""
)

# Releases the children of the oldest ready parent that no claim moved on for
# %(stale)s (every worker busy with due jobs, or none that may take them), as the advance
# released them before migration 0032: due since the parent's end, in their queues' claim
# order with everything else; then the row goes. One parent a statement (the workers run
# it every HELD_REFRESH), skipping a row a claim holds. Returns how many were released
# (announced) and whether a ready parent is left.
READY_RELEASE_STALE: LiteralString = (
    """
WITH stale AS MATERIALIZED (
    SELECT parent_id, at, after FROM pgbeat_workflow_ready
    WHERE touched <= now() - %(stale)s::interval
    ORDER BY at, parent_id LIMIT 1
    FOR UPDATE SKIP LOCKED
),
released AS (
    UPDATE jobs SET run_at = (SELECT at FROM stale)
    WHERE id = ANY(ARRAY(
        SELECT e.child_id FROM stale CROSS JOIN LATERAL (
            SELECT child_id FROM pgbeat_workflow_edges AS e
            WHERE e.parent_id = stale.parent_id AND e.child_id > stale.after AND e.sole
        ) AS e))
      AND """
    + _STILL_HELD
    + """
    RETURNING 1
),
gone AS (
    DELETE FROM pgbeat_workflow_ready WHERE parent_id = (SELECT parent_id FROM stale)
)"""
    + _TOLD
    + """
SELECT (SELECT n FROM told) AS released,
       EXISTS (SELECT FROM pgbeat_workflow_ready
               WHERE parent_id IS DISTINCT FROM (SELECT parent_id FROM stale)) AS left_ready"""
)
