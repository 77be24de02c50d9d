-- The privileges a pgbeat application role needs once `pgbeat migrate` has run (as the
-- owner of the schema). Workers, schedulers, `pgbeat enqueue` and the admin commands
-- need nothing more; only `pgbeat migrate` needs to create tables.
-- Replace pgbeat_app with your role: CREATE ROLE pgbeat_app LOGIN PASSWORD '...';
GRANT SELECT, INSERT, UPDATE, DELETE ON jobs, pgbeat_processes, pgbeat_job_attempts,
    pgbeat_schedules, pgbeat_schedule_history, pgbeat_schedule_files TO pgbeat_app;
GRANT SELECT ON pgbeat_migrations TO pgbeat_app;
-- The scheduler takes a period's job id from the jobs sequence before inserting it.
GRANT USAGE ON SEQUENCE jobs_id_seq TO pgbeat_app;
