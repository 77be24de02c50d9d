-- A key's running jobs, by key: what a key-limited claim counts for each key it may take
-- (key_concurrency less the key's running jobs). Until now each claim of a key-limited
-- queue read every running job of the cluster (jobs_running, then a filter on the queue
-- and key): 0.64 ms of a claim with 100 running, about 1 ms more for every 5,000 jobs
-- running in other queues (docs/flow-control.md, "How the claim enforces it", per-key
-- limits). Now each key of the claim's head is one probe here, bounded by the key's limit,
-- whatever runs elsewhere; a fair claim reads its queue's running keyed jobs here too.
-- Only keyed jobs enter it, while they run: a plain job's claim and completion do not
-- touch it.
CREATE INDEX IF NOT EXISTS jobs_running_key
    ON jobs (queue, limit_key)
    WHERE status = 'running' AND limit_key IS NOT NULL;
