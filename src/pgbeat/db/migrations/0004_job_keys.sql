-- Delayed reminders: a key for the live job of a kind, and a `cancelled` state.

-- The application's handle on the live (pending or running) job of its kind, e.g.
-- 'user:42' for "remind user 42". Unlike unique_key it is free again once the job is
-- done, failed or cancelled; finished rows keep it as history.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS job_key text;

-- Set when a running job gives up its key: a newer enqueue of the key replaced it, or the
-- key was cancelled. Its run goes on with what it started with, but it never runs again:
-- a retry, a release at shutdown or an expired lease makes it `cancelled`, not `pending`.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS superseded_at timestamptz;

-- `cancelled` joins the states: a job stopped on purpose is not a failure. The check is
-- found by its definition (a team that created the table itself may have named it
-- otherwise) and replaced by a named one. NOT VALID skips a scan of the table under its
-- exclusive lock: every existing row passed the old check, which the new one contains.
DO $$
DECLARE
    found record;
BEGIN
    FOR found IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'jobs'::regclass AND contype = 'c'
          AND pg_get_constraintdef(oid) LIKE '%status%pending%'
    LOOP
        EXECUTE format('ALTER TABLE jobs DROP CONSTRAINT %I', found.conname);
    END LOOP;
END;
$$;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')) NOT VALID;

-- One live job per (kind, job_key). Unkeyed rows, finished rows and superseded running
-- rows are outside the index, so it costs unkeyed jobs nothing and frees a key the moment
-- its job ends. A large table may build it first with CREATE UNIQUE INDEX CONCURRENTLY
-- under this name and predicate; IF NOT EXISTS then keeps it.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_live_key ON jobs (kind, job_key)
    WHERE job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running');
