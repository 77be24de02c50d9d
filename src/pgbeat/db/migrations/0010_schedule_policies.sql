-- Schedules beyond cron: the overlap policies that wait (buffer_one) or cancel
-- (cancel_other), a window of time a schedule runs in, a pause after failures, the queue
-- and priority of its jobs, and the history outcomes of a backfill and of a waiting period.
-- Constant defaults only: PostgreSQL 11+ adds them without rewriting the table.

-- No period before start_at or after end_at (either may be NULL: no bound).
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS start_at timestamptz;
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS end_at timestamptz;
-- After this many consecutive periods whose jobs ended failed, the schedule pauses itself
-- and paused_reason says why (NULL for a pause an operator asked for).
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS pause_after_failures int
    CHECK (pause_after_failures >= 1);
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS paused_reason text;
-- The queue and priority of the schedule's jobs (jobs.queue, jobs.priority).
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';
ALTER TABLE pgbeat_schedules ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 0;

ALTER TABLE pgbeat_schedules DROP CONSTRAINT IF EXISTS pgbeat_schedules_overlap_check;
ALTER TABLE pgbeat_schedules ADD CONSTRAINT pgbeat_schedules_overlap_check
    CHECK (overlap IN ('allow', 'skip', 'buffer_one', 'cancel_other'));
ALTER TABLE pgbeat_schedules DROP CONSTRAINT IF EXISTS pgbeat_schedules_window_check;
ALTER TABLE pgbeat_schedules ADD CONSTRAINT pgbeat_schedules_window_check
    CHECK (start_at IS NULL OR end_at IS NULL OR start_at < end_at);

-- backfill: a past period enqueued on request (inserted_by says who asked); buffered: a
-- period of an overlap = "buffer_one" schedule waiting for the schedule's live job to end
-- (job_id is the id its job will have; it becomes enqueued when the job is inserted).
ALTER TABLE pgbeat_schedule_history DROP CONSTRAINT IF EXISTS pgbeat_schedule_history_outcome_check;
ALTER TABLE pgbeat_schedule_history ADD CONSTRAINT pgbeat_schedule_history_outcome_check
    CHECK (outcome IN ('enqueued', 'skipped', 'missed', 'manual', 'backfill', 'buffered'));
-- The waiting periods, which every tick of a replica running buffer_one schedules looks at.
CREATE INDEX IF NOT EXISTS pgbeat_schedule_history_buffered
    ON pgbeat_schedule_history (schedule) WHERE outcome = 'buffered';
