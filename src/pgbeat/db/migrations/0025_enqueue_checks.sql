-- pgbeat_enqueue() of 0016 again, its checks written once: a field's text checks
-- (non-empty, not too long) are one call of pgbeat_text_problem, and the checks are one
-- ordered list whose first problem is raised. The signature, the errors (words, order,
-- SQLSTATE 22023) and what the function inserts are 0016's; so are its rights
-- (SECURITY INVOKER) and its pinned search_path (set again below, as 0016 set it).

-- The problem with a text argument of pgbeat_enqueue, in its words, or NULL when there is
-- none: NULL where it must be given, empty, or longer than max_length characters (bytes of
-- UTF-8 with in_bytes). SQL, STABLE and without settings, so it is inlined into the
-- caller's expression rather than called.
CREATE OR REPLACE FUNCTION pgbeat_text_problem(
    field text, value text, nullable boolean, max_length int, in_bytes boolean
) RETURNS text
LANGUAGE sql STABLE
AS $$
SELECT CASE
    WHEN value = '' OR (value IS NULL AND NOT nullable)
        THEN field || CASE WHEN nullable THEN ' must be NULL or a non-empty string'
                           ELSE ' must be a non-empty string' END
    WHEN in_bytes AND octet_length(value) > max_length
        THEN format('%s has %s bytes of UTF-8, at most %s are allowed',
                    field, octet_length(value), max_length)
    WHEN NOT in_bytes AND length(value) > max_length
        THEN format('%s has %s characters, at most %s are allowed',
                    field, length(value), max_length)
END
$$;

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
    new_tags text[] := nullif(pgbeat_enqueue.tags, '{}');  -- no tags: outside the tags index
    payload_limit int := coalesce(
        nullif(current_setting('pgbeat.max_payload_bytes', true), '')::int, 1048576);
    problem text;
    tag text;
    new_id bigint;
BEGIN
    -- the checks, in the order and words of the Python API's: the first problem found
    problem := coalesce(
        pgbeat_text_problem('kind', pgbeat_enqueue.kind, false, 200, false),
        CASE WHEN octet_length(new_payload::text) > payload_limit THEN format(
            'payload is %s bytes of JSON, more than the limit of %s (pgbeat.max_payload_bytes): '
            'store large data elsewhere and enqueue a reference',
            octet_length(new_payload::text), payload_limit) END,
        CASE WHEN NOT new_run_at BETWEEN '0001-01-03 00:00:00+00' AND '9999-12-29 00:00:00+00'
            THEN format('run_at %s is out of range: give a time between 0001-01-03 and '
                        '9999-12-29 (UTC)', new_run_at) END,
        pgbeat_text_problem('queue', pgbeat_enqueue.queue, false, 200, false),
        CASE WHEN pgbeat_enqueue.queue <> btrim(pgbeat_enqueue.queue, E' \t\n\r\f\v')
            THEN format('queue %s has leading or trailing spaces',
                        quote_literal(pgbeat_enqueue.queue)) END,
        CASE WHEN pgbeat_enqueue.priority IS NULL
                  OR pgbeat_enqueue.priority NOT BETWEEN -32768 AND 32767
            THEN format('priority must be between -32768 and 32767, got %s',
                        coalesce(pgbeat_enqueue.priority::text, 'NULL')) END,
        pgbeat_text_problem('limit_key', pgbeat_enqueue.limit_key, true, 1000, true),
        CASE WHEN new_attempts < 1 THEN 'max_attempts must be at least 1' END,
        pgbeat_text_problem('job_key', pgbeat_enqueue.job_key, true, 1000, true),
        CASE WHEN pgbeat_enqueue.on_conflict IS NULL OR pgbeat_enqueue.on_conflict NOT IN
                  ('ignore', 'replace', 'keep_earliest', 'keep_latest')
            THEN 'on_conflict must be one of ignore, replace, keep_earliest, keep_latest' END,
        CASE WHEN pgbeat_enqueue.on_conflict <> 'ignore' AND pgbeat_enqueue.job_key IS NULL
            THEN 'on_conflict applies to jobs with a job_key' END,
        CASE WHEN array_ndims(new_tags) > 1
            THEN 'tags must be a one-dimensional array of text' END,
        CASE WHEN cardinality(new_tags) > 20
            THEN format('tags has %s tags, at most 20 are allowed', cardinality(new_tags)) END
    );
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'pgbeat_enqueue: %', problem USING ERRCODE = 'invalid_parameter_value';
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
