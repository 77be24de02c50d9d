-- Flow control: per-queue limits kept in the database, enforced by the claim itself.

-- One row per queue that has settings (a queue without a row is unlimited and running).
-- A NULL limit is no limit. Rates are `rate_count` starts in any window of `rate_period`.
CREATE TABLE IF NOT EXISTS pgbeat_queues (
    name            text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
    paused          boolean NOT NULL DEFAULT false,
    concurrency     int CHECK (concurrency >= 1),
    key_concurrency int CHECK (key_concurrency >= 1),
    rate_count      int CHECK (rate_count >= 1),
    rate_period     interval CHECK (rate_period > interval '0'),
    key_rate_count  int CHECK (key_rate_count >= 1),
    key_rate_period interval CHECK (key_rate_period > interval '0'),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((rate_count IS NULL) = (rate_period IS NULL)),
    CHECK ((key_rate_count IS NULL) = (key_rate_period IS NULL))
);

-- The starts of rate-limited queues inside their window: the claim counts them under the
-- queue's row lock and deletes those older than the longest window.
CREATE TABLE IF NOT EXISTS pgbeat_queue_starts (
    queue      text NOT NULL,
    limit_key  text,
    started_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS pgbeat_queue_starts_window
    ON pgbeat_queue_starts (queue, started_at);
CREATE INDEX IF NOT EXISTS pgbeat_queue_starts_key_window
    ON pgbeat_queue_starts (queue, limit_key, started_at) WHERE limit_key IS NOT NULL;

-- Due jobs in claim order (higher priority first, then run_at, then id): a worker of every
-- queue reads the head of this index, never sorts the backlog.
CREATE INDEX IF NOT EXISTS jobs_claim_order
    ON jobs (priority DESC, run_at, id) WHERE status = 'pending';
-- The same order within one queue, for the claims of limited queues and --queues workers.
CREATE INDEX IF NOT EXISTS jobs_claim_queue
    ON jobs (queue, priority DESC, run_at, id) WHERE status = 'pending';
-- The same order per limit key, for queues with per-key limits; jobs without one are absent.
CREATE INDEX IF NOT EXISTS jobs_claim_key
    ON jobs (queue, limit_key, priority DESC, run_at, id)
    WHERE status = 'pending' AND limit_key IS NOT NULL;
-- The slots a concurrency limit counts are the running rows, read through jobs_running
-- (migration 0002): at most the cluster's slots, and no index more for every claim to write.
