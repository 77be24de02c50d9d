-- Least privilege for pgbeat: one group role per job, and your login roles made members of
-- the groups they need. Run it with psql as a superuser (or as the owner of pgbeat's tables
-- holding CREATEROLE) after `pgbeat migrate`, and again after an upgrade that adds tables:
-- every statement is idempotent, and what a migration has not created yet is skipped.
--
--   pgbeat_enqueue    pgbeat.enqueue / enqueue_many, `pgbeat enqueue`: inserts jobs. It can
--                     read no payload and change no job, and has no rights on heartbeats.
--   pgbeat_keys       pgbeat_enqueue, and jobs by key that replace, move, cancel or find the
--                     live job of a key (job_key= with on_conflict other than "ignore").
--   pgbeat_worker     `pgbeat worker`: claims, completes, retries, fails, reaps jobs, writes
--                     its attempts and its own heartbeat. It deletes no job and changes no
--                     payload.
--   pgbeat_scheduler  `pgbeat scheduler`: inserts periods, syncs schedules and their history,
--                     writes its own heartbeat. It reads no payload of a job.
--   pgbeat_admin      `pgbeat migrate`, jobs purge/retry/cancel, schedules pause/resume/run,
--                     status, ui: owns pgbeat's tables, and alone may create objects.
--
-- Then, for instance:
--   CREATE ROLE web LOGIN PASSWORD '...' IN ROLE pgbeat_enqueue;
--   CREATE ROLE jobs LOGIN PASSWORD '...' IN ROLE pgbeat_worker;
--   CREATE ROLE beat LOGIN PASSWORD '...' IN ROLE pgbeat_scheduler;
--   CREATE ROLE ops  LOGIN PASSWORD '...' IN ROLE pgbeat_admin;
-- `pgbeat run` (scheduler and worker in one process) takes pgbeat_worker and pgbeat_scheduler;
-- `pgbeat health` works for any of them but pgbeat_enqueue.

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['pgbeat_enqueue', 'pgbeat_keys', 'pgbeat_worker',
                                'pgbeat_scheduler', 'pgbeat_admin'] LOOP
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
                   'pgbeat_scheduler, pgbeat_admin', current_schema());
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
                                'pgbeat_queues', 'pgbeat_queue_starts'] LOOP
        IF to_regclass(name) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I OWNER TO pgbeat_admin', name);
            EXECUTE format('REVOKE ALL ON %I FROM PUBLIC', name);
        END IF;
    END LOOP;
    FOREACH name IN ARRAY ARRAY['pgbeat_notify_jobs()', 'pgbeat_delete_attempts()',
                                'pgbeat_error_signature(text)', 'pgbeat_schedules_stamp()',
                                'pgbeat_schedules_notify()'] LOOP
        IF to_regprocedure(name) IS NOT NULL THEN
            EXECUTE format('ALTER FUNCTION %s OWNER TO pgbeat_admin', name);
        END IF;
    END LOOP;
END
$$;

-- Every command checks the schema version first.
GRANT SELECT ON pgbeat_migrations TO pgbeat_enqueue, pgbeat_keys, pgbeat_worker, pgbeat_scheduler;

-- Enqueue: INSERT, and the columns that ON CONFLICT's arbiters and RETURNING read (the
-- unique key's, the live key's, the id). Payloads and errors stay unreadable.
GRANT INSERT ON jobs TO pgbeat_enqueue;
GRANT SELECT (id, kind, unique_key) ON jobs TO pgbeat_enqueue;
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'jobs'::regclass AND attname = 'job_key'
               AND NOT attisdropped) THEN  -- migration 0004
        GRANT SELECT (job_key, superseded_at, status) ON jobs TO pgbeat_enqueue;
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
END
$$;

-- Worker: claims and outcomes are UPDATEs of a job's state, never of what it runs; no DELETE.
GRANT SELECT ON jobs TO pgbeat_worker;
GRANT UPDATE (status, attempts, run_at, locked_until, last_error, finished_at)
    ON jobs TO pgbeat_worker;
DO $$
BEGIN
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
END
$$;

-- Scheduler: inserts periods (whose ids it draws from the jobs sequence) and checks for
-- live jobs of a schedule; keeps the schedules table, their history and the file versions.
GRANT INSERT ON jobs TO pgbeat_scheduler;
GRANT SELECT (id, kind, unique_key, status) ON jobs TO pgbeat_scheduler;
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

-- Heartbeats: workers and schedulers write their own rows, and only rows of their own
-- role (row-level security), so no role can pass for a worker that `pgbeat health` would
-- count unless it is one. Everyone granted SELECT reads every row.
GRANT SELECT, INSERT, UPDATE, DELETE ON pgbeat_processes TO pgbeat_worker, pgbeat_scheduler;
ALTER TABLE pgbeat_processes ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS pgbeat_processes_read ON pgbeat_processes;
CREATE POLICY pgbeat_processes_read ON pgbeat_processes FOR SELECT USING (true);
DROP POLICY IF EXISTS pgbeat_processes_worker ON pgbeat_processes;
CREATE POLICY pgbeat_processes_worker ON pgbeat_processes TO pgbeat_worker
    USING (role = 'worker') WITH CHECK (role = 'worker');
DROP POLICY IF EXISTS pgbeat_processes_scheduler ON pgbeat_processes;
CREATE POLICY pgbeat_processes_scheduler ON pgbeat_processes TO pgbeat_scheduler
    USING (role = 'scheduler') WITH CHECK (role = 'scheduler');
