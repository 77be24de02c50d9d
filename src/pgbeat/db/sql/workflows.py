"""The statements of workflows (pgbeat_workflows, pgbeat_workflow_steps,
pgbeat_workflow_edges, and their steps' rows in jobs): the insert of a workflow, what
``pgbeat.workflow`` reads, the cancel, a handler's parents' results, and the repair pass.

The advance itself (a parent's end releasing or cancelling its children) is
pgbeat_workflow_advance (migration 0033), which every statement that ends a step calls
(ended_steps.py), so it runs in whatever transaction ends a step.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.ended_steps import _ADVANCED, _CANCEL_SET, _CANCEL_TOLD

# Inserts a workflow; with a key already taken, nothing, and no row (its UNIQUE index).
WORKFLOWS_INSERT: LiteralString = """
INSERT INTO pgbeat_workflows (name, key) VALUES (%(name)s, %(key)s)
ON CONFLICT (key) DO NOTHING
RETURNING id"""

# The workflow of a key and its steps' job ids by name (key's UNIQUE index, steps' UNIQUE).
WORKFLOWS_FIND_KEY: LiteralString = """
SELECT w.id, coalesce(jsonb_object_agg(s.name, s.job_id) FILTER (WHERE s.name IS NOT NULL),
                      '{}'::jsonb) AS jobs
FROM pgbeat_workflows AS w LEFT JOIN pgbeat_workflow_steps AS s ON s.workflow_id = w.id
WHERE w.key = %(key)s
GROUP BY w.id"""

# Inserts a workflow's steps as jobs from parallel arrays (the columns JOBS_INSERT_MANY
# writes, and the workflow id): a step with parents is held (never due) until the advance
# releases it. Rows go in in array order, so their ids ascend in it.
WORKFLOW_JOBS_INSERT: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, max_attempts, queue, priority, limit_key, meta,
                  workflow_id)
SELECT kind, payload,
       CASE WHEN held THEN '9999-12-29 00:00:00+00'::timestamptz
            ELSE coalesce(run_at, now() + delay_seconds * interval '1 second') END,
       max_attempts, queue, priority, limit_key, %(meta)s::jsonb, %(workflow_id)s
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[], %(run_ats)s::timestamptz[],
            %(delay_seconds)s::float8[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[],
            %(held)s::bool[]) WITH ORDINALITY
     AS new_job(kind, payload, run_at, delay_seconds, max_attempts,
                queue, priority, limit_key, held, n)
ORDER BY n
RETURNING id"""

# Inserts the steps of a workflow: name, parents not ended yet, the asked run time.
WORKFLOW_STEPS_INSERT: LiteralString = """
INSERT INTO pgbeat_workflow_steps (job_id, workflow_id, name, waiting_for, on_parent_failure,
                                   run_at, delay)
SELECT job_id, %(workflow_id)s, name, waiting_for, on_parent_failure, run_at,
       delay_seconds * interval '1 second'
FROM unnest(%(job_ids)s::bigint[], %(names)s::text[], %(waiting_for)s::int[],
            %(on_parent_failure)s::text[], %(run_ats)s::timestamptz[],
            %(delay_seconds)s::float8[])
     AS step(job_id, name, waiting_for, on_parent_failure, run_at, delay_seconds)"""

# Inserts a workflow's edges: parents[i] must end before children[i] starts; sole[i] when
# that parent is the child's only one and the child asked no run time (the advance then
# releases it without reading its step row: migration 0031).
WORKFLOW_EDGES_INSERT: LiteralString = """
INSERT INTO pgbeat_workflow_edges (parent_id, child_id, sole)
SELECT * FROM unnest(%(parents)s::bigint[], %(children)s::bigint[], %(sole)s::bool[])"""

# One workflow (primary key).
WORKFLOWS_GET: LiteralString = """
SELECT id, name, key, created_at FROM pgbeat_workflows WHERE id = %(id)s"""

# A workflow's steps in the order they were added, with their jobs' state and their
# parents' names (steps through their UNIQUE (workflow_id, name), edges by child). A held
# step's run_at (9999-12-29) reads as NULL: it is in no queue yet. Times Python cannot
# hold (written by SQL) read as NULL too.
WORKFLOW_STEPS_LIST: LiteralString = """
SELECT s.name, s.job_id, j.kind, j.status, j.queue, j.attempts, j.last_error,
       j.status = 'pending' AND j.run_at = '9999-12-29 00:00:00+00' AS waiting,
       CASE WHEN j.finished_at BETWEEN '0001-01-03' AND '9999-12-29'
            THEN j.finished_at END AS finished_at,
       CASE WHEN j.run_at >= '0001-01-03' AND j.run_at < '9999-12-29'
            THEN j.run_at END AS run_at,
       CASE WHEN j.started_at BETWEEN '0001-01-03' AND '9999-12-29'
            THEN j.started_at END AS started_at,
       coalesce((SELECT array_agg(p.name ORDER BY p.job_id)
                 FROM pgbeat_workflow_edges AS e
                 JOIN pgbeat_workflow_steps AS p ON p.job_id = e.parent_id
                 WHERE e.child_id = s.job_id), '{}') AS after
FROM pgbeat_workflow_steps AS s JOIN jobs AS j ON j.id = s.job_id
WHERE s.workflow_id = %(id)s
ORDER BY s.job_id"""

# Cancels every step of a workflow that has not ended (its step rows by workflow, then the
# primary key: migration 0031), as JOBS_CANCEL does:
# a pending one at once (the advance cancels its dependants), a running one asked
# to stop (cancel_requested_at and NOTIFY pgbeat_cancel: its worker ends the run).
WORKFLOW_JOBS_CANCEL: LiteralString = (
    _CANCEL_SET
    + """
    WHERE id = ANY(ARRAY(SELECT job_id FROM pgbeat_workflow_steps WHERE workflow_id = %(id)s))
      AND workflow_id = %(id)s AND status IN ('pending', 'running')"""
    + _CANCEL_TOLD
    + _ADVANCED
    + """
SELECT id, status, notified FROM ended, advanced"""
)

# A step's parents' stored results by step name (edges by child, then primary keys).
WORKFLOW_PARENT_RESULTS: LiteralString = """
SELECT p.name, j.result
FROM pgbeat_workflow_edges AS e
JOIN pgbeat_workflow_steps AS p ON p.job_id = e.parent_id
JOIN jobs AS j ON j.id = e.parent_id
WHERE e.child_id = %(id)s"""

# The repair pass: held steps whose parents have all ended (a parent deleted counts as
# ended done) but that are still held, which the advance never leaves behind unless a
# step's rows were changed by hand or a bug slipped: decided again from the parents'
# statuses, not from the count. Held steps are found through jobs_ready (run_at, pending);
# the update re-checks the row, so two workers repairing at once act once. The children of
# a ready parent (pgbeat_workflow_ready: claimed where they are, or released when no claim
# took them for a second) are not stuck. A step it cancels advances its workflow in the
# same statement (ended_steps.py): its dependants are cancelled or released at once. A
# released step's time is the advance's (pgbeat_step_release_at, migration 0033: a step
# row's delay never makes the pass fail).
WORKFLOW_STEPS_REPAIR: LiteralString = (
    """
WITH stuck AS (
    SELECT j.id,
           bool_or(p.status IN ('failed', 'cancelled')) AND s.on_parent_failure = 'cancel'
               AS cancel,
           s.run_at AS asked_run_at, s.delay
    FROM jobs AS j
    JOIN pgbeat_workflow_steps AS s ON s.job_id = j.id
    LEFT JOIN pgbeat_workflow_edges AS e ON e.child_id = j.id
    LEFT JOIN jobs AS p ON p.id = e.parent_id
    WHERE j.status = 'pending' AND j.run_at = '9999-12-29 00:00:00+00'
      AND j.workflow_id IS NOT NULL
    GROUP BY j.id, s.on_parent_failure, s.run_at, s.delay
    HAVING bool_and(p.status IS NULL OR p.status IN ('done', 'failed', 'cancelled'))
       AND NOT bool_or(e.sole AND EXISTS (SELECT FROM pgbeat_workflow_ready AS r
                                          WHERE r.parent_id = e.parent_id))
    LIMIT %(batch)s
), ended AS (
    UPDATE jobs AS j
    SET status = CASE WHEN stuck.cancel THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN stuck.cancel THEN now() ELSE j.finished_at END,
        last_error = CASE WHEN stuck.cancel
                          THEN 'cancelled: a parent step ended failed or cancelled'
                          ELSE j.last_error END,
        run_at = CASE WHEN stuck.cancel THEN j.run_at
                      ELSE pgbeat_step_release_at(stuck.asked_run_at, stuck.delay) END
    FROM stuck
    WHERE j.id = stuck.id AND j.status = 'pending' AND j.run_at = '9999-12-29 00:00:00+00'
    RETURNING j.id, j.status, j.workflow_id,
              pg_notify(pgbeat_channel(CASE j.status WHEN 'pending' THEN 'pgbeat_jobs'
                                                      ELSE 'pgbeat_finished' END),
                        CASE j.status WHEN 'pending' THEN '' ELSE j.id::text END) AS notified
)"""
    + _ADVANCED
    + """
SELECT id, status, notified FROM ended, advanced"""
)

# Deletes workflows none of whose steps is left (retention took them; a step's row goes
# with its job), in batches; a new one is an hour old at least, so an enqueue that has not
# committed its steps keeps it. Two workers at once: the second waits for the first's rows
# and skips them.
WORKFLOWS_DELETE_EMPTY: LiteralString = """
DELETE FROM pgbeat_workflows WHERE id IN (
    SELECT w.id FROM pgbeat_workflows AS w
    WHERE w.created_at < now() - interval '1 hour'
      AND NOT EXISTS (SELECT FROM pgbeat_workflow_steps AS s WHERE s.workflow_id = w.id)
    LIMIT %(batch)s
)
RETURNING id"""
