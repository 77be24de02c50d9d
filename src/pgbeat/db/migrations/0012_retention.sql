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
