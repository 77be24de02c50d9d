-- A workflow's jobs are found through its step rows, not through an index of jobs
-- (docs/workflows.md, "Storage"). The partial index jobs_workflow (workflow_id, non-NULL
-- for a step) was the only index of jobs that a step entered and a plain job did not, and
-- a step changes every time it moves: its insert, the release of a held step (run_at), its
-- claim (status) and its end (status) are none of them HOT updates, so each wrote a new
-- entry in it. Measured on a fan-out of 1 + 10,000 + 1 drained by one worker
-- (pg_stat_statements, whole drain): claims 136k -> 118k shared buffers (10,000
-- independent jobs: 116k), the root's release of 10,000 children 167k -> 147k, the
-- completions apart from the advance 138k -> 120k (independent: 124k).
--
-- pgbeat_workflow_steps already holds (workflow_id, name) UNIQUE: one row per step, inserted
-- with its job and deleted with it (the jobs_workflow_forget trigger), so the statements
-- that read a workflow's jobs (the cancel, the dashboard's filter, retention's "a workflow's
-- steps go together", the repair pass's clean-up of empty workflows) go through it and the
-- jobs' primary key (src/pgbeat/db/sql/workflows.py, jobs/retention.py, jobs/dashboard.py).
-- Every role that runs one of them reads the step table already (docs/least-privilege.sql).
DROP INDEX IF EXISTS jobs_workflow;

-- The advance of migration 0028, same semantics, same locks in the same order, with one
-- lookup fewer where a fan-out pays it on its critical path: the statement that ends the
-- root of 10,000 children read the 10,000 children's step rows by primary key (20k shared
-- buffers, 20-30 ms on a quiet machine, before any child can be claimed) to learn what
-- their edges can say. An edge is `sole` when its parent is the child's only one and the
-- child asked no run time (the enqueue knows: pgbeat/jobs/workflow_definition.py); such a
-- child, its parent ended done, has waiting_for 1 (counts drop only for children with
-- parents left, and a parent ends once: the release re-checks the job row) and is due
-- now, so its step row adds nothing. A failed parent's sole children are looked up as
-- before (on_parent_failure). Edges inserted before this migration, or by an older
-- pgbeat, are not sole and take the path of 0028.
ALTER TABLE pgbeat_workflow_edges ADD COLUMN IF NOT EXISTS sole boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION pgbeat_workflow_advance_ended() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    ended bigint[];
    ready bigint[];
    ready_now bigint[];
    doomed bigint[];
    counting bigint[];
    arrivals bigint[];
    parents bigint[];
    failed_parents bigint[];
BEGIN
    ended := string_to_array(current_setting('pgbeat.workflow_ended'), ',')::bigint[];
    PERFORM set_config('pgbeat.workflow_ended', '', true);
    parents := ARRAY(SELECT abs(x) FROM unnest(ended) AS x);
    failed_parents := ARRAY(SELECT -x FROM unnest(ended) AS x WHERE x < 0);
    -- Each child of the ended steps: how many of its parents ended here (n), whether one
    -- of them failed, and its step row as committed (no lock). A child whose edge is
    -- sole (its only parent, no run time asked) and whose parent ended done is ready now
    -- without its step row: its count is 1 (counts drop only for children with parents
    -- left) and it is due at once.
    WITH arrived AS (
        SELECT e.child_id, count(*) AS n, bool_or(e.parent_id = ANY(failed_parents)) AS failed,
               bool_and(e.sole) AS sole
        FROM pgbeat_workflow_edges AS e
        WHERE e.parent_id = ANY(parents)
        GROUP BY e.child_id
    ),
    children AS (
        SELECT a.child_id, a.n, s.waiting_for,
               a.failed AND s.on_parent_failure = 'cancel' AS doom,
               s.run_at IS NULL AND s.delay = interval '0' AS now_due
        FROM arrived AS a JOIN pgbeat_workflow_steps AS s ON s.job_id = a.child_id
        WHERE s.job_id = ANY(ARRAY(SELECT child_id FROM arrived WHERE NOT sole OR failed))
        UNION ALL
        SELECT a.child_id, a.n, 1, false, true FROM arrived AS a WHERE a.sole AND NOT a.failed
    )
    SELECT ARRAY(SELECT child_id FROM children WHERE doom),
           ARRAY(SELECT child_id FROM children WHERE NOT doom AND waiting_for <= n AND now_due),
           ARRAY(SELECT child_id FROM children WHERE NOT doom AND waiting_for <= n
                                                  AND NOT now_due),
           ARRAY(SELECT child_id FROM children WHERE NOT doom AND waiting_for > n
                 ORDER BY child_id),
           ARRAY(SELECT n FROM children WHERE NOT doom AND waiting_for > n ORDER BY child_id)
    INTO doomed, ready_now, ready, counting, arrivals
    FROM (SELECT 1) AS one;
    IF cardinality(counting) > 0 THEN
        -- Children with parents left: lock their step rows in id order, count down by the
        -- arrivals counted above (the list holds each arrival once), ready at zero. The
        -- arrivals are not joined from the edges again: filtered by child, that join read
        -- every edge of a fan-in's child (10,000 for a fan-out's summary) in every
        -- statement that ended some of its parents.
        PERFORM 1 FROM pgbeat_workflow_steps WHERE job_id = ANY(counting)
        ORDER BY job_id FOR UPDATE;
        WITH counted AS (
            UPDATE pgbeat_workflow_steps AS s SET waiting_for = s.waiting_for - arrived.n
            FROM unnest(counting, arrivals) AS arrived(child_id, n)
            WHERE s.job_id = arrived.child_id
            RETURNING s.job_id, s.waiting_for, s.run_at IS NULL AND s.delay = interval '0'
                AS now_due
        )
        SELECT ready_now || ARRAY(SELECT job_id FROM counted
                                  WHERE waiting_for <= 0 AND now_due),
               ready || ARRAY(SELECT job_id FROM counted WHERE waiting_for <= 0 AND NOT now_due)
        INTO ready_now, ready
        FROM (SELECT 1) AS one;
    END IF;
    IF cardinality(ready_now) > 0 THEN
        UPDATE jobs SET run_at = now()
        WHERE id = ANY(ready_now) AND status = 'pending' AND run_at = '9999-12-29 00:00:00+00';
        IF FOUND THEN
            PERFORM pg_notify(pgbeat_channel('pgbeat_jobs'), '');
        END IF;
    END IF;
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
            PERFORM pg_notify(pgbeat_channel('pgbeat_finished'),
                              CASE WHEN cardinality(doomed) <= 800
                                   THEN array_to_string(doomed, ',') ELSE '' END);
        END IF;
    END IF;
END;
$$;
ALTER FUNCTION pgbeat_workflow_advance_ended() SET search_path FROM CURRENT;
