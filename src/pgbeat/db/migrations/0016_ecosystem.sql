-- Fitting the ecosystem: tags on jobs, and pgbeat_enqueue(), the enqueue of SQL and of any
-- language's driver, with the checks of the Python API. Objects are not schema-qualified:
-- they go to the schema first on search_path, as every migration's.

-- Free-text labels an operator filters by ("tenant:42", "billing"). NULL when a job has
-- none, so untagged jobs stay out of the partial index below and pay nothing for it.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS tags text[];
-- `jobs list --tag T` and the dashboard's tag filter: tags @> ARRAY[T] (which implies the
-- predicate) reads this index instead of the table.
CREATE INDEX IF NOT EXISTS jobs_tags ON jobs USING gin (tags) WHERE tags IS NOT NULL;
-- A schedule's tags, given to each of its jobs (schedules.toml `tags = [...]`).
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS tags text[];

-- Enqueue a job from SQL: a trigger, a migration, psql, a Go or Node service. It refuses
-- what pgbeat.enqueue refuses (job_inputs.py, flow.py, limits.py), with an error naming the
-- argument (SQLSTATE 22023), and honours job keys as jobs/keys.py does. SECURITY INVOKER:
-- it runs with the caller's rights, so the enqueue role's column grants and row policies
-- (docs/least-privilege.sql) bind it as they bind a plain INSERT; it can set no id, state
-- or lease. search_path is pinned to the schema it was created in (below), so `jobs` is
-- pgbeat's whatever the caller's path. The insert trigger wakes idle workers at commit, as for any
-- enqueue; a rollback of the caller's transaction takes the job and the wake-up with it.
CREATE OR REPLACE FUNCTION pgbeat_enqueue(
    kind text,
    payload jsonb DEFAULT '{}',
    run_at timestamptz DEFAULT NULL,
    queue text DEFAULT 'default',
    priority int DEFAULT 0,
    limit_key text DEFAULT NULL,
    max_attempts int DEFAULT NULL,
    job_key text DEFAULT NULL,
    on_conflict text DEFAULT 'ignore',
    tags text[] DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    new_payload jsonb := coalesce(pgbeat_enqueue.payload, '{}');
    new_run_at timestamptz := coalesce(pgbeat_enqueue.run_at, now());
    new_attempts int := coalesce(pgbeat_enqueue.max_attempts, 8);
    new_tags text[] := pgbeat_enqueue.tags;
    payload_limit int := coalesce(
        nullif(current_setting('pgbeat.max_payload_bytes', true), '')::int, 1048576);
    payload_bytes int;
    tag text;
    new_id bigint;
BEGIN
    -- the checks, in the order and words of the Python API's
    IF pgbeat_enqueue.kind IS NULL OR pgbeat_enqueue.kind = '' THEN
        RAISE EXCEPTION 'pgbeat_enqueue: kind must be a non-empty string'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(pgbeat_enqueue.kind) > 200 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: kind has % characters, at most 200 are allowed',
            length(pgbeat_enqueue.kind) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    payload_bytes := octet_length(new_payload::text);
    IF payload_bytes > payload_limit THEN
        RAISE EXCEPTION 'pgbeat_enqueue: payload is % bytes of JSON, more than the limit of % '
            '(pgbeat.max_payload_bytes): store large data elsewhere and enqueue a reference',
            payload_bytes, payload_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT new_run_at BETWEEN '0001-01-03 00:00:00+00' AND '9999-12-29 00:00:00+00' THEN
        RAISE EXCEPTION 'pgbeat_enqueue: run_at % is out of range: give a time between '
            '0001-01-03 and 9999-12-29 (UTC)', new_run_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.queue IS NULL OR pgbeat_enqueue.queue = '' THEN
        RAISE EXCEPTION 'pgbeat_enqueue: queue must be a non-empty string'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(pgbeat_enqueue.queue) > 200 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: queue has % characters, at most 200 are allowed',
            length(pgbeat_enqueue.queue) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.queue <> btrim(pgbeat_enqueue.queue, E' \t\n\r\f\v') THEN
        RAISE EXCEPTION 'pgbeat_enqueue: queue % has leading or trailing spaces',
            quote_literal(pgbeat_enqueue.queue) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.priority IS NULL
       OR pgbeat_enqueue.priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: priority must be between -32768 and 32767, got %',
            coalesce(pgbeat_enqueue.priority::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.limit_key = '' THEN
        RAISE EXCEPTION 'pgbeat_enqueue: limit_key must be NULL or a non-empty string'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(pgbeat_enqueue.limit_key) > 1000 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: limit_key has % bytes of UTF-8, at most 1000 are allowed',
            octet_length(pgbeat_enqueue.limit_key) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF new_attempts < 1 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: max_attempts must be at least 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.job_key = '' THEN
        RAISE EXCEPTION 'pgbeat_enqueue: job_key must be NULL or a non-empty string'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(pgbeat_enqueue.job_key) > 1000 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: job_key has % bytes of UTF-8, at most 1000 are allowed',
            octet_length(pgbeat_enqueue.job_key) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.on_conflict IS NULL OR pgbeat_enqueue.on_conflict NOT IN
       ('ignore', 'replace', 'keep_earliest', 'keep_latest') THEN
        RAISE EXCEPTION 'pgbeat_enqueue: on_conflict must be one of ignore, replace, '
            'keep_earliest, keep_latest' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pgbeat_enqueue.on_conflict <> 'ignore' AND pgbeat_enqueue.job_key IS NULL THEN
        RAISE EXCEPTION 'pgbeat_enqueue: on_conflict applies to jobs with a job_key'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(new_tags) = 0 THEN
        new_tags := NULL;  -- no tags: outside the tags index
    END IF;
    IF array_ndims(new_tags) > 1 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: tags must be a one-dimensional array of text'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(new_tags) > 20 THEN
        RAISE EXCEPTION 'pgbeat_enqueue: tags has % tags, at most 20 are allowed',
            cardinality(new_tags) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH tag IN ARRAY coalesce(new_tags, '{}') LOOP
        IF tag IS NULL OR tag = '' OR length(tag) > 100 THEN
            RAISE EXCEPTION 'pgbeat_enqueue: tags: a tag must be a non-empty string of at most '
                '100 characters, got %', coalesce(quote_literal(left(tag, 40)), 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;

    IF pgbeat_enqueue.job_key IS NULL THEN
        INSERT INTO jobs (kind, payload, run_at, max_attempts, queue, priority, limit_key, tags)
        VALUES (pgbeat_enqueue.kind, new_payload, new_run_at, new_attempts,
                pgbeat_enqueue.queue, pgbeat_enqueue.priority, pgbeat_enqueue.limit_key, new_tags)
        RETURNING id INTO new_id;
        RETURN new_id;
    END IF;
    IF pgbeat_enqueue.on_conflict = 'ignore' THEN  -- the key's live job wins (jobs_live_key)
        INSERT INTO jobs (kind, job_key, payload, run_at, max_attempts, queue, priority,
                          limit_key, tags)
        VALUES (pgbeat_enqueue.kind, pgbeat_enqueue.job_key, new_payload, new_run_at,
                new_attempts, pgbeat_enqueue.queue, pgbeat_enqueue.priority,
                pgbeat_enqueue.limit_key, new_tags)
        ON CONFLICT (kind, job_key)
            WHERE job_key IS NOT NULL AND superseded_at IS NULL
              AND status IN ('pending', 'running')
        DO NOTHING
        RETURNING id INTO new_id;
        RETURN new_id;  -- NULL: the key had a live job
    END IF;
    -- replace, keep_earliest, keep_latest: as JOBS_UPSERT_KEYED and JOBS_SUPERSEDE_KEYED
    -- (db/sql/jobs/enqueue.py) in jobs/keys.py's loop.
    FOR turn IN 1..10 LOOP
        INSERT INTO jobs AS j (kind, job_key, payload, run_at, max_attempts, queue, priority,
                               limit_key, tags)
        VALUES (pgbeat_enqueue.kind, pgbeat_enqueue.job_key, new_payload, new_run_at,
                new_attempts, pgbeat_enqueue.queue, pgbeat_enqueue.priority,
                pgbeat_enqueue.limit_key, new_tags)
        ON CONFLICT (kind, job_key)
            WHERE job_key IS NOT NULL AND superseded_at IS NULL
              AND status IN ('pending', 'running')
        DO UPDATE SET
            payload = excluded.payload,
            run_at = CASE pgbeat_enqueue.on_conflict
                         WHEN 'keep_latest' THEN greatest(j.run_at, excluded.run_at)
                         WHEN 'keep_earliest' THEN least(j.run_at, excluded.run_at)
                         ELSE excluded.run_at
                     END,
            attempts = j.attempts + sign(j.attempts)::int,
            max_attempts = j.attempts + sign(j.attempts)::int + excluded.max_attempts,
            last_error = NULL,
            queue = excluded.queue, priority = excluded.priority,
            limit_key = excluded.limit_key, tags = excluded.tags
        WHERE j.status = 'pending'
        RETURNING id INTO new_id;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
        -- the key's live job is running: it keeps its run and gives up its key
        UPDATE jobs SET superseded_at = now(),
            last_error = 'superseded while running by a newer enqueue of its job_key '
                         '(on_conflict=' || pgbeat_enqueue.on_conflict || '): not run again'
        WHERE kind = pgbeat_enqueue.kind AND job_key = pgbeat_enqueue.job_key
          AND job_key IS NOT NULL AND superseded_at IS NULL AND status = 'running';
    END LOOP;
    RAISE EXCEPTION 'pgbeat_enqueue: the live job of % % was claimed again 10 times while '
        'being replaced; try again', pgbeat_enqueue.kind, quote_literal(pgbeat_enqueue.job_key)
        USING ERRCODE = 'lock_not_available';
END;
$$;
-- The schema the function was just created in (the first of search_path that exists), by
-- name: FROM CURRENT would keep "$user", read again at each call as the caller's name.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION pgbeat_enqueue(text, jsonb, timestamptz, text, integer, '
                   'text, integer, text, text, text[]) SET search_path = %I', current_schema());
END
$$;
