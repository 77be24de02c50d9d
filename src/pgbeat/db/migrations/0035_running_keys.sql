-- A key's running jobs, by key: what a key-limited claim counts for each key it may take
-- (key_concurrency less the key's running jobs). Until now each claim of a key-limited
-- queue read every running job of the cluster (jobs_running, then a filter on the queue
-- and key): its cost grew with the running jobs of every queue, 0.6 ms a claim with 100
-- running and about 30 ms with 5,000 (docs/flow-control.md, "The claim of a key-limited
-- queue"). Now each key of the claim's head is one probe here, bounded by the key's limit,
-- whatever runs elsewhere. Only keyed jobs enter it, while they run: a plain job's claim
-- and completion do not touch it.
CREATE INDEX IF NOT EXISTS jobs_running_key
    ON jobs (queue, limit_key)
    WHERE status = 'running' AND limit_key IS NOT NULL;
