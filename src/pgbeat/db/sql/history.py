"""The statements of ``pgbeat_schedule_history`` (migrations 0005 and 0010): the claim of
each period, backfills, manual runs, the history read and purged. The judging of periods
against their deadlines is in deadlines.py.

A period's history row decides whether it gets a job. HISTORY_RELEASE_BUFFERED,
HISTORY_BACKFILL and HISTORY_RUN_NOW insert that job in the same statement; the jobs of a
claim are inserted by sql/jobs/enqueue.py (PERIOD_JOBS_INSERT). The claim takes its fire
times as values.
"""

from __future__ import annotations

from typing import LiteralString

# -- the claim of a tick ---------------------------------------------------------------------

# HISTORY_CLAIM_PERIODS (composed below from this body, its ON CONFLICT and its RETURNING):
# claims the periods of one tick in pgbeat_schedule_history and decides each one's outcome.
# Each period (schedule, fire time, kind, the definition hash it was computed from, whether
# the catch-up policy dropped it, its rank among its schedule's due periods of this tick)
# joins its schedule's row (primary key): a period of a definition that changed or went
# since the replica computed it is dropped (compared after the join, behind MATERIALIZED:
# as a join condition, two equalities on unique values made the planner expect one row and
# join 10,000 periods in a nested loop), and so is one outside the row's start_at..end_at.
# So is a period of a schedule from code at or before the row's created_at: a replica whose
# copy still holds a deleted schedule that was created again must not catch up the deleted
# span. A period inside the row's last pause (paused_at, resumed_at] is skipped (paused)
# like one of a current pause. Periods already decided are dropped first, one probe each
# (pgbeat_schedule_history_period): a replica that comes second does little. OFFSET 0 keeps
# that probe a probe: as an anti-join the planner may hash the whole history instead, on
# analyzed tables, so that the history's size, not the tick's, sets the cost. Outcomes:
# skipped (paused); missed (catch-up); skipped (failures: the schedule's last
# pause_after_failures enqueued periods whose jobs have ended all ended failed and were
# claimed after its last resume, probed newest first on pgbeat_schedule_history_period: a
# period whose job is pending or running, retries included, is passed over, as with
# retries that outlast the interval the newest periods are always unfinished; the caller
# then pauses the schedule);
# for a schedule with a live job (pending or running, jobs_live_schedule; its scheduler's:
# the key is a period's or a manual run's, `<name>@<UTC instant>` or `<name>@manual:<id>`,
# which under docs/least-privilege.sql only the scheduler and the dashboard may insert, not
# an application's job keyed `<name>@x`) or an earlier due
# period in this tick, skipped (overlap) under "skip", and under "buffer_one" buffered
# (the one period that waits, pgbeat_schedule_history_buffered) or skipped (overlap) when
# one waits already; else enqueued. The history row is the period's claim: the first
# replica to write it decides, and only the rows this statement wrote get a job id, drawn
# from the jobs sequence up front so the row names the job PERIOD_JOBS_INSERT inserts. A
# missed period that another replica then finds on time becomes enqueued. A period of a
# schedule with a deadline that is enqueued, buffered or missed is watched from here on:
# due_by is its fire time plus the deadline, and HISTORY_JUDGE_DEADLINES judges it then
# (skipped periods are not watched: no job was wanted). Rows go in (schedule, fire time)
# order so that replicas lock them alike. busy and reasoned end in OFFSET 0 so that each
# period's reason and live check are computed once, not once per column that reads them.
# Every row's inserted_at is the statement's start: one value per tick keeps the BRIN
# index on it (pgbeat_schedule_history_age) from rewriting its range's summary at each
# row. No join between two CTEs anywhere: each scans the one before it once, so the plan
# is linear whatever the statistics say
# (tests/integration/test_schedule_scale.py and test_claim_plans.py check the plan).
_CLAIM_ROWS: LiteralString = """
WITH period AS MATERIALIZED (
    SELECT p.*, s.overlap, s.catch_up, s.pause_after_failures, s.resumed_at, s.deadline,
           s.definition_hash = p.definition_hash AS current,
           s.paused OR coalesce(s.resumed_at > s.paused_at
                                AND to_timestamp(p.fire_epoch) > s.paused_at
                                AND to_timestamp(p.fire_epoch) <= s.resumed_at, false)
               AS paused,
           s.source = 'api' AND to_timestamp(p.fire_epoch) <= s.created_at AS before_creation
    FROM unnest(%(schedules)s::text[], %(fire_epochs)s::float8[], %(kinds)s::text[],
                %(hashes)s::text[], %(missed)s::bool[], %(ranks)s::int[])
         AS p(schedule, fire_epoch, kind, definition_hash, missed, rank)
    JOIN pgbeat_schedules AS s ON s.name = p.schedule AND s.deleted_at IS NULL
    WHERE (s.start_at IS NULL OR to_timestamp(p.fire_epoch) >= s.start_at)
      AND (s.end_at IS NULL OR to_timestamp(p.fire_epoch) <= s.end_at)
      AND NOT EXISTS (
        SELECT FROM pgbeat_schedule_history AS done
        WHERE done.schedule = p.schedule AND done.fire_at = to_timestamp(p.fire_epoch)
          AND done.outcome <> 'manual' AND (done.outcome <> 'missed' OR p.missed)
        OFFSET 0
    )
), busy AS (
    SELECT period.*,
           CASE WHEN overlap <> 'allow' AND overlap <> 'cancel_other' THEN EXISTS (
               SELECT FROM jobs AS j
               WHERE split_part(j.unique_key, '@', 1) = period.schedule
                 AND j.kind = period.kind AND j.unique_key IS NOT NULL
                 AND j.status IN ('pending', 'running')
                 AND j.unique_key ~ ('^[^@]+@([0-9]{4}-[0-9]{2}-[0-9]{2}T'
                                     || '[0-9]{2}:[0-9]{2}:[0-9]{2}Z|manual:[0-9]+)$')
           ) ELSE false END AS live,
           CASE WHEN overlap = 'buffer_one' THEN EXISTS (
               SELECT FROM pgbeat_schedule_history AS b
               WHERE b.schedule = period.schedule AND b.outcome = 'buffered')
               ELSE false END AS waiting
    FROM period WHERE current AND NOT before_creation
    OFFSET 0
), reasoned AS (
    SELECT busy.*, CASE
        WHEN paused THEN 'paused'
        WHEN missed THEN 'catch_up=' || catch_up
        WHEN pause_after_failures IS NOT NULL AND pause_after_failures <= (
            SELECT count(*) FROM (
                SELECT j.status, h.inserted_at FROM pgbeat_schedule_history AS h
                LEFT JOIN jobs AS j ON j.id = h.job_id
                WHERE h.schedule = busy.schedule AND h.outcome = 'enqueued'
                  AND h.fire_at < to_timestamp(busy.fire_epoch)
                  AND (j.status IS NULL OR j.status NOT IN ('pending', 'running'))
                ORDER BY h.fire_at DESC LIMIT busy.pause_after_failures
            ) AS recent WHERE recent.status = 'failed'
                AND recent.inserted_at > coalesce(busy.resumed_at, '-infinity'))
        THEN 'failures'
        WHEN overlap = 'skip' AND (rank > 0 OR live) THEN 'overlap'
        WHEN overlap = 'buffer_one'
             AND rank + (live OR waiting)::int + waiting::int >= 2 THEN 'overlap'
        WHEN overlap = 'buffer_one' AND rank + (live OR waiting)::int = 1 THEN 'waits'
    END AS reason
    FROM busy
    ORDER BY schedule, fire_epoch
    OFFSET 0
)
INSERT INTO pgbeat_schedule_history AS h (schedule, fire_at, outcome, reason, job_id,
                                         inserted_at, inserted_by, due_by, deadline_state)
SELECT schedule, to_timestamp(fire_epoch),
       CASE WHEN reason IS NULL THEN 'enqueued' WHEN reason = 'waits' THEN 'buffered'
            WHEN missed AND NOT paused THEN 'missed' ELSE 'skipped' END,
       CASE WHEN reason = 'waits' THEN 'overlap' ELSE reason END,
       CASE WHEN reason IS NULL OR reason = 'waits'
            THEN nextval((SELECT pg_get_serial_sequence('jobs', 'id'))::regclass) END,
       statement_timestamp(), %(by)s,
       CASE WHEN reason IS NULL OR reason = 'waits' OR (missed AND NOT paused)
            THEN to_timestamp(fire_epoch) + deadline END,
       CASE WHEN deadline IS NOT NULL
             AND (reason IS NULL OR reason = 'waits' OR (missed AND NOT paused))
            THEN 'watching' END
FROM reasoned"""

# The first writer of a period decides it (pgbeat_schedule_history_period); past that, a
# missed period found on time becomes enqueued.
_CLAIM_CONFLICT: LiteralString = """
ON CONFLICT (schedule, fire_at) WHERE outcome <> 'manual' DO UPDATE
    SET outcome = excluded.outcome, reason = NULL, job_id = excluded.job_id,
        inserted_at = excluded.inserted_at, inserted_by = excluded.inserted_by,
        due_by = coalesce(h.due_by, excluded.due_by),
        deadline_state = coalesce(h.deadline_state, excluded.deadline_state)
    WHERE h.outcome = 'missed' AND excluded.outcome = 'enqueued'"""

_CLAIM_RETURNING: LiteralString = """
RETURNING h.schedule, extract(epoch FROM h.fire_at)::float8 AS fire_epoch, h.outcome,
          h.job_id, h.reason"""

HISTORY_CLAIM_PERIODS: LiteralString = _CLAIM_ROWS + _CLAIM_CONFLICT + _CLAIM_RETURNING

# The claim as a first try: the same rows with no ON CONFLICT, refused with a unique
# violation (nothing written) when any period has a history row already, which the
# anti-join above leaves to a race with another replica or a missed period found on time;
# the caller then runs HISTORY_CLAIM_PERIODS. Without the speculative insertion's check
# and confirmation of each row, a tick of new periods costs less (docs/benchmarks.md).
HISTORY_CLAIM_NEW_PERIODS: LiteralString = _CLAIM_ROWS + _CLAIM_RETURNING

# overlap = "buffer_one": the waiting period of each schedule whose live jobs have all ended
# becomes enqueued and gets its job, due at its fire time (the waiting rows by
# pgbeat_schedule_history_buffered, then jobs_live_schedule). Decided once: a second
# replica waits on the row lock and then finds it enqueued. Jitter does not apply to a
# period that waited. Returns the jobs inserted.
HISTORY_RELEASE_BUFFERED: LiteralString = """
WITH released AS (
    UPDATE pgbeat_schedule_history AS h
    SET outcome = 'enqueued', reason = NULL, inserted_at = clock_timestamp(),
        inserted_by = %(by)s
    FROM pgbeat_schedules AS s
    WHERE h.outcome = 'buffered' AND s.name = h.schedule AND s.deleted_at IS NULL
      AND NOT EXISTS (
          SELECT FROM jobs AS j
          WHERE split_part(j.unique_key, '@', 1) = h.schedule AND j.kind = s.kind
            AND j.unique_key IS NOT NULL AND j.status IN ('pending', 'running')
            AND j.unique_key ~ ('^[^@]+@([0-9]{4}-[0-9]{2}-[0-9]{2}T'
                                || '[0-9]{2}:[0-9]{2}:[0-9]{2}Z|manual:[0-9]+)$'))
    RETURNING h.schedule, h.fire_at, h.job_id, s.kind, s.payload, s.max_attempts, s.queue,
              s.priority, s.tags, s.catch_up_window
)
INSERT INTO jobs AS j (id, kind, payload, run_at, unique_key, max_attempts, keep_until,
                       queue, priority, tags)
OVERRIDING SYSTEM VALUE
SELECT r.job_id, r.kind, r.payload, r.fire_at,
       r.schedule || '@' || to_char(r.fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       coalesce(r.max_attempts, %(default_max_attempts)s),
       r.fire_at + r.catch_up_window + %(keep_extra)s::interval, r.queue, r.priority, r.tags
FROM released AS r
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING j.id, j.unique_key"""

# -- backfill --------------------------------------------------------------------------------

# Enqueues past periods of one schedule on request: each fire time given that has no
# history row, or only a missed one, gets a row (outcome backfill, inserted_by who asked)
# and a job with the period's own key, due at its fire time (pgbeat_schedule_history_period,
# then jobs_unique). Idempotent: a second call finds the rows and adds nothing. Paused or
# not, overlap or not: an operator asked for it. Returns the jobs inserted.
HISTORY_BACKFILL: LiteralString = """
WITH s AS (
    SELECT name, kind, payload, max_attempts, queue, priority, tags, catch_up_window
    FROM pgbeat_schedules WHERE name = %(name)s AND deleted_at IS NULL
), claimed AS (
    INSERT INTO pgbeat_schedule_history AS h (schedule, fire_at, outcome, reason, job_id,
                                             inserted_by)
    SELECT s.name, f.fire_at, 'backfill', %(reason)s,
           nextval((SELECT pg_get_serial_sequence('jobs', 'id'))::regclass), %(by)s
    FROM s CROSS JOIN unnest(%(fire_ats)s::timestamptz[]) AS f(fire_at)
    ORDER BY f.fire_at
    ON CONFLICT (schedule, fire_at) WHERE outcome <> 'manual' DO UPDATE
        SET outcome = 'backfill', reason = excluded.reason, job_id = excluded.job_id,
            inserted_at = excluded.inserted_at, inserted_by = excluded.inserted_by
        WHERE h.outcome = 'missed'
    RETURNING h.fire_at, h.job_id
)
INSERT INTO jobs AS j (id, kind, payload, run_at, unique_key, max_attempts, keep_until,
                       queue, priority, tags)
OVERRIDING SYSTEM VALUE
SELECT c.job_id, s.kind, s.payload, c.fire_at,
       s.name || '@' || to_char(c.fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       coalesce(s.max_attempts, %(default_max_attempts)s),
       c.fire_at + s.catch_up_window + %(keep_extra)s::interval, s.queue, s.priority, s.tags
FROM claimed AS c CROSS JOIN s
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING j.id, j.run_at"""

# Which of these fire times of one schedule a backfill would leave alone: those with a
# history row other than missed (pgbeat_schedule_history_period). For a dry run.
HISTORY_PERIODS_TAKEN: LiteralString = """
SELECT h.fire_at FROM pgbeat_schedule_history AS h
WHERE h.schedule = %(name)s AND h.fire_at = ANY(%(fire_ats)s::timestamptz[])
  AND h.outcome NOT IN ('manual', 'missed')"""

# -- the rest ---------------------------------------------------------------------------------

# Serialises the claims of schedules with an overlap rule (skip, buffer_one, cancel_other:
# transaction-level advisory locks,
# taken in name order so that replicas never deadlock): the claim that follows in the same
# transaction sees the jobs another replica's claim of an earlier period inserted.
HISTORY_LOCK_OVERLAP: LiteralString = """
SELECT count(pg_advisory_xact_lock(pgbeat_lock_key(hashtextextended('pgbeat.overlap:' || name, 0))))
FROM (SELECT DISTINCT unnest(%(names)s::text[]) AS name ORDER BY 1) AS locked"""

# The claim's settings, whatever the connection's: JIT would compile a large tick's claim
# for longer than it then runs for; and no sequential scan where an index can probe. On a
# table analyzed while empty (a new deployment's jobs table) the planner costs a scan at
# nothing, and the jobs insert's probe for an existing job then scanned, at each of 10,000
# periods, the rows the statement had inserted so far: quadratic (docs/benchmarks.md). And
# room to sort and hash a large tick in memory: at the default 4 MB, 50,000 periods spilled
# the claim's arrays, its CTE and its sort to temporary files.
HISTORY_CLAIM_SETTINGS: LiteralString = """
SELECT set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true),
       set_config('work_mem', '64MB', true)"""

# Makes the claims of replicas take turns (a transaction-level advisory lock; the key is
# "pgbeat.c" as a bigint), waiting 2 s at most: at a fire time every replica claims the same
# periods, and the first should run alone rather than share the CPU with the others'
# redundant work. Past the wait a replica claims alongside (history rows still decide).
HISTORY_WAIT_TURN: LiteralString = """
SET LOCAL lock_timeout = '2s';
SELECT pg_advisory_xact_lock(pgbeat_lock_key(8099550642415349347));
SET LOCAL lock_timeout = DEFAULT"""

# Points claimed periods whose job existed already (inserted by another writer) at that job
# (jobs_unique, then pgbeat_schedule_history_period).
HISTORY_LINK_EXISTING_JOBS: LiteralString = """
UPDATE pgbeat_schedule_history AS h SET job_id = j.id
FROM unnest(%(schedules)s::text[], %(fire_epochs)s::float8[], %(kinds)s::text[],
            %(unique_keys)s::text[]) AS p(schedule, fire_epoch, kind, unique_key)
JOIN jobs AS j ON j.kind = p.kind AND j.unique_key = p.unique_key
WHERE h.schedule = p.schedule AND h.fire_at = to_timestamp(p.fire_epoch)
  AND h.outcome <> 'manual'"""

# Runs a schedule now: one job due at once with a key of its own ('<name>@manual:<job id>',
# never a period's), recorded as manual in the history. Paused or not, overlap or not: an
# operator asked for it. Returns the job's id, or nothing without such a schedule.
HISTORY_RUN_NOW: LiteralString = """
WITH s AS (
    SELECT name, kind, payload, max_attempts, queue, priority, tags FROM pgbeat_schedules
    WHERE name = %(name)s AND deleted_at IS NULL
), claimed AS (
    INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, job_id,
                                         inserted_by)
    SELECT name, now(), 'manual', %(reason)s,
           nextval((SELECT pg_get_serial_sequence('jobs', 'id'))::regclass), %(by)s
    FROM s
    RETURNING schedule, job_id
)
INSERT INTO jobs (id, kind, payload, run_at, unique_key, max_attempts, queue, priority, tags)
OVERRIDING SYSTEM VALUE
SELECT c.job_id, s.kind, s.payload, now(), s.name || '@manual:' || c.job_id,
       coalesce(s.max_attempts, %(default_max_attempts)s), s.queue, s.priority, s.tags
FROM claimed AS c JOIN s ON s.name = c.schedule
RETURNING id"""

# A schedule's history, newest first, before a fire time if given, with each period's job:
# the newest periods (pgbeat_schedule_history_period) and the newest manual runs
# (pgbeat_schedule_history_manual), each read to the limit and merged; then the jobs'
# primary key. Two partial indexes, so a claimed period writes one index entry, not two.
# Periods are unique by fire time; manual runs of one transaction share one, hence id.
HISTORY_OF_SCHEDULE: LiteralString = """
SELECT h.id, h.schedule, h.fire_at, h.outcome, h.reason, h.job_id, j.status AS job_status,
       h.inserted_at, h.inserted_by, h.inserted_at - h.fire_at AS lag, h.due_by,
       h.deadline_state, h.late_at, h.late_status
FROM (
    (SELECT * FROM pgbeat_schedule_history
     WHERE schedule = %(name)s AND outcome <> 'manual'
       AND (%(before)s::timestamptz IS NULL OR fire_at < %(before)s::timestamptz)
     ORDER BY fire_at DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM pgbeat_schedule_history
     WHERE schedule = %(name)s AND outcome = 'manual'
       AND (%(before)s::timestamptz IS NULL OR fire_at < %(before)s::timestamptz)
     ORDER BY fire_at DESC, id DESC LIMIT %(limit)s)
) AS h
LEFT JOIN jobs AS j ON j.id = h.job_id
ORDER BY h.fire_at DESC, h.id DESC
LIMIT %(limit)s"""

# Deletes one batch of history older than the retention (pgbeat_schedule_history_age).
HISTORY_PURGE_BATCH: LiteralString = """
DELETE FROM pgbeat_schedule_history WHERE id IN (
    SELECT id FROM pgbeat_schedule_history
    WHERE inserted_at < now() - %(older_than)s::interval
    LIMIT %(batch)s
)"""

# Records the periods of a pause that no replica recorded as skipped (paused), so that no
# replica catches them up later (pgbeat_schedule_history_period).
HISTORY_RECORD_PAUSED: LiteralString = """
INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, inserted_by)
SELECT %(name)s, fire_at, 'skipped', 'paused', %(by)s
FROM unnest(%(fire_ats)s::timestamptz[]) AS fire_at
ON CONFLICT (schedule, fire_at) WHERE outcome <> 'manual' DO NOTHING"""

# Which of these periods (schedule, fire time) the history has decided, whatever the outcome
# (pgbeat_schedule_history_period), for `pgbeat status`'s missing-period check.
HISTORY_DECIDED: LiteralString = """
SELECT h.schedule, h.fire_at FROM pgbeat_schedule_history AS h
JOIN unnest(%(schedules)s::text[], %(fire_ats)s::timestamptz[]) AS p(schedule, fire_at)
  ON h.schedule = p.schedule AND h.fire_at = p.fire_at AND h.outcome <> 'manual'"""

# The last %(limit)s history rows of each schedule on a page, manual runs included, with
# their jobs' status: per schedule, the newest periods (pgbeat_schedule_history_period) and
# manual runs (pgbeat_schedule_history_manual) merged, newest first; jobs primary key.
HISTORY_RECENT_OF_SCHEDULES: LiteralString = """
SELECT h.schedule, h.fire_at, h.outcome, h.reason, h.job_id, h.inserted_at, h.inserted_by,
       j.status AS job_status, h.due_by, h.deadline_state, h.late_at, h.late_status
FROM unnest(%(names)s::text[]) AS s(name)
CROSS JOIN LATERAL (
    SELECT * FROM (
        (SELECT schedule, fire_at, outcome, reason, job_id, inserted_at, inserted_by, due_by,
                deadline_state, late_at, late_status
         FROM pgbeat_schedule_history
         WHERE schedule = s.name AND outcome <> 'manual'
           AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s::text)
           AND (%(before)s::timestamptz IS NULL OR fire_at < %(before)s::timestamptz)
         ORDER BY fire_at DESC
         LIMIT %(limit)s)
        UNION ALL
        (SELECT schedule, fire_at, outcome, reason, job_id, inserted_at, inserted_by, due_by,
                deadline_state, late_at, late_status
         FROM pgbeat_schedule_history
         WHERE schedule = s.name AND outcome = 'manual'
           AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s::text)
           AND (%(before)s::timestamptz IS NULL OR fire_at < %(before)s::timestamptz)
         ORDER BY fire_at DESC
         LIMIT %(limit)s)
    ) AS both_kinds
    ORDER BY fire_at DESC
    LIMIT %(limit)s
) AS h
LEFT JOIN jobs AS j ON j.id = h.job_id"""
