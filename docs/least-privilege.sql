-- The privileges a pgbeat application role needs once `pgbeat migrate` has run (as the
-- owner of the schema). Workers, schedulers, `pgbeat enqueue` and the admin commands
-- need nothing more; only `pgbeat migrate` needs to create tables.
-- Replace pgbeat_app with your role: CREATE ROLE pgbeat_app LOGIN PASSWORD '...';
GRANT SELECT, INSERT, UPDATE, DELETE ON jobs, pgbeat_processes, pgbeat_job_attempts TO pgbeat_app;
GRANT SELECT ON pgbeat_migrations TO pgbeat_app;
