-- The claim's index set, one entry fewer for every pending job: a plain (unkeyed) pending
-- job enters jobs_pkey, jobs_ready, jobs_claim_order and one index of its queue, as before
-- round four; a keyed one also jobs_claim_key. Three indexes of 0008, 0019 and 0021 that
-- every unkeyed job entered (jobs_claim_queue, jobs_claim_unkeyed, jobs_claim_kind: the
-- same queue's order three times) become two that split the pending jobs by whether they
-- have a limit key, each led by (queue, kind) so that a claim reads each kind's head of a
-- queue without stepping over other kinds' jobs (a rolling deploy's new kind), a fair
-- queue's unkeyed jobs without stepping over its keyed backlog, and a queue's claim order
-- as the merge of those heads (docs/flow-control.md, "The index set").
CREATE INDEX IF NOT EXISTS jobs_claim_queue_unkeyed
    ON jobs (queue, kind, priority DESC, run_at, id)
    WHERE status = 'pending' AND limit_key IS NULL;
CREATE INDEX IF NOT EXISTS jobs_claim_queue_keyed
    ON jobs (queue, kind, priority DESC, run_at, id)
    WHERE status = 'pending' AND limit_key IS NOT NULL;
DROP INDEX IF EXISTS jobs_claim_queue;
DROP INDEX IF EXISTS jobs_claim_unkeyed;
DROP INDEX IF EXISTS jobs_claim_kind;
