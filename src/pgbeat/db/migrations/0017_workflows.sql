-- Workflows: jobs that wait for other jobs (docs/workflows.md).
--
-- A step is an ordinary job with a workflow_id. A step that waits for parents is inserted
-- pending with run_at 9999-12-29 00:00 UTC ("held"): never due, so the claim needs no
-- change and skips it through jobs_ready like any future job. The date is the latest that
-- every reader decodes (a real 'infinity' breaks `min(run_at) - now()` before PostgreSQL 17
-- and psycopg's decoding). Plain jobs pay for a NULL test in two trigger WHEN clauses.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS workflow_id bigint;
CREATE INDEX IF NOT EXISTS jobs_workflow ON jobs (workflow_id) WHERE workflow_id IS NOT NULL;

-- One row per workflow; key makes enqueue_workflow(..., key=K) insert once.
CREATE TABLE IF NOT EXISTS pgbeat_workflows (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text,
    key text UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per step: its name in the workflow, how many parents have not ended yet, what a
-- parent's failure does to it, and the run time it asked for (given when it is released:
-- run_at, else now() + delay, so a queue delay counts from the release).
CREATE TABLE IF NOT EXISTS pgbeat_workflow_steps (
    job_id bigint PRIMARY KEY,
    workflow_id bigint NOT NULL,
    name text NOT NULL,
    waiting_for int NOT NULL,
    on_parent_failure text NOT NULL CHECK (on_parent_failure IN ('cancel', 'run')),
    run_at timestamptz,
    delay interval NOT NULL DEFAULT '0',
    UNIQUE (workflow_id, name)
);

-- parent_id must end before child_id starts.
CREATE TABLE IF NOT EXISTS pgbeat_workflow_edges (
    parent_id bigint NOT NULL,
    child_id bigint NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX IF NOT EXISTS pgbeat_workflow_edges_child ON pgbeat_workflow_edges (child_id);

-- The advance, in the transaction that ends a step (any path: the worker's outcomes, the
-- reaper, cancel_job, an operator's cancel, pgbeat.testing's drain). The children's step
-- rows are locked in id order before their counts drop, so two parents of one child ending
-- at once in two transactions queue on the row, and the second sees the first's count
-- (READ COMMITTED re-reads a row it waited for): exactly one of them releases the child.
-- A child whose parent ended failed or cancelled ends cancelled (its own end runs this
-- again: the cascade is transitive) unless it runs anyway (on_parent_failure = 'run').
-- Owned by the migrating role and run with its rights, so any role that may end a job
-- advances its workflow without grants on the step tables.
CREATE OR REPLACE FUNCTION pgbeat_workflow_advance() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    released int;
    cancelled text;
BEGIN
    PERFORM 1 FROM pgbeat_workflow_steps
    WHERE job_id IN (SELECT child_id FROM pgbeat_workflow_edges WHERE parent_id = NEW.id)
    ORDER BY job_id FOR UPDATE;
    WITH counted AS (
        UPDATE pgbeat_workflow_steps AS s SET waiting_for = s.waiting_for - 1
        FROM pgbeat_workflow_edges AS e
        WHERE e.parent_id = NEW.id AND s.job_id = e.child_id
        RETURNING s.job_id, s.waiting_for,
                  NEW.status <> 'done' AND s.on_parent_failure = 'cancel' AS cancel,
                  s.run_at AS asked_run_at, s.delay
    ), moved AS (
        UPDATE jobs AS j
        SET status = CASE WHEN c.cancel THEN 'cancelled' ELSE 'pending' END,
            finished_at = CASE WHEN c.cancel THEN now() ELSE j.finished_at END,
            last_error = CASE WHEN c.cancel
                              THEN 'cancelled: parent job ' || NEW.id || ' ended ' || NEW.status
                              ELSE j.last_error END,
            run_at = CASE WHEN c.cancel THEN j.run_at
                          ELSE greatest(coalesce(c.asked_run_at, now() + c.delay), now()) END
        FROM counted AS c
        WHERE j.id = c.job_id AND j.status = 'pending'
          AND (c.cancel OR (c.waiting_for <= 0 AND j.run_at = '9999-12-29 00:00:00+00'))
        RETURNING j.id, j.status
    )
    SELECT count(*) FILTER (WHERE status = 'pending'),
           string_agg(id::text, ',') FILTER (WHERE status = 'cancelled')
    INTO released, cancelled FROM moved;
    IF released > 0 THEN
        PERFORM pg_notify('pgbeat_jobs', '');
    END IF;
    IF cancelled IS NOT NULL THEN
        PERFORM pg_notify('pgbeat_finished', CASE WHEN length(cancelled) < 7000
                                                  THEN cancelled ELSE '' END);
    END IF;
    RETURN NULL;
END;
$$;
ALTER FUNCTION pgbeat_workflow_advance() SET search_path FROM CURRENT;
DROP TRIGGER IF EXISTS jobs_workflow_advance ON jobs;
CREATE TRIGGER jobs_workflow_advance AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IN ('pending', 'running')
          AND NEW.status IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION pgbeat_workflow_advance();

-- A deleted step (retention, jobs purge, delete) takes its step row and edges with it.
CREATE OR REPLACE FUNCTION pgbeat_workflow_forget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    DELETE FROM pgbeat_workflow_steps WHERE job_id = OLD.id;
    DELETE FROM pgbeat_workflow_edges WHERE child_id = OLD.id;
    DELETE FROM pgbeat_workflow_edges WHERE parent_id = OLD.id;
    RETURN NULL;
END;
$$;
ALTER FUNCTION pgbeat_workflow_forget() SET search_path FROM CURRENT;
DROP TRIGGER IF EXISTS jobs_workflow_forget ON jobs;
CREATE TRIGGER jobs_workflow_forget AFTER DELETE ON jobs FOR EACH ROW
    WHEN (OLD.workflow_id IS NOT NULL)
    EXECUTE FUNCTION pgbeat_workflow_forget();
