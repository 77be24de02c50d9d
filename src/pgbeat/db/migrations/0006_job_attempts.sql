-- What the dashboard (`pgbeat ui`) needs: the history of attempts that did not succeed,
-- an error signature to group failures by, and indexes that keep its pages off
-- full-table scans.

-- One row per attempt that ended in a retry, a failure or a release at shutdown, written by
-- the worker with its outcome batch (one statement per batch). A successful attempt is
-- described by the job row itself (status done, finished_at), so the hot path of a healthy
-- queue writes nothing here. No foreign key: a job deleted while its outcome is on its way
-- must not fail the worker's write; the trigger below removes attempts with their job.
CREATE TABLE IF NOT EXISTS pgbeat_job_attempts (
    job_id      bigint      NOT NULL,
    attempt     int         NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('retry', 'failed', 'released')),
    finished_at timestamptz NOT NULL DEFAULT now(),
    duration_s  float8,
    worker      text,
    error       text
);
CREATE INDEX IF NOT EXISTS pgbeat_job_attempts_job ON pgbeat_job_attempts (job_id, attempt);

-- Deleting jobs (purge, the dashboard, an operator's SQL) deletes their attempts, in one
-- statement per DELETE.
CREATE OR REPLACE FUNCTION pgbeat_delete_attempts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbeat_job_attempts WHERE job_id IN (SELECT id FROM gone);
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS jobs_delete_attempts ON jobs;
CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION pgbeat_delete_attempts();

-- An error's signature: the first line of its text with numbers and UUIDs replaced, so
-- "timeout after 30s on order 8812" and "... order 9120" group together.
CREATE OR REPLACE FUNCTION pgbeat_error_signature(error text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT left(regexp_replace(
        regexp_replace(split_part(coalesce(error, ''), E'\n', 1),
                       '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'gi'),
        '[0-9]+', 'N', 'g'), 200)
$$;

-- Failed jobs, newest first and by finish time: the jobs list's "failed" tab and the
-- failures page. Failed rows are few, so these cost the workers next to nothing.
CREATE INDEX IF NOT EXISTS jobs_failed_id ON jobs (id) WHERE status = 'failed';
CREATE INDEX IF NOT EXISTS jobs_failed_finished ON jobs (finished_at) WHERE status = 'failed';
-- Failed jobs by kind and error signature: a kind's failures, and one failure group's jobs
-- (the failures page's "retry all" / "delete all").
CREATE INDEX IF NOT EXISTS jobs_failed_signature
    ON jobs (kind, pgbeat_error_signature(last_error)) WHERE status = 'failed';

-- Finished jobs by finish time: "done in 24 h", the per-minute chart, finished-time filters.
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
