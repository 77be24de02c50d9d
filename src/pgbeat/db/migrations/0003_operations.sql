-- What operations need: when a job finished, and which pgbeat processes are alive.

-- Set when a job reaches done or failed: `jobs purge --older-than` and "failed in the
-- last hour" count from it rather than from creation.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS finished_at timestamptz;

-- One row per running scheduler or worker, refreshed every few seconds and removed on a
-- clean exit; rows whose heartbeat is stale belong to dead processes and are pruned.
CREATE TABLE IF NOT EXISTS pgbeat_processes (
    id             text PRIMARY KEY,
    role           text NOT NULL CHECK (role IN ('scheduler', 'worker')),
    host           text NOT NULL,
    pid            int  NOT NULL,
    version        text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    heartbeat_at   timestamptz NOT NULL DEFAULT now(),
    schedules_hash text,
    details        jsonb NOT NULL DEFAULT '{}'
);
