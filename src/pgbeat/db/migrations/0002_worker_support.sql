-- What pgbeat's workers, reaper and purge add to the design's table.

-- The reaper looks for expired leases among running jobs only; without this index it
-- would scan every finished row on each pass.
CREATE INDEX IF NOT EXISTS jobs_running ON jobs (locked_until) WHERE status = 'running';

-- A scheduled job must outlive its schedule's catch-up window, or a restarted scheduler
-- would enqueue its period again: purge never deletes a row before keep_until.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS keep_until timestamptz;

-- Wake idle workers when jobs are inserted: one notification per statement (a bulk insert
-- notifies once), delivered at commit, so a rolled-back enqueue wakes nobody.
CREATE OR REPLACE FUNCTION pgbeat_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgbeat_jobs', '');
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS jobs_notify ON jobs;
CREATE TRIGGER jobs_notify AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION pgbeat_notify_jobs();
