-- The workflow advance of migration 0017, cheaper where a fan-out pays for it
-- (docs/workflows.md, "Figures"). The semantics are 0017's; what changes is the work:
--
-- * The trigger's WHEN clause notes an ended step with built-in functions only: calling
--   pgbeat_workflow_note (plpgsql) for every ended step cost more than the step's
--   completion itself. The note is the same transaction-local list of ids (negated for a
--   step ended failed or cancelled), and the clause is true for the first step noted
--   only, so the trigger still runs once per statement.
-- * A child whose parents that have not ended all ended in this statement (the 10,000
--   children of a fan-out's root: one parent each) is released without locking and
--   counting down its step row: its count, read committed, says no other parent is
--   left, and a parent ends once (a retried parent that ends again finds it released or
--   cancelled already: the release re-checks the job row, which the UPDATE locks). Only
--   the children still waiting for other parents lock their step rows in id order and
--   count down, as before, so the last-parent race is decided as in 0017: two statements
--   ending the last two parents of a child queue on its step row, and the second sees
--   the first's count (READ COMMITTED re-reads the row it waited for).
-- * A released child that asked for no run time and no delay is due now(), set without
--   reading its step row again.
--
-- A released child is still written once (its run_at, so it enters the claim's indexes);
-- the step rows of one-parent children are no longer written at all.

CREATE OR REPLACE FUNCTION pgbeat_workflow_advance_ended() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    ended bigint[];
    ready bigint[];
    ready_now bigint[];
    doomed bigint[];
    counting bigint[];
BEGIN
    ended := string_to_array(current_setting('pgbeat.workflow_ended'), ',')::bigint[];
    PERFORM set_config('pgbeat.workflow_ended', '', true);
    -- Each child of the ended steps: how many of its parents ended here (n), whether one
    -- of them failed, and its step row as committed (no lock).
    WITH arrived AS (
        SELECT e.child_id, count(*) AS n, bool_or(x < 0) AS failed
        FROM unnest(ended) AS x
        JOIN pgbeat_workflow_edges AS e ON e.parent_id = abs(x)
        GROUP BY e.child_id
    ),
    children AS (
        SELECT a.child_id, a.n, s.waiting_for,
               a.failed AND s.on_parent_failure = 'cancel' AS doom,
               s.run_at IS NULL AND s.delay = interval '0' AS now_due
        FROM arrived AS a JOIN pgbeat_workflow_steps AS s ON s.job_id = a.child_id
    )
    SELECT ARRAY(SELECT child_id FROM children WHERE doom),
           ARRAY(SELECT child_id FROM children WHERE NOT doom AND waiting_for <= n AND now_due),
           ARRAY(SELECT child_id FROM children WHERE NOT doom AND waiting_for <= n
                                                  AND NOT now_due),
           ARRAY(SELECT child_id FROM children WHERE NOT doom AND waiting_for > n)
    INTO doomed, ready_now, ready, counting
    FROM (SELECT 1) AS one;
    IF cardinality(counting) > 0 THEN
        -- Children with parents left: lock their step rows in id order, count down by the
        -- arrivals (counted again: the list holds each arrival), ready at zero.
        PERFORM 1 FROM pgbeat_workflow_steps WHERE job_id = ANY(counting)
        ORDER BY job_id FOR UPDATE;
        WITH counted AS (
            UPDATE pgbeat_workflow_steps AS s SET waiting_for = s.waiting_for - arrived.n
            FROM (SELECT e.child_id, count(*) AS n
                  FROM unnest(ended) AS x
                  JOIN pgbeat_workflow_edges AS e ON e.parent_id = abs(x)
                  WHERE e.child_id = ANY(counting)
                  GROUP BY e.child_id) AS arrived
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

-- The trigger of 0017 with the note written out in its WHEN clause (built-in functions
-- only). A plain job still pays for the clause's first test (workflow_id IS NULL).
DROP TRIGGER IF EXISTS jobs_workflow_advance ON jobs;
CREATE TRIGGER jobs_workflow_advance AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IN ('pending', 'running')
          AND NEW.status IN ('done', 'failed', 'cancelled')
          AND strpos(set_config('pgbeat.workflow_ended',
                                concat_ws(',', nullif(current_setting('pgbeat.workflow_ended',
                                                                      true), ''),
                                          CASE WHEN NEW.status = 'done' THEN NEW.id
                                               ELSE -NEW.id END),
                                true), ',') = 0)
    EXECUTE FUNCTION pgbeat_workflow_advance();
