-- This round's columns on jobs, added together so that every feature builds on one schema:
-- flow control (queue, priority, limit_key), results (result), tracing (meta) and the
-- cancel of a running job (cancel_requested_at).
-- Constant defaults: PostgreSQL 11+ adds them without rewriting the table.

-- The queue a job waits in: workers may take only some queues, and limits are kept per queue.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';
-- Higher runs first among due jobs (then run_at, then id).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 0;
-- The key a queue's per-key concurrency and rate limits count by (e.g. 'customer:42').
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS limit_key text;
-- A handler's return value, written with its completion.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS result jsonb;
-- What travels with a job besides its payload: the trace context of its enqueue.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS meta jsonb;
-- Set when someone asks a running job to stop (pgbeat.cancel_job, a schedule's
-- overlap = "cancel_other"): its worker tells the handler and ends the job cancelled.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cancel_requested_at timestamptz;
