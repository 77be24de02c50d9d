"""The statements that insert jobs: one, many, by key (with the upsert and the supersede
that an upsert needs), and the jobs of the schedule periods a claim decided.

A keyed statement finds a key's live job through ``jobs_live_key`` with a condition that
implies that index's predicate, so the planner can use it and ``ON CONFLICT`` can name it
as its arbiter.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.ended_steps import _ADVANCED

# Inserts one job; a duplicate (kind, unique_key) inserts nothing and returns no row (jobs_unique).
JOBS_INSERT: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, queue, priority, limit_key,
                  meta, tags)
VALUES (%(kind)s, %(payload)s,
        coalesce(%(run_at)s::timestamptz, now() + %(delay)s::interval),
        %(unique_key)s, %(max_attempts)s, %(queue)s, %(priority)s, %(limit_key)s,
        %(meta)s::jsonb, %(tags)s::text[])
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id"""

# Inserts many jobs in one statement from parallel arrays; duplicates are skipped (jobs_unique).
# A job without run_at runs its delay (seconds, 0 if none) after the database's now().
# meta (the caller's trace context) is the same for every job of the call. Each job's tags
# travel as an array literal (arrays of arrays must be rectangular), NULL for none.
JOBS_INSERT_MANY: LiteralString = """
INSERT INTO jobs (kind, payload, run_at, unique_key, max_attempts, queue, priority, limit_key,
                  meta, tags)
SELECT kind, payload, coalesce(run_at, now() + delay_seconds * interval '1 second'),
       unique_key, max_attempts, queue, priority, limit_key,
       %(meta)s::jsonb, tags::text[]
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[], %(run_ats)s::timestamptz[],
            %(delay_seconds)s::float8[], %(unique_keys)s::text[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[],
            %(tags)s::text[])
     AS new_job(kind, payload, run_at, delay_seconds, unique_key, max_attempts,
                queue, priority, limit_key, tags)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id"""

# -- by key ----------------------------------------------------------------------------------

# What the two keyed inserts below share: the keyed jobs of a call, from parallel arrays
# (one per key), and the arbiter of a key's live job (jobs_live_key).
_KEYED_ROWS: LiteralString = """
INSERT INTO jobs (kind, job_key, payload, run_at, max_attempts, queue, priority, limit_key,
                  meta, tags)
SELECT kind, job_key, payload,
       least(coalesce(run_at, now() + delay_seconds * interval '1 second'),
             now() + %(max_wait)s::interval),
       max_attempts, queue, priority, limit_key,
       %(meta)s::jsonb, tags::text[]
FROM unnest(%(kinds)s::text[], %(job_keys)s::text[], %(payloads)s::jsonb[],
            %(run_ats)s::timestamptz[], %(delay_seconds)s::float8[], %(max_attempts)s::int[],
            %(queues)s::text[], %(priorities)s::smallint[], %(limit_keys)s::text[],
            %(tags)s::text[])
     AS new_job(kind, job_key, payload, run_at, delay_seconds, max_attempts,
                queue, priority, limit_key, tags)
ON CONFLICT (kind, job_key)
    WHERE job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')"""

# Inserts keyed jobs from parallel arrays (one per key: the caller drops repeats); a key
# whose live job exists inserts nothing and returns no row (jobs_live_key). A NULL max_wait
# leaves run_at as asked (least() ignores NULLs); otherwise run_at is at most now + max_wait.
# meta (the caller's trace context) is the same for every job of the call.
JOBS_INSERT_KEYED: LiteralString = (
    _KEYED_ROWS
    + """
DO NOTHING
RETURNING id, kind, job_key"""
)

# Inserts keyed jobs, or rewrites the pending live job of each key (jobs_live_key): the new
# payload; run_at the new one (replace), the later (keep_latest) or the earlier
# (keep_earliest) of the two, never past created_at (the first request) + max_wait; a full
# new budget of attempts on top of those spent. Outcome statements fence runs by attempt,
# so attempts is never lowered, and a job that ran before moves one on: a reaped run still
# going on somewhere cannot then mark the new values done. DO UPDATE locks the conflicting
# row and tests its newest version, and waits for an uncommitted insert of the key instead
# of skipping it. A key whose live job is running returns no row: the caller supersedes it
# and comes back. The statement-level insert trigger wakes idle workers on commit, updates
# included. The queue, priority, limit key and tags are the new request's.
JOBS_UPSERT_KEYED: LiteralString = (
    _KEYED_ROWS
    + """
DO UPDATE SET
    payload = excluded.payload,
    run_at = least(CASE %(on_conflict)s::text
                       WHEN 'keep_latest' THEN greatest(jobs.run_at, excluded.run_at)
                       WHEN 'keep_earliest' THEN least(jobs.run_at, excluded.run_at)
                       ELSE excluded.run_at
                   END,
                   jobs.created_at + %(max_wait)s::interval),
    attempts = jobs.attempts + sign(jobs.attempts)::int,
    max_attempts = jobs.attempts + sign(jobs.attempts)::int + excluded.max_attempts,
    last_error = NULL,
    queue = excluded.queue, priority = excluded.priority, limit_key = excluded.limit_key,
    tags = excluded.tags
WHERE jobs.status = 'pending'
RETURNING id, kind, job_key"""
)

# Takes the keys from their running jobs (jobs_live_key): each run goes on, but its row
# leaves the index and will never run again (see JOBS_RETRY, JOBS_RELEASE, JOBS_REAP).
JOBS_SUPERSEDE_KEYED: LiteralString = """
UPDATE jobs SET superseded_at = now(), last_error = %(reason)s
WHERE (kind, job_key) IN (SELECT * FROM unnest(%(kinds)s::text[], %(job_keys)s::text[]))
  AND job_key IS NOT NULL AND superseded_at IS NULL AND status = 'running'
RETURNING id"""

# -- the jobs of schedule periods (../history.py's claim decides which) ----------------------

# Inserts the jobs of the periods a claim enqueued, with the ids the claim gave them: the
# columns of every period of the tick (written ahead of the fire time) and an id for each,
# NULL for those that get no job now. What schedules share (payload, max_attempts, how
# long to keep, queue, priority) travels once per template and is read by position, so
# no join at all. Payloads and queues travel as one jsonb array each, not as jsonb[] and
# text[]: a subscript of an array of variable-length values walks it from its start, so
# a tick of as many templates as periods (one payload per customer) took quadratic time;
# a jsonb array's element is found by its offset. Tags likewise: a jsonb array of array
# literals (NULL for none). Only the periods this claim's history
# rows took get an id, so a conflict is rare (a period's job inserted without history: by
# an older pgbeat, or an application's job under a period's key): the claim first runs
# PERIOD_JOBS_INSERT_NEW, a plain insert in a savepoint that such a job refuses with a
# unique violation (nothing written), and only then this statement with ON CONFLICT. The
# speculative insertion of ON CONFLICT checks jobs_unique before each row, then inserts it
# with a token and confirms it (a WAL record more): for rows that never conflict, a cost
# a plain insert, whose jobs_unique entry checks uniqueness as it goes in, does not pay
# (figures in docs/benchmarks.md). Returns how many it inserted, not their ids: every one
# in all but that rare case (PERIOD_JOBS_PRESENT then says which), and 10,000 ids read back
# one row each cost the scheduler more than the count.
_PERIOD_JOBS_ROWS: LiteralString = """
    INSERT INTO jobs AS j (id, kind, payload, run_at, unique_key, max_attempts, keep_until,
                           queue, priority, tags)
    OVERRIDING SYSTEM VALUE
    SELECT p.id, p.kind, %(payloads)s::jsonb -> (p.template - 1), to_timestamp(p.run_epoch),
           p.unique_key, (%(max_attempts)s::int[])[p.template],
           to_timestamp(p.run_epoch + (%(keep_seconds)s::float8[])[p.template]),
           %(queues)s::jsonb ->> (p.template - 1), (%(priorities)s::smallint[])[p.template],
           (%(tags)s::jsonb ->> (p.template - 1))::text[]
    FROM unnest(%(ids)s::bigint[], %(kinds)s::text[], %(run_epochs)s::float8[],
                %(unique_keys)s::text[], %(templates)s::int[])
         AS p(id, kind, run_epoch, unique_key, template)
    WHERE p.id IS NOT NULL"""

PERIOD_JOBS_INSERT: LiteralString = (
    "WITH inserted AS ("
    + _PERIOD_JOBS_ROWS
    + """
    ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING j.id
)
SELECT count(*) FROM inserted"""
)

# PERIOD_JOBS_INSERT as a first try: the same rows, no ON CONFLICT, nothing returned (all
# were inserted, or the statement was refused whole with a unique violation when some
# period's job exists already).
PERIOD_JOBS_INSERT_NEW: LiteralString = _PERIOD_JOBS_ROWS

# Which of these job ids exist (primary key): after a PERIOD_JOBS_INSERT that inserted fewer
# jobs than it was given, the ones it inserted (each id was drawn for it from the sequence,
# so no other writer has a job of that id).
PERIOD_JOBS_PRESENT: LiteralString = """
SELECT id FROM jobs WHERE id = ANY(%(ids)s::bigint[])"""

# overlap = "cancel_other": once a claim enqueued a new period of these schedules, their
# other live jobs give way (jobs_live_schedule). A running one is asked to stop
# (cancel_requested_at, and a notification on pgbeat_cancel naming it: its worker ends the
# run); a pending one (an older period not started yet) is cancelled at once, and
# pgbeat_finished names it for whoever waits on it (pgbeat.wait). Why goes to last_error,
# as JOBS_CANCEL writes it. The new periods' own jobs (%(keep)s) are left alone, and so is
# a job whose key only looks like the schedule's: the key must be a period's or a manual
# run's, as in history.py's claim (an application's `<name>@x` is not the schedule's). A
# cancelled workflow step (a schedule's job may be one) advances its workflow
# (ended_steps.py).
PERIOD_JOBS_CANCEL_OTHERS: LiteralString = (
    """
WITH ended AS (
    UPDATE jobs AS j
    SET status = CASE j.status WHEN 'pending' THEN 'cancelled' ELSE j.status END,
        finished_at = CASE j.status WHEN 'pending' THEN now() ELSE j.finished_at END,
        last_error = %(reason)s,
        cancel_requested_at = CASE j.status WHEN 'running' THEN now()
                                   ELSE j.cancel_requested_at END
    FROM unnest(%(schedules)s::text[], %(kinds)s::text[]) AS s(schedule, kind)
    WHERE split_part(j.unique_key, '@', 1) = s.schedule AND j.kind = s.kind
      AND j.unique_key IS NOT NULL AND j.status IN ('pending', 'running')
      AND j.unique_key ~ ('^[^@]+@([0-9]{4}-[0-9]{2}-[0-9]{2}T'
                          || '[0-9]{2}:[0-9]{2}:[0-9]{2}Z|manual:[0-9]+)$')
      AND j.cancel_requested_at IS NULL AND NOT (j.id = ANY(%(keep)s::bigint[]))
    RETURNING j.id, j.status, j.workflow_id,
              pg_notify(pgbeat_channel(CASE j.status WHEN 'running' THEN 'pgbeat_cancel'
                                                      ELSE 'pgbeat_finished' END),
                        j.id::text) AS notified
)"""
    + _ADVANCED
    + """
SELECT id, notified FROM ended, advanced"""
)
