-- The claim's heads per queue and kind: a worker whose claim order is clogged by due jobs
-- it has no handler for (a rolling deploy's new kind, 200,000 of them), or that claims
-- queue by queue beside held backlogs, reads each (queue, kind)'s head in claim order here
-- instead of stepping over the foreign kinds' rows (JOBS_CLAIM_BY_QUEUE_KIND). Every
-- pending job pays one more entry (docs/flow-control.md measures the enqueue's cost); a
-- job leaves it when claimed, as it leaves the other claim indexes.
CREATE INDEX IF NOT EXISTS jobs_claim_kind
    ON jobs (queue, kind, priority DESC, run_at, id) WHERE status = 'pending';
