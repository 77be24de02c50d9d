-- The name check of 0015 on inserts only. A row trigger BEFORE UPDATE makes PostgreSQL
-- fetch and lock each updated row's old version before it looks at the trigger's column
-- list or WHEN clause: every claim and every completion paid it, about one shared buffer a
-- job (docs/benchmarks.md, "What an insert pays"), for a check that only an UPDATE of
-- queue or limit_key could need. pgbeat writes those two columns on an update in one place
-- only, a replace by key, with values the API or pgbeat_enqueue() checked; and under the
-- least-privilege roles (docs/least-privilege.sql) no other role may update them.
DROP TRIGGER IF EXISTS pgbeat_job_names ON jobs;
CREATE TRIGGER pgbeat_job_names BEFORE INSERT ON jobs
    FOR EACH ROW
    WHEN (length(NEW.queue) NOT BETWEEN 1 AND 200 OR NEW.queue <> btrim(NEW.queue)
          OR NEW.limit_key = '' OR octet_length(NEW.limit_key) > 1000)
    EXECUTE FUNCTION pgbeat_refuse_job_names();
