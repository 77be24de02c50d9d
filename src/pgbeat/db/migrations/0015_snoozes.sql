-- Snooze, exactly: a snoozed run gives its attempt back. `attempts` counts every run but
-- the snoozed ones, `max_attempts` never changes (a snooze used to add one to it, and
-- overflowed at 2147483647), and `snoozes` counts the snoozes.
--
-- No volatile default: PostgreSQL adds the column at once, rewriting nothing.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS snoozes int NOT NULL DEFAULT 0;

-- Jobs snoozed before this migration: the attempts history (0009) recorded each snooze,
-- so their attempts and max_attempts are given back and their snoozes counted. Running
-- jobs are left alone: their attempts fence the outcome their worker is about to write.
UPDATE jobs AS j
SET snoozes = s.n,
    attempts = greatest(j.attempts - s.n, 0),
    max_attempts = greatest(j.max_attempts - s.n, 1)
FROM (SELECT job_id, count(*)::int AS n FROM pgbeat_job_attempts
      WHERE outcome = 'snoozed' GROUP BY job_id) AS s
WHERE j.id = s.job_id AND j.status <> 'running' AND j.snoozes = 0;
