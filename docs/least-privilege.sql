-- Least privilege for pgbeat: one group role per job, and your login roles made members of
-- the groups they need. Apply it with `pgbeat roles` (or psql) as a superuser (or as the
-- owner of pgbeat's tables holding CREATEROLE) after `pgbeat migrate`. `pgbeat migrate`
-- applies it again after every upgrade of a database set up with it: every statement is
-- idempotent, and what a migration has not created yet is skipped.
--
-- It works on the schema first on search_path: for pgbeat's tables in a schema of their
-- own (`pgbeat migrate --schema NAME`), run it with that schema first, e.g.
--   PGOPTIONS='-c search_path=NAME' psql -f docs/least-privilege.sql
-- once per schema. The group roles below are the cluster's: run for two schemas, a member
-- of pgbeat_worker may work in both (docs/schemas.md: one set of roles per app).
--
--   pgbeat_enqueue    pgbeat.enqueue / enqueue_many, `pgbeat enqueue`, SELECT pgbeat_enqueue(...)
--                     (SQL, any language): inserts pending jobs (only the columns enqueue
--                     writes; never a schedule's period key). It reads no payload, changes
--                     no job, and has no rights on heartbeats.
--   pgbeat_keys       pgbeat_enqueue, and jobs by key that replace, move, cancel or find the
--                     live job of a key (job_key= with on_conflict other than "ignore"). It
--                     changes no job without a job_key and re-opens no finished job.
--   pgbeat_worker     `pgbeat worker`: claims, completes, retries, fails, reaps jobs, writes
--                     its attempts and its own heartbeat. It deletes no job, changes no
--                     payload, finishes no job it has not claimed, re-opens no finished one,
--                     and holds no lease longer than a day.
--   pgbeat_scheduler  `pgbeat scheduler`: inserts the periods of the schedules in
--                     pgbeat_schedules (their kind, their `<name>@<instant>` keys, ids drawn
--                     from the sequence), syncs schedules and their history, writes its own
--                     heartbeat; `schedules backfill` and `schedules run`; under overlap =
--                     "cancel_other", cancels its schedules' own live period jobs. It reads
--                     no payload of a job and enqueues nothing else.
--   pgbeat_ui_viewer  `pgbeat ui --read-only`: reads pgbeat's tables, writes nothing.
--   pgbeat_ui_admin   `pgbeat ui`: pgbeat_ui_viewer, and the dashboard's actions only: run
--                     now, retry, cancel and delete finished jobs; pause, resume, run a
--                     schedule now and backfill it; pause and resume a queue.
--   pgbeat_admin      `pgbeat migrate`, jobs purge/retry/cancel, schedules pause/resume/run,
--                     status: owns pgbeat's tables, and alone may create objects.
--
-- The rules that grants cannot say (which rows, which state changes) are row-level security
-- policies and one trigger on jobs, at the end. They bind every role but the owner
-- (pgbeat_admin and its members), so a deployment that runs everything as the owner pays
-- nothing for them.
--
-- Then, for instance:
--   CREATE ROLE web LOGIN PASSWORD '...' IN ROLE pgbeat_enqueue;
--   CREATE ROLE jobs LOGIN PASSWORD '...' IN ROLE pgbeat_worker;
--   CREATE ROLE beat LOGIN PASSWORD '...' IN ROLE pgbeat_scheduler;
--   CREATE ROLE ops  LOGIN PASSWORD '...' IN ROLE pgbeat_admin;
--   CREATE ROLE dash LOGIN PASSWORD '...' IN ROLE pgbeat_ui_admin;
-- `pgbeat run` (scheduler and worker in one process) takes pgbeat_worker and pgbeat_scheduler,
-- and pgbeat_enqueue when its handlers enqueue jobs (the demo's do);
-- `pgbeat health` works for any of them but pgbeat_enqueue.

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['pgbeat_enqueue', 'pgbeat_keys', 'pgbeat_worker',
                                'pgbeat_scheduler', 'pgbeat_ui_viewer', 'pgbeat_ui_admin',
                                'pgbeat_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', name);
        END IF;
    END LOOP;
END
$$;

-- Only the admin creates objects in pgbeat's schema (before PostgreSQL 15 everyone could).
DO $$
BEGIN
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO pgbeat_enqueue, pgbeat_keys, pgbeat_worker, '
                   'pgbeat_scheduler, pgbeat_ui_viewer, pgbeat_ui_admin, pgbeat_admin',
                   current_schema());
    EXECUTE format('GRANT CREATE ON SCHEMA %I TO pgbeat_admin', current_schema());
END
$$;

-- The admin owns the tables and functions, so that `pgbeat migrate` run by one of its
-- members can alter them; the other roles get only the grants below.
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['jobs', 'pgbeat_migrations', 'pgbeat_processes',
                                'pgbeat_job_attempts', 'pgbeat_schedules',
                                'pgbeat_schedule_history', 'pgbeat_schedule_files',
                                'pgbeat_queues', 'pgbeat_queue_starts', 'pgbeat_retention',
                                'pgbeat_workflows', 'pgbeat_workflow_steps',
                                'pgbeat_workflow_edges', 'pgbeat_workflow_ready'] LOOP
        IF to_regclass(name) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I OWNER TO pgbeat_admin', name);
            EXECUTE format('REVOKE ALL ON %I FROM PUBLIC', name);
        END IF;
    END LOOP;
    FOREACH name IN ARRAY ARRAY['pgbeat_notify_jobs()', 'pgbeat_delete_attempts()',
                                'pgbeat_error_signature(text)', 'pgbeat_schedules_stamp()',
                                'pgbeat_schedules_notify()', 'pgbeat_channel(text,text)',
                                'pgbeat_channel(text)', 'pgbeat_listen(text)',
                                'pgbeat_unlisten(text)', 'pgbeat_lock_key(bigint)',
                                'pgbeat_enqueue(text, jsonb, timestamptz, text, integer, '
                                'text, integer, text, text, text[])',
                                'pgbeat_workflow_note(bigint,text)',
                                'pgbeat_workflow_advance()', 'pgbeat_workflow_advance_ended()',
                                'pgbeat_workflow_advance(bigint[])',
                                'pgbeat_workflow_advance_round(bigint[])',
                                'pgbeat_step_release_at(timestamptz,interval)',
                                'pgbeat_workflow_owned_by(name,name)',
                                'pgbeat_workflow_foreign_step(bigint[],bigint[],name)',
                                'pgbeat_workflow_foreign_edge(bigint[],bigint[],name)',
                                'pgbeat_workflow_check_added()',
                                'pgbeat_workflow_forget()', 'pgbeat_refuse_job_names()',
                                'pgbeat_text_problem(text,text,boolean,integer,boolean)'] LOOP
        IF to_regprocedure(name) IS NOT NULL THEN
            EXECUTE format('ALTER FUNCTION %s OWNER TO pgbeat_admin', name);
        END IF;
    END LOOP;
END
$$;

-- Every command checks the schema version first.
GRANT SELECT ON pgbeat_migrations TO pgbeat_enqueue, pgbeat_keys, pgbeat_worker, pgbeat_scheduler,
    pgbeat_ui_viewer;

-- Enqueue: INSERT of the columns enqueue writes, so id, status, attempts, the lease and
-- the timestamps take their defaults (a pending job, numbered by the sequence); and the
-- columns that ON CONFLICT's arbiters and RETURNING read (the unique key's, the live key's,
-- the id). Payloads and errors stay unreadable. Earlier versions of this file granted
-- INSERT on every column: the REVOKE takes that back.
REVOKE INSERT ON jobs FROM pgbeat_enqueue;
GRANT SELECT (id, kind, unique_key) ON jobs TO pgbeat_enqueue;
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['kind', 'payload', 'run_at', 'unique_key', 'max_attempts',
                                'job_key', 'queue', 'priority', 'limit_key', 'meta', 'tags'] LOOP
        IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
                   AND attname = name AND NOT attisdropped) THEN  -- migrations 0001-0016
            EXECUTE format('GRANT INSERT (%I) ON jobs TO pgbeat_enqueue', name);
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass AND attname = 'job_key'
               AND NOT attisdropped) THEN  -- migration 0004
        GRANT SELECT (job_key, superseded_at, status) ON jobs TO pgbeat_enqueue;
    END IF;
    -- pgbeat_enqueue() (migration 0016) runs with its caller's rights: the grants above
    -- and the policies below bind it as they bind an INSERT. Only the enqueue role (and
    -- the roles that contain it) may call it.
    IF to_regprocedure('pgbeat_enqueue(text, jsonb, timestamptz, text, integer, text, '
                       'integer, text, text, text[])') IS NOT NULL THEN
        REVOKE ALL ON FUNCTION pgbeat_enqueue(text, jsonb, timestamptz, text, integer, text,
                                              integer, text, text, text[]) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION pgbeat_enqueue(text, jsonb, timestamptz, text, integer, text,
                                                 integer, text, text, text[]) TO pgbeat_enqueue;
    END IF;
END
$$;

-- Jobs by key: the live job of a key is read, rewritten, moved or cancelled in place; a
-- lease (locked_until) is never its business.
GRANT pgbeat_enqueue TO pgbeat_keys;
GRANT SELECT ON jobs TO pgbeat_keys;
GRANT UPDATE (payload, run_at, attempts, max_attempts, last_error, status, finished_at)
    ON jobs TO pgbeat_keys;
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'superseded_at' AND NOT attisdropped) THEN  -- migration 0004
        GRANT UPDATE (superseded_at) ON jobs TO pgbeat_keys;
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'cancel_requested_at' AND NOT attisdropped) THEN  -- migration 0007
        GRANT UPDATE (cancel_requested_at) ON jobs TO pgbeat_keys;  -- cancel a running job
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'queue' AND NOT attisdropped) THEN  -- migration 0007
        GRANT UPDATE (queue, priority, limit_key) ON jobs TO pgbeat_keys;  -- a replace's
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'tags' AND NOT attisdropped) THEN  -- migration 0016
        GRANT UPDATE (tags) ON jobs TO pgbeat_keys;  -- a replace's too
    END IF;
END
$$;

-- Worker: claims and outcomes are UPDATEs of a job's state (and its result), never of what
-- it runs; no DELETE. A snooze gives an attempt back (attempts) and counts itself
-- (snoozes); `jobs cancel` (an
-- operator with this role) asks a running job to stop (cancel_requested_at).
GRANT SELECT ON jobs TO pgbeat_worker;
GRANT UPDATE (status, attempts, max_attempts, run_at, locked_until, last_error, finished_at)
    ON jobs TO pgbeat_worker;
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'result' AND NOT attisdropped) THEN  -- migration 0007
        GRANT UPDATE (result, cancel_requested_at) ON jobs TO pgbeat_worker;
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'started_at' AND NOT attisdropped) THEN  -- migration 0013
        GRANT UPDATE (started_at) ON jobs TO pgbeat_worker;  -- a claim records its start
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'snoozes' AND NOT attisdropped) THEN  -- migration 0015
        GRANT UPDATE (snoozes) ON jobs TO pgbeat_worker;  -- a snooze is counted
    END IF;
    IF to_regclass('pgbeat_job_attempts') IS NOT NULL THEN  -- migration 0006
        GRANT INSERT ON pgbeat_job_attempts TO pgbeat_worker;
    END IF;
    -- Flow control (migration 0008): a limited queue's claim locks its settings row
    -- (FOR UPDATE needs an UPDATE right) and keeps the starts of rate-limited queues.
    -- Setting limits and pauses is the admin's (pgbeat queues, configure_queue).
    IF to_regclass('pgbeat_queues') IS NOT NULL THEN
        GRANT SELECT, UPDATE (updated_at) ON pgbeat_queues TO pgbeat_worker;
        GRANT SELECT, INSERT, DELETE ON pgbeat_queue_starts TO pgbeat_worker;
    END IF;
    -- Retention (migration 0012): the worker holding the turn deletes finished jobs past
    -- their keep time (a policy below says which) and, by trigger, their attempts.
    IF to_regclass('pgbeat_retention') IS NOT NULL THEN
        GRANT SELECT, UPDATE ON pgbeat_retention TO pgbeat_worker;
        GRANT DELETE ON jobs TO pgbeat_worker;
        -- the trigger's DELETE ... WHERE job_id IN (the deleted jobs) reads job_id
        GRANT SELECT (job_id), DELETE ON pgbeat_job_attempts TO pgbeat_worker;
    END IF;
END
$$;

-- Scheduler: inserts periods (whose ids it draws from the jobs sequence, hence the id
-- column) and checks for live jobs of a schedule; keeps the schedules table, their history
-- and the file versions. Which periods it may insert is a policy below.
REVOKE INSERT ON jobs FROM pgbeat_scheduler;
GRANT INSERT (id, kind, payload, run_at, unique_key, max_attempts) ON jobs TO pgbeat_scheduler;
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['keep_until', 'queue', 'priority', 'meta', 'tags'] LOOP
        IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
                   AND attname = name AND NOT attisdropped) THEN
            EXECUTE format('GRANT INSERT (%I) ON jobs TO pgbeat_scheduler', name);
        END IF;
    END LOOP;
END
$$;
GRANT SELECT (id, kind, unique_key, status) ON jobs TO pgbeat_scheduler;
-- overlap = "cancel_other": a new period's job cancels its schedule's pending one and asks
-- its running one to stop (a policy below allows only a schedule's own period jobs).
GRANT UPDATE (status, finished_at, last_error) ON jobs TO pgbeat_scheduler;
GRANT SELECT (finished_at) ON jobs TO pgbeat_scheduler;
GRANT SELECT (run_at) ON jobs TO pgbeat_scheduler;  -- what a backfill's jobs are due at
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'cancel_requested_at' AND NOT attisdropped) THEN  -- migration 0007
        GRANT SELECT (cancel_requested_at), UPDATE (cancel_requested_at) ON jobs
            TO pgbeat_scheduler;
    END IF;
END
$$;
-- Deadlines (migration 0018): a period is judged met when its job ended done by its due
-- time, and its job's attempts say whether a pending job is retrying.
GRANT SELECT (attempts, finished_at) ON jobs TO pgbeat_scheduler;
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO pgbeat_scheduler',
                   pg_get_serial_sequence('jobs', 'id'));
    IF to_regclass('pgbeat_schedules') IS NOT NULL THEN  -- migration 0005
        GRANT SELECT, INSERT, UPDATE, DELETE ON pgbeat_schedules, pgbeat_schedule_history
            TO pgbeat_scheduler;
        GRANT SELECT, INSERT, UPDATE ON pgbeat_schedule_files TO pgbeat_scheduler;
    END IF;
END
$$;

-- Workflows (migration 0017). Enqueue inserts a workflow, its steps' jobs (with their
-- workflow_id) and its steps and edges, and reads a key's workflow back. The advance (a
-- step's end releasing or cancelling its dependants: pgbeat_workflow_advance, called by
-- the statement that ends it, migration 0033) and the clean-up of a deleted step's rows (a
-- trigger) are owned by the admin and run with its rights (SECURITY DEFINER), so a
-- worker, an operator or the dashboard ending a step advances its workflow without rights
-- on these tables. Workers read parents' results and run the repair pass (it releases or
-- cancels held steps as a worker may, and deletes workflows with no step left).
DO $$
BEGIN
    IF to_regclass('pgbeat_workflows') IS NOT NULL THEN
        GRANT INSERT (workflow_id) ON jobs TO pgbeat_enqueue;
        GRANT SELECT, INSERT ON pgbeat_workflows, pgbeat_workflow_steps, pgbeat_workflow_edges
            TO pgbeat_enqueue;
        -- A workflow's owner is the role that inserts it (migration 0034: its steps and
        -- edges may join only steps of a workflow of its own), never one it names.
        IF EXISTS (SELECT FROM information_schema.columns
                   WHERE table_schema = current_schema() AND table_name = 'pgbeat_workflows'
                     AND column_name = 'owner') THEN
            REVOKE INSERT ON pgbeat_workflows FROM pgbeat_enqueue;
            GRANT INSERT (name, key) ON pgbeat_workflows TO pgbeat_enqueue;
        END IF;
        GRANT SELECT ON pgbeat_workflows, pgbeat_workflow_steps, pgbeat_workflow_edges
            TO pgbeat_worker, pgbeat_ui_viewer;
        GRANT DELETE ON pgbeat_workflows TO pgbeat_worker;
        -- A schedule's overlap = "cancel_other" may cancel a step: it reads the rows'
        -- workflow_id to advance what it ended (migration 0033).
        GRANT SELECT (workflow_id) ON jobs TO pgbeat_scheduler;
    END IF;
    -- A large fan-out's children, claimed where they are held (migration 0032): a worker
    -- takes a ready parent's next window and moves its row on, or releases it when stale.
    IF to_regclass('pgbeat_workflow_ready') IS NOT NULL THEN
        GRANT SELECT, UPDATE, DELETE ON pgbeat_workflow_ready TO pgbeat_worker;
    END IF;
END
$$;

-- Heartbeats: workers and schedulers write their own rows, and only rows of their own
-- role (row-level security), so no role can pass for a worker that `pgbeat health` would
-- count unless it is one. Everyone granted SELECT reads every row.
-- A row's start and heartbeat come from the database clock (the column defaults and now()),
-- never from the writer: no role can plant a heartbeat in the future that outlives it.
REVOKE INSERT, UPDATE ON pgbeat_processes FROM pgbeat_worker, pgbeat_scheduler;
GRANT SELECT, DELETE ON pgbeat_processes TO pgbeat_worker, pgbeat_scheduler;
GRANT INSERT (id, role, host, pid, version, schedules_hash, details),
      UPDATE (heartbeat_at, details, schedules_hash) ON pgbeat_processes
    TO pgbeat_worker, pgbeat_scheduler;
ALTER TABLE pgbeat_processes ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS pgbeat_processes_read ON pgbeat_processes;
CREATE POLICY pgbeat_processes_read ON pgbeat_processes FOR SELECT USING (true);
DROP POLICY IF EXISTS pgbeat_processes_worker ON pgbeat_processes;
CREATE POLICY pgbeat_processes_worker ON pgbeat_processes TO pgbeat_worker
    USING (role = 'worker') WITH CHECK (role = 'worker' AND heartbeat_at <= now());
DROP POLICY IF EXISTS pgbeat_processes_scheduler ON pgbeat_processes;
CREATE POLICY pgbeat_processes_scheduler ON pgbeat_processes TO pgbeat_scheduler
    USING (role = 'scheduler') WITH CHECK (role = 'scheduler' AND heartbeat_at <= now());

-- The dashboard. The viewer reads every pgbeat table (what migrations have created so far);
-- the admin adds only what its actions write: a job's run time and state (run now, retry,
-- cancel), deleting finished jobs, a schedule's pause columns, the history rows of a pause
-- and of a manual run, and that run's job.
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['jobs', 'pgbeat_processes', 'pgbeat_job_attempts',
                                'pgbeat_schedules', 'pgbeat_schedule_history',
                                'pgbeat_schedule_files', 'pgbeat_queues', 'pgbeat_retention',
                                'pgbeat_workflows', 'pgbeat_workflow_steps',
                                'pgbeat_workflow_edges', 'pgbeat_workflow_ready'] LOOP
        IF to_regclass(name) IS NOT NULL THEN
            EXECUTE format('GRANT SELECT ON %I TO pgbeat_ui_viewer', name);
        END IF;
    END LOOP;
END
$$;
GRANT pgbeat_ui_viewer TO pgbeat_ui_admin;
GRANT UPDATE (status, attempts, run_at, locked_until, last_error, finished_at) ON jobs
    TO pgbeat_ui_admin;
GRANT DELETE ON jobs TO pgbeat_ui_admin;  -- and, by trigger, the deleted jobs' attempts:
DO $$
BEGIN
    IF to_regclass('pgbeat_job_attempts') IS NOT NULL THEN  -- migration 0006
        GRANT DELETE ON pgbeat_job_attempts TO pgbeat_ui_admin;
    END IF;
END
$$;
GRANT INSERT (id, kind, payload, run_at, unique_key, max_attempts) ON jobs TO pgbeat_ui_admin;
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['queue', 'priority', 'tags'] LOOP  -- a schedule's run now
        IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
                   AND attname = name AND NOT attisdropped) THEN  -- migration 0007
            EXECUTE format('GRANT INSERT (%I) ON jobs TO pgbeat_ui_admin', name);
        END IF;
    END LOOP;
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO pgbeat_ui_admin',
                   pg_get_serial_sequence('jobs', 'id'));
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'superseded_at' AND NOT attisdropped) THEN  -- migration 0004
        GRANT UPDATE (superseded_at) ON jobs TO pgbeat_ui_admin;
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass
               AND attname = 'result' AND NOT attisdropped) THEN  -- migration 0007
        -- a retry clears the last run's result and cancel request; Cancel asks a running job
        GRANT UPDATE (result, cancel_requested_at) ON jobs TO pgbeat_ui_admin;
    END IF;
    IF to_regclass('pgbeat_schedules') IS NOT NULL THEN  -- migration 0005
        GRANT UPDATE (paused, paused_at, paused_by, resumed_at, updated_at, updated_by)
            ON pgbeat_schedules TO pgbeat_ui_admin;
        GRANT INSERT ON pgbeat_schedule_history TO pgbeat_ui_admin;
        -- a backfill takes over the periods recorded missed, and inserts their jobs
        GRANT UPDATE (outcome, reason, job_id, inserted_at, inserted_by)
            ON pgbeat_schedule_history TO pgbeat_ui_admin;
        GRANT INSERT (keep_until) ON jobs TO pgbeat_ui_admin;
    END IF;
    IF to_regclass('pgbeat_queues') IS NOT NULL THEN  -- migration 0008
        -- the Queues page's pause and resume (an upsert of the queue's row)
        GRANT INSERT (name, paused), UPDATE (paused, updated_at) ON pgbeat_queues
            TO pgbeat_ui_admin;
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'pgbeat_schedules'::regclass
               AND attname = 'paused_reason' AND NOT attisdropped) THEN  -- migration 0010
        GRANT UPDATE (paused_reason) ON pgbeat_schedules TO pgbeat_ui_admin;  -- cleared by a pause
    END IF;
END
$$;

-- What grants cannot say, as row-level security on jobs (the owner is exempt).
--
-- A period key is `<schedule>@<UTC instant>` (or `<schedule>@manual:<job id>`): the name of
-- the schedule whose period the key is, else NULL. Only the scheduler (and the dashboard's
-- "run now") may insert such a key, so nobody else can pre-empt a period.
CREATE OR REPLACE FUNCTION pgbeat_period_schedule(unique_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN unique_key ~ '^[^@]+@([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z|manual:[0-9]+)$'
                THEN split_part(unique_key, '@', 1) END
$$;
-- A time every reader decodes, in any session time zone (years 1 to 9999, two days inside).
CREATE OR REPLACE FUNCTION pgbeat_readable_time(t timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT t BETWEEN '0001-01-03 00:00:00+00' AND '9999-12-29 00:00:00+00'
$$;
-- Whether a job id was drawn from the jobs sequence already: an id chosen ahead of it would
-- make a later enqueue collide with it.
CREATE OR REPLACE FUNCTION pgbeat_job_id_drawn(id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT id <= pg_sequence_last_value(pg_get_serial_sequence('jobs', 'id')::regclass)
$$;
ALTER FUNCTION pgbeat_period_schedule(text) OWNER TO pgbeat_admin;
ALTER FUNCTION pgbeat_readable_time(timestamptz) OWNER TO pgbeat_admin;
ALTER FUNCTION pgbeat_job_id_drawn(bigint) OWNER TO pgbeat_admin;

ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
-- Whoever was granted columns of jobs reads every row (the grants choose the columns).
DROP POLICY IF EXISTS pgbeat_jobs_read ON jobs;
CREATE POLICY pgbeat_jobs_read ON jobs FOR SELECT USING (true);
-- Enqueue (and keys): any job but a period, with a run time every reader can decode.
DROP POLICY IF EXISTS pgbeat_jobs_enqueue ON jobs;
CREATE POLICY pgbeat_jobs_enqueue ON jobs FOR INSERT TO pgbeat_enqueue
    WITH CHECK (pgbeat_period_schedule(unique_key) IS NULL AND pgbeat_readable_time(run_at));
-- Scheduler (and the dashboard's backfill): only a period of a schedule in
-- pgbeat_schedules, of that schedule's kind, numbered from the sequence.
DROP POLICY IF EXISTS pgbeat_jobs_periods ON jobs;
CREATE POLICY pgbeat_jobs_periods ON jobs FOR INSERT TO pgbeat_scheduler, pgbeat_ui_admin
    WITH CHECK (pgbeat_job_id_drawn(id) AND pgbeat_readable_time(run_at) AND EXISTS (
        SELECT FROM pgbeat_schedules AS s
        WHERE s.name = pgbeat_period_schedule(jobs.unique_key) AND s.kind = jobs.kind));
-- Scheduler, deadlines (migration 0018): the one alert job of a late period, of its
-- schedule's on_late kind, keyed '<period key>:late'.
DO $$
BEGIN
    DROP POLICY IF EXISTS pgbeat_jobs_late_alerts ON jobs;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass('pgbeat_schedules')
               AND attname = 'on_late' AND NOT attisdropped) THEN
        CREATE POLICY pgbeat_jobs_late_alerts ON jobs FOR INSERT TO pgbeat_scheduler
            WITH CHECK (pgbeat_job_id_drawn(id) AND pgbeat_readable_time(run_at)
                        AND pgbeat_period_schedule(left(unique_key, -5)) IS NOT NULL
                        AND right(unique_key, 5) = ':late'
                        AND EXISTS (SELECT FROM pgbeat_schedules AS s
                                    WHERE s.name = pgbeat_period_schedule(left(jobs.unique_key, -5))
                                      AND s.on_late = jobs.kind));
    END IF;
END
$$;
-- The dashboard's "run now" of a schedule: a manual run, whose key names its own job id.
DROP POLICY IF EXISTS pgbeat_jobs_manual ON jobs;
CREATE POLICY pgbeat_jobs_manual ON jobs FOR INSERT TO pgbeat_ui_admin
    WITH CHECK (pgbeat_job_id_drawn(id) AND split_part(unique_key, '@', 2) = 'manual:' || id
                AND EXISTS (SELECT FROM pgbeat_schedules AS s
                            WHERE s.name = pgbeat_period_schedule(jobs.unique_key)
                              AND s.kind = jobs.kind));
-- Scheduler (overlap = "cancel_other"): only the live jobs of a schedule's periods (their
-- key names a schedule of that kind), which end cancelled or stay running asked to stop.
DROP POLICY IF EXISTS pgbeat_jobs_cancel_other ON jobs;
CREATE POLICY pgbeat_jobs_cancel_other ON jobs FOR UPDATE TO pgbeat_scheduler
    USING (status IN ('pending', 'running') AND EXISTS (
        SELECT FROM pgbeat_schedules AS s
        WHERE s.name = pgbeat_period_schedule(jobs.unique_key) AND s.kind = jobs.kind))
    WITH CHECK (status = 'cancelled' OR status = 'running');
-- Keys: only jobs that have a job_key.
DROP POLICY IF EXISTS pgbeat_jobs_keys ON jobs;
CREATE POLICY pgbeat_jobs_keys ON jobs FOR UPDATE TO pgbeat_keys
    USING (job_key IS NOT NULL) WITH CHECK (job_key IS NOT NULL AND pgbeat_readable_time(run_at));
-- Worker: any job's state, under a lease of at most a day.
DROP POLICY IF EXISTS pgbeat_jobs_worker ON jobs;
CREATE POLICY pgbeat_jobs_worker ON jobs FOR UPDATE TO pgbeat_worker
    USING (true) WITH CHECK (locked_until IS NULL OR locked_until <= now() + interval '1 day');
-- The dashboard's admin, as `pgbeat jobs` (jobs/actions.py): run now and cancel pending
-- jobs, retry any job that is not running (no lease, so it claims nothing), ask a running
-- job to stop (cancel_requested_at: the job stays running under its worker's lease); and it
-- deletes only finished jobs.
DROP POLICY IF EXISTS pgbeat_jobs_ui_update ON jobs;
CREATE POLICY pgbeat_jobs_ui_update ON jobs FOR UPDATE TO pgbeat_ui_admin
    USING (true)
    WITH CHECK ((status IN ('pending', 'cancelled') AND locked_until IS NULL
                 AND pgbeat_readable_time(run_at))
                OR (status = 'running' AND cancel_requested_at IS NOT NULL));
DROP POLICY IF EXISTS pgbeat_jobs_retention ON jobs;
CREATE POLICY pgbeat_jobs_retention ON jobs FOR DELETE TO pgbeat_worker
    USING (status IN ('done', 'failed', 'cancelled')
           AND (keep_until IS NULL OR keep_until < now()));
DROP POLICY IF EXISTS pgbeat_jobs_ui_delete ON jobs;
CREATE POLICY pgbeat_jobs_ui_delete ON jobs FOR DELETE TO pgbeat_ui_admin
    USING (status IN ('done', 'failed', 'cancelled'));

-- State changes that only an operator makes: a finished job (done, failed, cancelled)
-- going back to pending or running (a retry), and a pending job finished without a run.
-- The WHEN clause is all that runs for every other update, so claims and outcomes pay for
-- a comparison, not a function call.
CREATE OR REPLACE FUNCTION pgbeat_guard_job_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_has_role(current_user, 'pgbeat_admin', 'MEMBER')
       OR pg_has_role(current_user, 'pgbeat_ui_admin', 'MEMBER') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied: role % may not move job % from % to %',
        current_user, OLD.id, OLD.status, NEW.status
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
ALTER FUNCTION pgbeat_guard_job_status() OWNER TO pgbeat_admin;
DROP TRIGGER IF EXISTS pgbeat_guard_job_status ON jobs;
CREATE TRIGGER pgbeat_guard_job_status BEFORE UPDATE OF status ON jobs FOR EACH ROW
    WHEN (OLD.status <> NEW.status
          AND (OLD.status IN ('done', 'failed', 'cancelled')
               OR (OLD.status = 'pending' AND NEW.status IN ('done', 'failed'))))
    EXECUTE FUNCTION pgbeat_guard_job_status();
