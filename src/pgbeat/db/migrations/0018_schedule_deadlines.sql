-- Schedules that watch themselves: a deadline per schedule, and each period's verdict.
-- Constant defaults only: PostgreSQL 11+ adds the columns without rewriting the tables.

-- A period whose job has not ended done within `deadline` of its fire time is late; a job
-- of kind `on_late` is then enqueued for it, once (NULL: no deadline, no alert).
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS deadline interval
    CHECK (deadline > interval '0');
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS on_late text CHECK (on_late <> '');

-- A period claimed for a schedule with a deadline carries it as an instant (due_by: fire
-- time plus deadline) and is 'watching' until a replica judges it, at due_by, 'met' (its
-- job ended done by then) or 'late' (late_at: when that was found; late_status: what its
-- job was then, or why it had none). Judged once: the judging update only takes rows
-- still 'watching' (db/sql/history.py, HISTORY_JUDGE_DEADLINES).
ALTER TABLE pgbeat_schedule_history ADD COLUMN IF NOT EXISTS due_by timestamptz;
ALTER TABLE pgbeat_schedule_history ADD COLUMN IF NOT EXISTS deadline_state text
    CHECK (deadline_state IN ('watching', 'met', 'late'));
ALTER TABLE pgbeat_schedule_history ADD COLUMN IF NOT EXISTS late_at timestamptz;
ALTER TABLE pgbeat_schedule_history ADD COLUMN IF NOT EXISTS late_status text;

-- The periods still watched, by due time: the judging reads only these few entries (a
-- period leaves the index once judged), never the history itself.
CREATE INDEX IF NOT EXISTS pgbeat_schedule_history_watching
    ON pgbeat_schedule_history (due_by) WHERE deadline_state = 'watching';
