-- Fair queues, the database refusing queue settings the API refuses, and workers told at
-- once when a queue's settings change.

-- A fair queue's claim takes its limit keys in turn (docs/flow-control.md).
ALTER TABLE pgbeat_queues ADD COLUMN IF NOT EXISTS fair boolean NOT NULL DEFAULT false;

-- What configure_queue refuses (pgbeat.flow), refused by the database too. NOT VALID: a
-- row written before (by SQL) stays, and workers, `queues list` and the dashboard skip it
-- by name (QUEUES_VALID) until it is set again; new and changed rows are checked.
ALTER TABLE pgbeat_queues DROP CONSTRAINT IF EXISTS pgbeat_queues_settings_valid;
ALTER TABLE pgbeat_queues ADD CONSTRAINT pgbeat_queues_settings_valid CHECK (
    name !~ '^\s' AND name !~ '\s$'
    AND (rate_period IS NULL
         OR rate_period BETWEEN interval '1 millisecond' AND interval '1 day')
    AND (key_rate_period IS NULL
         OR key_rate_period BETWEEN interval '1 millisecond' AND interval '1 day')
) NOT VALID;

-- A fair queue's jobs without a limit key form one key of their own: their head in claim
-- order, without stepping over the keyed backlog (jobs_claim_key holds only keyed jobs).
CREATE INDEX IF NOT EXISTS jobs_claim_unkeyed
    ON jobs (queue, priority DESC, run_at, id) WHERE status = 'pending' AND limit_key IS NULL;

-- A change of a queue's settings wakes every listening worker, whose next claim reads the
-- settings again (the payload tells it from new jobs: worker/listener.py).
CREATE OR REPLACE FUNCTION pgbeat_notify_queues() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The channel of the table's schema (pgbeat_channel's rule, migration 0020, written out
    -- so that no function is looked up through the session's search_path).
    PERFORM pg_notify(CASE WHEN TG_TABLE_SCHEMA = 'public' THEN 'pgbeat_jobs'
                           WHEN octet_length(TG_TABLE_SCHEMA) <= 51
                               THEN 'pgbeat_jobs:' || TG_TABLE_SCHEMA
                           ELSE 'pgbeat_jobs:' || md5(TG_TABLE_SCHEMA) END, 'queues');
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS pgbeat_queues_notify ON pgbeat_queues;
CREATE TRIGGER pgbeat_queues_notify AFTER INSERT OR UPDATE OR DELETE ON pgbeat_queues
    FOR EACH STATEMENT EXECUTE FUNCTION pgbeat_notify_queues();
