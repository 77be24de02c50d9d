-- The workflow advance of migration 0022 with the fan-in's count-down read once
-- (docs/workflows.md, "Figures"). Same semantics, same locks in the same order; what
-- changes is the work of a statement that ends parents of a child still waiting for
-- others (each completion batch of a fan-out's children, counting down its summary):
--
-- * 0022 counted the arrivals twice: once to sort the children (released, doomed, still
--   counting), and again in the count-down's UPDATE, joining the ended ids to the edges
--   filtered by `child_id = ANY(counting)`. That filter reads the child's edges through
--   pgbeat_workflow_edges_child: every edge of the summary (10,000 for a fan-out of
--   10,000) in every completion statement of its parents. The count-down now takes the
--   arrivals the first query counted (two aligned arrays, in child id order).
-- * The first query looked the ended steps' edges and their children's step rows up by
--   joins with unnest(ended), which the planner ran as hash joins over sequential scans
--   of pgbeat_workflow_edges and pgbeat_workflow_steps: every statement that ended a
--   step read both tables whole (every workflow's, however many are kept). Both are
--   looked up by `= ANY(array)` now, through their primary keys, as in 0017.

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
    -- of them failed, and its step row as committed (no lock).
    WITH arrived AS (
        SELECT e.child_id, count(*) AS n, bool_or(e.parent_id = ANY(failed_parents)) AS failed
        FROM pgbeat_workflow_edges AS e
        WHERE e.parent_id = ANY(parents)
        GROUP BY e.child_id
    ),
    children AS (
        SELECT a.child_id, a.n, s.waiting_for,
               a.failed AND s.on_parent_failure = 'cancel' AS doom,
               s.run_at IS NULL AND s.delay = interval '0' AS now_due
        FROM arrived AS a JOIN pgbeat_workflow_steps AS s ON s.job_id = a.child_id
        WHERE s.job_id = ANY(ARRAY(SELECT child_id FROM arrived))
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
