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

-- The advance, in the statement that ends steps (any path: the worker's batched outcomes,
-- the reaper, cancel_job, an operator's cancel, pgbeat.testing's drain), once for all the
-- steps a statement ended. The trigger's WHEN clause, evaluated as each row is updated,
-- notes an ended step (its id, negated for failed or cancelled) in a transaction-local
-- setting, and is true for the first one only: the trigger runs once, at the end of the
-- statement, and advances every step noted. A plain job pays for the WHEN clause's first
-- test.
-- The children's step rows are locked in id order before their counts drop, so two
-- statements ending parents of one child at once queue on its row, and the second sees
-- the first's count (READ COMMITTED re-reads a row it waited for): exactly one of them
-- releases the child. A child whose parent ended failed or cancelled ends cancelled (that
-- end runs this again: the cascade is transitive) unless it runs anyway
-- (on_parent_failure = 'run'). A released child is due at the run_at it asked for, else
-- now() + its delay: a queue delay counts from the release. Every lookup is by key through
-- an array (= ANY), so the plans plpgsql keeps serve a parent of one child and the root of
-- 10,000 alike. The advance is SECURITY DEFINER (owned by the migrating role, search_path
-- pinned): any role that may end a job advances its workflow without rights on the step
-- tables.
CREATE OR REPLACE FUNCTION pgbeat_workflow_note(id bigint, status text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    noted text := current_setting('pgbeat.workflow_ended', true);
BEGIN
    PERFORM set_config('pgbeat.workflow_ended',
                       concat_ws(',', nullif(noted, ''),
                                 CASE WHEN status = 'done' THEN id ELSE -id END),
                       true);
    RETURN coalesce(noted, '') = '';  -- only the first step noted queues the trigger's call
END;
$$;

CREATE OR REPLACE FUNCTION pgbeat_workflow_advance_ended() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    ended bigint[];
    children bigint[];
    failed_children bigint[];
    ready bigint[];
    doomed bigint[];
BEGIN
    ended := string_to_array(current_setting('pgbeat.workflow_ended'), ',')::bigint[];
    PERFORM set_config('pgbeat.workflow_ended', '', true);
    children := ARRAY(SELECT child_id FROM pgbeat_workflow_edges
                      WHERE parent_id = ANY(ARRAY(SELECT abs(x) FROM unnest(ended) AS x)));
    IF cardinality(children) = 0 THEN
        RETURN;
    END IF;
    failed_children := ARRAY(SELECT child_id FROM pgbeat_workflow_edges
                             WHERE parent_id = ANY(ARRAY(SELECT -x FROM unnest(ended) AS x
                                                         WHERE x < 0)));
    PERFORM 1 FROM pgbeat_workflow_steps WHERE job_id = ANY(children) ORDER BY job_id FOR UPDATE;
    UPDATE pgbeat_workflow_steps AS s SET waiting_for = s.waiting_for - arrived.n
    FROM (SELECT child_id, count(*) AS n FROM unnest(children) AS child_id GROUP BY child_id)
         AS arrived
    WHERE s.job_id = arrived.child_id;
    doomed := ARRAY(SELECT job_id FROM pgbeat_workflow_steps
                    WHERE job_id = ANY(failed_children) AND on_parent_failure = 'cancel');
    ready := ARRAY(SELECT job_id FROM pgbeat_workflow_steps
                   WHERE job_id = ANY(children) AND waiting_for <= 0
                     AND NOT job_id = ANY(doomed));
    IF cardinality(ready) > 0 THEN
        UPDATE jobs AS j
        SET run_at = (SELECT greatest(coalesce(s.run_at, now() + s.delay), now())
                      FROM pgbeat_workflow_steps AS s WHERE s.job_id = j.id)
        WHERE j.id = ANY(ready) AND j.status = 'pending'
          AND j.run_at = '9999-12-29 00:00:00+00';
        IF FOUND THEN
            PERFORM pg_notify(pgbeat_channel('pgbeat_jobs'), '');
        END IF;
    END IF;
    IF cardinality(doomed) > 0 THEN
        WITH cancelled AS (
            UPDATE jobs
            SET status = 'cancelled', finished_at = now(),
                last_error = 'cancelled: a parent step ended failed or cancelled'
            WHERE id = ANY(doomed) AND status = 'pending'
            RETURNING id
        )
        SELECT ARRAY(SELECT id FROM cancelled) INTO doomed;
        IF cardinality(doomed) > 0 THEN
            PERFORM pg_notify(pgbeat_channel('pgbeat_finished'), CASE WHEN cardinality(doomed) <= 800
                                                      THEN array_to_string(doomed, ',')
                                                      ELSE '' END);
        END IF;
    END IF;
END;
$$;
ALTER FUNCTION pgbeat_workflow_advance_ended() SET search_path FROM CURRENT;
-- The trigger: its one call in a statement advances every step noted.
CREATE OR REPLACE FUNCTION pgbeat_workflow_advance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('pgbeat.workflow_ended', true) <> '' THEN
        PERFORM pgbeat_workflow_advance_ended();
    END IF;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS jobs_workflow_advance ON jobs;
CREATE TRIGGER jobs_workflow_advance AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IN ('pending', 'running')
          AND NEW.status IN ('done', 'failed', 'cancelled')
          AND pgbeat_workflow_note(NEW.id, NEW.status))
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
