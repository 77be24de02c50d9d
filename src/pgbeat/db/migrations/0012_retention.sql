-- Retention by default: finished jobs are deleted by whichever worker holds the turn.

-- The turn, and what the last round did, in one row: `holder` keeps the turn until
-- `held_until` (renewed before every batch), so a holder killed without a word is
-- replaced one hold later; `pgbeat status` shows the last round.
CREATE TABLE IF NOT EXISTS pgbeat_retention (
    id            boolean     PRIMARY KEY DEFAULT true CHECK (id),
    holder        text,
    held_until    timestamptz,
    last_run_at   timestamptz,
    last_run_by   text,
    last_deleted  bigint      NOT NULL DEFAULT 0,
    total_deleted bigint      NOT NULL DEFAULT 0
);
INSERT INTO pgbeat_retention (id) VALUES (true) ON CONFLICT DO NOTHING;

-- Retention finds its rows by finished_at alone (jobs_finished); rows finished before
-- migration 0003 had none.
UPDATE jobs SET finished_at = created_at
WHERE finished_at IS NULL AND status IN ('done', 'failed', 'cancelled');

-- Every status change of a job writes a new row version (status is in the partial indexes'
-- predicates, so none is HOT). With room left on each page the new version stays on its
-- page: the update's WAL record then carries only the changed bytes, and the old version
-- is pruned in place. Measured (docs/benchmarks.md): WAL per job -10 %, heap after a drain
-- -10 %, a pending backlog's heap +34 %. Applies to pages written from now on. The
-- autovacuum settings are those docs/operations.md recommends for a busy queue.
ALTER TABLE jobs SET (fillfactor = 70,
                      autovacuum_vacuum_scale_factor = 0.01,
                      autovacuum_vacuum_threshold = 1000,
                      autovacuum_analyze_scale_factor = 0.02);
