-- The workflow advance run by the statements that end jobs, not by a row trigger
-- (docs/workflows.md, "Storage"). Same semantics but for the two hardenings below, same
-- locks in the same order; what changes is who pays for it.
--
-- The advance was an AFTER UPDATE OF status ... FOR EACH ROW trigger on jobs (0017, 0022).
-- Its WHEN clause was false for a plain job, but PostgreSQL fetches the old row version for
-- an AFTER row trigger and queues nothing only after evaluating the clause, for every row
-- every claim and every completion updates: plain jobs paid 2.5-8 % of a drain for
-- workflows they never used (bench/workflow_bench.py, the plain row; docs/benchmarks.md,
-- "Round four, tenth session") and two shared buffers a job, one in its claim and one in
-- its completion (24.4 -> 22.4 over a drain's claims and completions: bench/
-- statement_buffers.py).
--
-- Now every statement of pgbeat's that can end a job (the worker's batched outcomes, the
-- reaper, cancels by id, by key, by workflow and by a schedule's overlap, the fail of an
-- unreadable claim, the repair pass) returns the ended rows' workflow_id and calls
-- pgbeat_workflow_advance with the steps it ended (ids, negated for failed or cancelled),
-- once, after its update, in the same statement: a plain job's statement tests a NULL and
-- calls nothing. The advance runs in the transaction that ends the step, as before. A
-- cascade (a child cancelled because a parent failed) goes round by round in the
-- function, where the trigger recursed.
--
-- Two hardenings in the same pass (docs/reliability.md, the third pass's table):
--
-- * A step row's asked run time can no longer fail the statement that releases it. The
--   API refuses a delay beyond 365,250 days either way and a run_at outside 0001-01-03 ..
--   9999-12-29 (pgbeat/job_inputs.py), but a role that may insert step rows (the enqueue
--   role, or SQL) could write '300000 years': the advance raised "timestamp out of range"
--   in the statement that ended the step's last parent, so that parent's completion failed
--   with every outcome of its batch (the worker wrote them again one by one and failed the
--   parent), and the repair pass raised it on every round. pgbeat_step_release_at clamps
--   the release time; CHECK constraints on pgbeat_workflow_steps refuse what the API
--   refuses, NOT VALID so that a row written before this migration never stops it (the
--   clamp covers such rows).
-- * The advance releases and cancels only jobs that are workflow steps (workflow_id not
--   NULL): the enqueue role may insert step rows and edges for any job id, and a step row
--   for another application's plain job with an edge from a step of one's own that fails
--   cancelled that job (docs/reliability.md: rows of other workflows are not covered yet).
--
-- What no longer advances at once: a step ended by hand-written SQL (UPDATE jobs SET
-- status = ...), or by a worker of a pgbeat older than this migration during a rolling
-- upgrade. The repair pass (every worker, every 30 s by default) decides such steps from
-- their parents' statuses, as it always did for a state a lost advance left behind.
DROP TRIGGER IF EXISTS jobs_workflow_advance ON jobs;
DROP FUNCTION IF EXISTS pgbeat_workflow_advance();
DROP FUNCTION IF EXISTS pgbeat_workflow_note(bigint, text);

-- A released step's time: the run_at it asked for, else now() + its delay, never before
-- now(), its delay clamped to the API's 365,250 days either way and the result to
-- 9999-12-28 (an 'infinity' run_at: never due, but a time every reader decodes, and not
-- the held marker, which the repair pass would take for a step still waiting). Used by the
-- advance and by the repair pass (db/sql/workflows.py).
CREATE OR REPLACE FUNCTION pgbeat_step_release_at(run_at timestamptz, delay interval)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT least(greatest(coalesce(run_at,
                                   now() + least(greatest(delay, interval '-365250 days'),
                                                 interval '365250 days')),
                          now()),
                 timestamptz '9999-12-28 00:00:00+00')
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'pgbeat_workflow_steps_delay'
                   AND conrelid = 'pgbeat_workflow_steps'::regclass) THEN
        ALTER TABLE pgbeat_workflow_steps ADD CONSTRAINT pgbeat_workflow_steps_delay
            CHECK (delay BETWEEN interval '-365250 days' AND interval '365250 days') NOT VALID;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'pgbeat_workflow_steps_run_at'
                   AND conrelid = 'pgbeat_workflow_steps'::regclass) THEN
        ALTER TABLE pgbeat_workflow_steps ADD CONSTRAINT pgbeat_workflow_steps_run_at
            CHECK (run_at BETWEEN timestamptz '0001-01-03 00:00:00+00'
                              AND timestamptz '9999-12-29 00:00:00+00') NOT VALID;
    END IF;
END
$$;

-- One round of the advance of 0032 for the steps given (ids, negated for a step ended
-- failed or cancelled): releases or counts down their children and cancels the doomed
-- ones, whose ids it returns negated (the next round's steps). It releases at
-- pgbeat_step_release_at's time and releases and cancels workflow steps only.
CREATE OR REPLACE FUNCTION pgbeat_workflow_advance_round(ended bigint[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    ready bigint[];
    ready_now bigint[];
    in_place bigint[];
    doomed bigint[];
    counting bigint[];
    arrivals bigint[];
    parents bigint[];
    failed_parents bigint[];
BEGIN
    IF coalesce(cardinality(ended), 0) = 0 THEN
        RETURN '{}';
    END IF;
    parents := ARRAY(SELECT abs(x) FROM unnest(ended) AS x);
    failed_parents := ARRAY(SELECT -x FROM unnest(ended) AS x WHERE x < 0);
    -- Parents ended done with READY_IN_PLACE (1,000) sole children or more: a bounded
    -- probe of their edges (at most that many each), so their sole edges are left out of
    -- the per-child pass below (no row per child is grouped, counted or released). First
    -- the parents with a sole edge at all, in one semi-join: most ended steps have none (a
    -- fan-out's children, whose one edge leads to the summary), and a probe each cost a
    -- statement that ends 100 of them 0.35-0.67 ms more (the semi-join 0.05-0.4 ms).
    in_place := ARRAY(
        SELECT p FROM unnest(parents) AS p
        WHERE p <> ALL(failed_parents)
          AND EXISTS (SELECT FROM pgbeat_workflow_edges AS e WHERE e.parent_id = p AND e.sole));
    IF cardinality(in_place) > 0 THEN
        in_place := ARRAY(
            SELECT p FROM unnest(in_place) AS p
            WHERE (SELECT count(*) FROM (
                       SELECT FROM pgbeat_workflow_edges AS e
                       WHERE e.parent_id = p AND e.sole LIMIT 1000) AS sole) >= 1000);
    END IF;
    -- Each child of the ended steps: how many of its parents ended here (n), whether one
    -- of them failed, and its step row as committed (no lock). A child whose edge is
    -- sole (its only parent, no run time asked) and whose parent ended done is ready now
    -- without its step row: its count is 1 (counts drop only for children with parents
    -- left) and it is due at once. A parent in in_place leaves such children held, for
    -- the claims to take where they are (pgbeat_workflow_ready): they have no other
    -- parent, so nothing below counts them.
    WITH arrived AS (
        SELECT e.child_id, count(*) AS n, bool_or(e.parent_id = ANY(failed_parents)) AS failed,
               bool_and(e.sole) AS sole
        FROM pgbeat_workflow_edges AS e
        WHERE e.parent_id = ANY(parents) AND NOT (e.sole AND e.parent_id = ANY(in_place))
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
    IF cardinality(in_place) > 0 THEN
        INSERT INTO pgbeat_workflow_ready (parent_id, at, touched)
        SELECT p, now(), now() FROM unnest(in_place) AS p
        ON CONFLICT (parent_id) DO NOTHING;
        PERFORM pg_notify(pgbeat_channel('pgbeat_jobs'), 'ready');
    END IF;
    IF cardinality(ready_now) > 0 THEN
        UPDATE jobs SET run_at = now()
        WHERE id = ANY(ready_now) AND status = 'pending' AND run_at = '9999-12-29 00:00:00+00'
          AND workflow_id IS NOT NULL;
        IF FOUND THEN
            PERFORM pg_notify(pgbeat_channel('pgbeat_jobs'), '');
        END IF;
    END IF;
    IF cardinality(ready) > 0 THEN
        UPDATE jobs AS j
        SET run_at = (SELECT pgbeat_step_release_at(s.run_at, s.delay)
                      FROM pgbeat_workflow_steps AS s WHERE s.job_id = j.id)
        WHERE j.id = ANY(ready) AND j.status = 'pending' AND j.workflow_id IS NOT NULL
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
            WHERE id = ANY(doomed) AND status = 'pending' AND workflow_id IS NOT NULL
            RETURNING id
        )
        SELECT ARRAY(SELECT id FROM cancelled) INTO doomed;
        IF cardinality(doomed) > 0 THEN
            PERFORM pg_notify(pgbeat_channel('pgbeat_finished'),
                              CASE WHEN cardinality(doomed) <= 800
                                   THEN array_to_string(doomed, ',') ELSE '' END);
        END IF;
        RETURN ARRAY(SELECT -d FROM unnest(doomed) AS d);  -- ended cancelled: the next round
    END IF;
    RETURN '{}';
END;
$$;
ALTER FUNCTION pgbeat_workflow_advance_round(bigint[]) SET search_path FROM CURRENT;

-- The advance of the steps a statement ended, round after round until no child was
-- cancelled (a failure's cascade is transitive). True, so a statement can say that it
-- ended workflow steps. SECURITY DEFINER, search_path pinned: any role that may end a job
-- advances its workflow without rights on the step tables, as with the trigger.
CREATE OR REPLACE FUNCTION pgbeat_workflow_advance(ended bigint[]) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    steps bigint[] := ended;
BEGIN
    WHILE coalesce(cardinality(steps), 0) > 0 LOOP
        steps := pgbeat_workflow_advance_round(steps);
    END LOOP;
    RETURN true;
END;
$$;
ALTER FUNCTION pgbeat_workflow_advance(bigint[]) SET search_path FROM CURRENT;

-- What a worker of an older pgbeat calls to warm a new connection (its advance itself ran
-- in the trigger dropped above): the steps noted in the setting the trigger wrote, none.
CREATE OR REPLACE FUNCTION pgbeat_workflow_advance_ended() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM pgbeat_workflow_advance(
        string_to_array(nullif(current_setting('pgbeat.workflow_ended', true), ''), ',')::bigint[]);
    PERFORM set_config('pgbeat.workflow_ended', '', true);
END;
$$;
ALTER FUNCTION pgbeat_workflow_advance_ended() SET search_path FROM CURRENT;
