-- The jobs table of the design pgbeat follows, unchanged, so SQL written against that
-- design keeps working. IF NOT EXISTS lets a team that already created it adopt pgbeat.
CREATE TABLE IF NOT EXISTS jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text        NOT NULL,
    payload      jsonb       NOT NULL,
    status       text        NOT NULL DEFAULT 'pending'
                             CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts     int         NOT NULL DEFAULT 0,
    max_attempts int         NOT NULL DEFAULT 8,
    run_at       timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz,
    last_error   text,
    unique_key   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Workers only ever look for pending jobs that are due.
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (run_at) WHERE status = 'pending';
-- One job per (kind, unique_key): how every scheduler replica enqueues a period once.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique ON jobs (kind, unique_key) WHERE unique_key IS NOT NULL;
