-- Snooze, exactly: a snoozed run gives its attempt back. `attempts` counts every run but
-- the snoozed ones, `max_attempts` never changes (a snooze used to add one to it, and
-- overflowed at 2147483647), and `snoozes` counts the snoozes.
--
-- No volatile default: PostgreSQL adds the column at once, rewriting nothing.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS snoozes int NOT NULL DEFAULT 0;

-- Jobs snoozed before this migration: the attempts history (0009) recorded each snooze,
-- so their attempts and max_attempts are given back and their snoozes counted. Running
-- jobs are left alone: their attempts fence the outcome their worker is about to write.
UPDATE jobs AS j
SET snoozes = s.n,
    attempts = greatest(j.attempts - s.n, 0),
    max_attempts = greatest(j.max_attempts - s.n, 1)
FROM (SELECT job_id, count(*)::int AS n FROM pgbeat_job_attempts
      WHERE outcome = 'snoozed' GROUP BY job_id) AS s
WHERE j.id = s.job_id AND j.status <> 'running' AND j.snoozes = 0;

-- A queue name and a limit key as the API accepts them (pgbeat/flow.py): a queue of 1 to
-- 200 characters without leading or trailing spaces, a limit key non-empty and at most
-- 1000 bytes. Written with SQL otherwise, a queue could not be paused nor configured from
-- pgbeat. A trigger, not a CHECK: a check holds for every update of a row, so one such row
-- written before this migration would fail each claim of it; the trigger looks only at
-- inserts and at updates of these two columns, and its WHEN clause is all that runs for a
-- good row (no function call).
CREATE OR REPLACE FUNCTION pgbeat_refuse_job_names() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'jobs.queue %: a queue name has 1 to 200 characters, without leading or trailing spaces; jobs.limit_key %: a limit key is NULL, or 1 to 1000 bytes',
        left(quote_literal(NEW.queue), 60), left(quote_nullable(NEW.limit_key), 60)
        USING ERRCODE = 'check_violation';
END;
$$;
DROP TRIGGER IF EXISTS pgbeat_job_names ON jobs;
CREATE TRIGGER pgbeat_job_names BEFORE INSERT OR UPDATE OF queue, limit_key ON jobs
    FOR EACH ROW
    WHEN (length(NEW.queue) NOT BETWEEN 1 AND 200 OR NEW.queue <> btrim(NEW.queue)
          OR NEW.limit_key = '' OR octet_length(NEW.limit_key) > 1000)
    EXECUTE FUNCTION pgbeat_refuse_job_names();
