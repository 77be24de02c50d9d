-- A schedule's history newest first is read through two partial indexes instead of one
-- more index over every row: the periods through pgbeat_schedule_history_period (0005),
-- the manual runs (`schedules run`, a few rows) through the new one below; the statements
-- that want both read each and merge them (db/sql/history.py). The index over every row,
-- pgbeat_schedule_history_recent, had the same columns as the period index, and every
-- claimed period paid for both: at 10,000 periods a tick, about a third of the time the
-- history rows took to insert.
CREATE INDEX IF NOT EXISTS pgbeat_schedule_history_manual
    ON pgbeat_schedule_history (schedule, fire_at) WHERE outcome = 'manual';
DROP INDEX IF EXISTS pgbeat_schedule_history_recent;
