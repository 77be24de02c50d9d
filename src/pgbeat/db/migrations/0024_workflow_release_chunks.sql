-- Large fan-outs released in chunks (docs/workflows.md, "Storage").
--
-- The advance of 0022 released every child of an ended step in the statement that ended
-- it: the root of a 10,000-child fan-out ended in a statement that wrote 10,000 job rows
-- (each row's new version and its entries in every claim index), and not one child could
-- be claimed until it committed. Now a statement releases 1,000 of the children that are
-- due at once (the first 1,000 by id, the order they were enqueued in) and keeps the
-- rest as chunks of 1,000 ids in pgbeat_workflow_releases, in the same transaction. Every
-- later advance (any statement that ends a workflow step: the first chunk's children as
-- they finish) releases one more chunk, so the drain starts after the first chunk and the
-- rest of the release overlaps it. The repair pass releases every chunk left (workers that
-- all stopped mid-release).
--
-- The semantics are unchanged: a deferred child is one whose parents all ended done (it is
-- decided in the transaction that ended the last of them, as before); only the write of
-- its job row (run_at from the held date to now()) is later. The release is guarded as
-- ever (status = 'pending' AND run_at = held), so a chunk whose steps were cancelled
-- (cancel_workflow) or deleted in the meantime, or released by the repair pass, changes
-- nothing; two statements releasing at once take different chunks (SKIP LOCKED).

-- Children whose parents all ended done, still to be released: ids in id order.
CREATE TABLE IF NOT EXISTS pgbeat_workflow_releases (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ids bigint[] NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Releases up to `chunks` chunks of deferred children, oldest first, skipping chunks
-- another statement is releasing; returns the steps released. SECURITY DEFINER as the
-- advance: the repair pass (the worker role) calls it too.
CREATE OR REPLACE FUNCTION pgbeat_workflow_release_deferred(chunks int) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    taken bigint[];
    released int;
BEGIN
    WITH popped AS (
        DELETE FROM pgbeat_workflow_releases WHERE id IN (
            SELECT id FROM pgbeat_workflow_releases ORDER BY id LIMIT chunks
            FOR UPDATE SKIP LOCKED)
        RETURNING ids
    )
    SELECT ARRAY(SELECT x FROM popped, unnest(popped.ids) AS x) INTO taken;
    IF cardinality(taken) = 0 THEN
        RETURN 0;
    END IF;
    UPDATE jobs SET run_at = now()
    WHERE id = ANY(taken) AND status = 'pending' AND run_at = '9999-12-29 00:00:00+00';
    GET DIAGNOSTICS released = ROW_COUNT;
    IF released > 0 THEN
        PERFORM pg_notify(pgbeat_channel('pgbeat_jobs'), '');
    END IF;
    RETURN released;
END;
$$;
ALTER FUNCTION pgbeat_workflow_release_deferred(int) SET search_path FROM CURRENT;

-- The advance of 0022, with the release of a large fan-out in chunks.
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
    -- Any step's end goes on with a large fan-out's release: one chunk, if one waits (the
    -- chunks of earlier statements: this one's own are kept below).
    PERFORM pgbeat_workflow_release_deferred(1);
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
    IF cardinality(ready_now) > 1000 THEN
        -- A large fan-out: the first 1,000 (in id order) now, the rest in chunks of 1,000
        -- that later statements release (pgbeat_workflow_release_deferred, below).
        ready_now := ARRAY(SELECT x FROM unnest(ready_now) AS x ORDER BY x);
        INSERT INTO pgbeat_workflow_releases (ids)
        SELECT ready_now[i:i + 999]
        FROM generate_series(1001, cardinality(ready_now), 1000) AS i ORDER BY i;
        ready_now := ready_now[1:1000];
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
