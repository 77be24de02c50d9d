-- Schedules as data: every schedule in a table (synced from schedules files by every
-- scheduler replica, or created from code), and the history of every period.

-- One row per schedule. `source` says who owns it: 'file' rows are written by the file
-- sync of the scheduler replicas, 'api' rows by pgbeat.upsert_schedule; neither overwrites
-- the other. `paused` is operational state that no sync or upsert changes. A deleted
-- schedule keeps its row for a while as a tombstone (deleted_at), so that replicas polling
-- for changes see it go; schedulers remove tombstones after a day.
CREATE TABLE IF NOT EXISTS pgbeat_schedules (
    name            text        PRIMARY KEY,
    source          text        NOT NULL CHECK (source IN ('file', 'api')),
    kind            text        NOT NULL,
    cron            text,
    every           interval,
    timezone        text        NOT NULL DEFAULT 'UTC',
    payload         jsonb       NOT NULL DEFAULT '{}',
    max_attempts    int,
    catch_up        text        NOT NULL DEFAULT 'latest'
                                CHECK (catch_up IN ('none', 'latest', 'all')),
    catch_up_window interval    NOT NULL DEFAULT '1 hour',
    overlap         text        NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip')),
    jitter          interval,
    -- A fingerprint of the columns above from kind to jitter: replicas insert a period only
    -- while the definition they computed it from is still the row's.
    definition_hash text        NOT NULL,
    file_hash       text,       -- the schedules file that declared it (source 'file')
    paused          boolean     NOT NULL DEFAULT false,
    paused_at       timestamptz, -- when the current (or the last) pause began, and by whom
    paused_by       text,
    resumed_at      timestamptz, -- when the last pause ended: its periods are never caught up
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    updated_by      text,
    deleted_at      timestamptz,
    -- The transaction that last wrote the row (set by the trigger below): replicas ask for
    -- the rows written since the oldest transaction their previous look could not see.
    changed_xid     xid8        NOT NULL DEFAULT pg_current_xact_id(),
    CHECK ((cron IS NULL) <> (every IS NULL))
);
CREATE INDEX IF NOT EXISTS pgbeat_schedules_changed ON pgbeat_schedules (changed_xid);

CREATE OR REPLACE FUNCTION pgbeat_schedules_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_xid := pg_current_xact_id();
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS pgbeat_schedules_stamp ON pgbeat_schedules;
CREATE TRIGGER pgbeat_schedules_stamp BEFORE INSERT OR UPDATE ON pgbeat_schedules
    FOR EACH ROW EXECUTE FUNCTION pgbeat_schedules_stamp();

-- Wake the scheduler replicas when schedules change, at commit (one notification per
-- transaction whatever it changed); replicas that cannot listen poll instead.
CREATE OR REPLACE FUNCTION pgbeat_schedules_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgbeat_schedules', '');
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS pgbeat_schedules_notify ON pgbeat_schedules;
CREATE TRIGGER pgbeat_schedules_notify AFTER INSERT OR UPDATE OR DELETE ON pgbeat_schedules
    FOR EACH STATEMENT EXECUTE FUNCTION pgbeat_schedules_notify();

-- The history of every period: enqueued (job_id is its job), skipped (reason 'paused' or
-- 'overlap'), missed (reason: the catch-up policy that dropped it) or manual (a "run now",
-- fire_at is when it was asked for). inserted_by is the pgbeat_processes id of the
-- scheduler replica (or the user) that wrote it. Bounded: schedulers delete rows older
-- than their retention (30 days by default).
CREATE TABLE IF NOT EXISTS pgbeat_schedule_history (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule    text        NOT NULL,
    fire_at     timestamptz NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('enqueued', 'skipped', 'missed', 'manual')),
    reason      text,
    job_id      bigint,
    inserted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    inserted_by text
);
-- One row per period: the replica that inserts it decides its outcome, and the job
-- follows that row, so replicas can never disagree about a period.
CREATE UNIQUE INDEX IF NOT EXISTS pgbeat_schedule_history_period
    ON pgbeat_schedule_history (schedule, fire_at) WHERE outcome <> 'manual';
-- A schedule's history, newest first (manual runs included).
CREATE INDEX IF NOT EXISTS pgbeat_schedule_history_recent
    ON pgbeat_schedule_history (schedule, fire_at);
-- Retention deletes by age; rows arrive in time order, so a BRIN index is enough.
CREATE INDEX IF NOT EXISTS pgbeat_schedule_history_age
    ON pgbeat_schedule_history USING brin (inserted_at);

-- Each version of a schedules file any replica has synced, by the fingerprint of its
-- definitions. Among the files held by live replicas, the one first seen last is in effect
-- (docs/schedules.md): a replica restarted with an older file does not undo a newer one.
CREATE TABLE IF NOT EXISTS pgbeat_schedule_files (
    hash          text        PRIMARY KEY,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    first_seen_by text,
    applied_at    timestamptz,
    applied_by    text,
    schedules     text[]      NOT NULL DEFAULT '{}'
);

-- overlap = "skip" asks whether a schedule still has a pending or running job: its live
-- jobs, found by the schedule's part of their unique keys ('<schedule>@...').
CREATE INDEX IF NOT EXISTS jobs_live_schedule
    ON jobs (split_part(unique_key, '@', 1), kind)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'running');
