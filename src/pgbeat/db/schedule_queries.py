"""The SQL of schedules as data: ``pgbeat_schedules``, its history, and the file versions.

Named TABLE_VERB with ``%(name)s`` parameters, one comment each, like db/queries.py. The
tables come from migrations/0005_schedules.sql. Statements that decide on time use the
database clock (``now()``); the scheduler's period claim takes its fire times as values.
"""

from __future__ import annotations

from typing import LiteralString

# -- definitions ----------------------------------------------------------------------------

# Every live schedule, with the snapshot the rows were read in: its xmax and the
# transactions in progress (xip), whose changes were not visible yet (SCHEDULES_CHANGED).
# A full scan, at a replica's start. Always at least one row: the snapshot's.
SCHEDULES_ALL: LiteralString = """
SELECT pg_snapshot_xmax(snapshot.taken)::text AS snapshot_xmax,
       ARRAY(SELECT pg_snapshot_xip(snapshot.taken))::text[] AS snapshot_xip,
       name, source, kind, cron, every, timezone, payload, max_attempts, catch_up,
       catch_up_window, overlap, jitter, definition_hash, file_hash, paused, paused_at,
       paused_by, resumed_at, created_at, updated_at, updated_by, deleted_at
FROM (SELECT pg_current_snapshot() AS taken) AS snapshot
LEFT JOIN pgbeat_schedules ON deleted_at IS NULL"""

# The rows changed since the previous look: written by a transaction that was in progress
# then (xip) or began after it (>= xmax). Exact, and independent of how long unrelated
# transactions run (pgbeat_schedules_changed). Tombstones included; always at least one
# row: the new snapshot's.
SCHEDULES_CHANGED: LiteralString = """
SELECT pg_snapshot_xmax(snapshot.taken)::text AS snapshot_xmax,
       ARRAY(SELECT pg_snapshot_xip(snapshot.taken))::text[] AS snapshot_xip,
       name, source, kind, cron, every, timezone, payload, max_attempts, catch_up,
       catch_up_window, overlap, jitter, definition_hash, file_hash, paused, paused_at,
       paused_by, resumed_at, created_at, updated_at, updated_by, deleted_at
FROM (SELECT pg_current_snapshot() AS taken) AS snapshot
LEFT JOIN pgbeat_schedules
  ON changed_xid >= %(xmax)s::xid8 OR changed_xid = ANY(%(xip)s::xid8[])"""

# Subscribes to the notifications of pgbeat_schedules_notify (migrations/0005).
SCHEDULES_LISTEN: LiteralString = "LISTEN pgbeat_schedules"

# One schedule, live or not (primary key).
SCHEDULES_ONE: LiteralString = """
SELECT name, source, kind, cron, every, timezone, payload, max_attempts, catch_up,
       catch_up_window, overlap, jitter, definition_hash, file_hash, paused, paused_at,
       paused_by, resumed_at, created_at, updated_at, updated_by, deleted_at
FROM pgbeat_schedules WHERE name = %(name)s"""

# Creates or changes a schedule from code, in the caller's transaction (primary key). A row of
# a file is left alone (the caller sees no row and raises); a tombstone comes back to life as
# a new schedule. Nothing is written when the definition is the same.
SCHEDULES_UPSERT_API: LiteralString = """
INSERT INTO pgbeat_schedules AS s (name, source, kind, cron, every, timezone, payload,
    max_attempts, catch_up, catch_up_window, overlap, jitter, definition_hash, updated_by)
VALUES (%(name)s, 'api', %(kind)s, %(cron)s, %(every)s, %(timezone)s, %(payload)s::jsonb,
    %(max_attempts)s, %(catch_up)s, %(catch_up_window)s, %(overlap)s, %(jitter)s,
    %(definition_hash)s, %(by)s)
ON CONFLICT (name) DO UPDATE SET
    source = 'api', kind = excluded.kind, cron = excluded.cron, every = excluded.every,
    timezone = excluded.timezone, payload = excluded.payload,
    max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
    catch_up_window = excluded.catch_up_window, overlap = excluded.overlap,
    jitter = excluded.jitter, definition_hash = excluded.definition_hash, file_hash = NULL,
    updated_at = now(), updated_by = excluded.updated_by, deleted_at = NULL,
    created_at = CASE WHEN s.deleted_at IS NULL THEN s.created_at ELSE now() END,
    paused = s.paused AND s.deleted_at IS NULL,
    paused_at = CASE WHEN s.deleted_at IS NULL THEN s.paused_at END,
    paused_by = CASE WHEN s.deleted_at IS NULL THEN s.paused_by END,
    resumed_at = CASE WHEN s.deleted_at IS NULL THEN s.resumed_at END
WHERE (s.source = 'api' AND s.definition_hash <> excluded.definition_hash)
   OR s.deleted_at IS NOT NULL
RETURNING (xmax = 0) AS created"""

# Who owns a schedule, to explain an upsert or delete that changed nothing (primary key).
SCHEDULES_OWNER: LiteralString = """
SELECT source, deleted_at IS NOT NULL AS deleted FROM pgbeat_schedules WHERE name = %(name)s"""

# Deletes a schedule created from code: it becomes a tombstone (primary key).
SCHEDULES_DELETE_API: LiteralString = """
UPDATE pgbeat_schedules
SET deleted_at = now(), updated_at = now(), updated_by = %(by)s
WHERE name = %(name)s AND source = 'api' AND deleted_at IS NULL
RETURNING name"""

# Writes one schedule of the file being synced, unless code owns the name (primary key).
# Nothing is written when its definition is the one in the row; pause state is kept.
SCHEDULES_UPSERT_FILE: LiteralString = """
INSERT INTO pgbeat_schedules AS s (name, source, kind, cron, every, timezone, payload,
    max_attempts, catch_up, catch_up_window, overlap, jitter, definition_hash, file_hash,
    updated_by)
VALUES (%(name)s, 'file', %(kind)s, %(cron)s, %(every)s, %(timezone)s, %(payload)s::jsonb,
    %(max_attempts)s, %(catch_up)s, %(catch_up_window)s, %(overlap)s, %(jitter)s,
    %(definition_hash)s, %(file_hash)s, %(by)s)
ON CONFLICT (name) DO UPDATE SET
    source = 'file', kind = excluded.kind, cron = excluded.cron, every = excluded.every,
    timezone = excluded.timezone, payload = excluded.payload,
    max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
    catch_up_window = excluded.catch_up_window, overlap = excluded.overlap,
    jitter = excluded.jitter, definition_hash = excluded.definition_hash,
    file_hash = excluded.file_hash, updated_at = now(), updated_by = excluded.updated_by,
    deleted_at = NULL,
    created_at = CASE WHEN s.deleted_at IS NULL THEN s.created_at ELSE now() END,
    paused = s.paused AND s.deleted_at IS NULL,
    paused_at = CASE WHEN s.deleted_at IS NULL THEN s.paused_at END,
    paused_by = CASE WHEN s.deleted_at IS NULL THEN s.paused_by END,
    resumed_at = CASE WHEN s.deleted_at IS NULL THEN s.resumed_at END
WHERE (s.source = 'file' AND s.definition_hash <> excluded.definition_hash)
   OR s.deleted_at IS NOT NULL"""

# The names of a file that code owns already: the file sync leaves them alone (primary key).
SCHEDULES_OWNED_BY_API: LiteralString = """
SELECT name FROM pgbeat_schedules
WHERE name = ANY(%(names)s::text[]) AND source = 'api' AND deleted_at IS NULL
ORDER BY name"""

# Deletes the file schedules that the file being synced no longer declares (a full scan of
# a table that file schedules keep small next to the api ones it skips).
SCHEDULES_DELETE_FILE_OTHERS: LiteralString = """
UPDATE pgbeat_schedules
SET deleted_at = now(), updated_at = now(), updated_by = %(by)s
WHERE source = 'file' AND deleted_at IS NULL AND NOT (name = ANY(%(names)s::text[]))
RETURNING name"""

# Pauses a schedule: its periods are recorded as skipped (paused) until it is resumed.
# Returns whether it exists and whether it changed (primary key).
SCHEDULES_PAUSE: LiteralString = """
WITH target AS (
    SELECT name, paused FROM pgbeat_schedules
    WHERE name = %(name)s AND deleted_at IS NULL FOR NO KEY UPDATE
), changed AS (
    UPDATE pgbeat_schedules AS s
    SET paused = true, paused_at = now(), paused_by = %(by)s, updated_at = now()
    FROM target WHERE s.name = target.name AND NOT target.paused
    RETURNING s.name
)
SELECT (SELECT count(*) FROM target) AS found, (SELECT count(*) FROM changed) AS changed"""

# Resumes a schedule; paused_at and resumed_at keep the last pause, whose periods are never
# caught up. Returns whether it exists and whether it changed (primary key).
SCHEDULES_RESUME: LiteralString = """
WITH target AS (
    SELECT name, paused FROM pgbeat_schedules
    WHERE name = %(name)s AND deleted_at IS NULL FOR NO KEY UPDATE
), changed AS (
    UPDATE pgbeat_schedules AS s
    SET paused = false, resumed_at = now(),
        updated_at = now(), updated_by = %(by)s
    FROM target WHERE s.name = target.name AND target.paused
    RETURNING s.*
)
SELECT (SELECT count(*) FROM target) AS found, (SELECT count(*) FROM changed) AS changed,
       changed.* FROM (SELECT 1) AS one LEFT JOIN changed ON true"""

# Records the periods of a pause that no replica recorded as skipped (paused), so that no
# replica catches them up later (pgbeat_schedule_history_period).
HISTORY_RECORD_PAUSED: LiteralString = """
INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, inserted_by)
SELECT %(name)s, fire_at, 'skipped', 'paused', %(by)s
FROM unnest(%(fire_ats)s::timestamptz[]) AS fire_at
ON CONFLICT (schedule, fire_at) WHERE outcome <> 'manual' DO NOTHING"""

# Removes tombstones older than %(older_than)s: replicas have long seen them go.
SCHEDULES_PURGE_TOMBSTONES: LiteralString = """
DELETE FROM pgbeat_schedules WHERE deleted_at < now() - %(older_than)s::interval"""

# Every live schedule with its latest period (history: pgbeat_schedule_history_recent) and
# that period's job (primary key), for `schedules list` and the dashboard.
SCHEDULES_LIST: LiteralString = """
SELECT s.name, s.source, s.kind, s.cron, s.every, s.timezone, s.payload, s.max_attempts,
       s.catch_up, s.catch_up_window, s.overlap, s.jitter, s.definition_hash, s.file_hash,
       s.paused, s.paused_at, s.paused_by, s.resumed_at, s.created_at, s.updated_at,
       s.updated_by, s.deleted_at,
       last.fire_at AS last_fire_at, last.outcome AS last_outcome, last.reason AS last_reason,
       last.job_id AS last_job_id, last.inserted_at AS last_inserted_at,
       last.inserted_by AS last_inserted_by, j.status AS last_job_status
FROM pgbeat_schedules AS s
LEFT JOIN LATERAL (
    SELECT fire_at, outcome, reason, job_id, inserted_at, inserted_by
    FROM pgbeat_schedule_history AS h
    WHERE h.schedule = s.name AND h.outcome <> 'manual'
    ORDER BY h.fire_at DESC LIMIT 1
) AS last ON true
LEFT JOIN jobs AS j ON j.id = last.job_id
WHERE s.deleted_at IS NULL AND (%(name)s::text IS NULL OR s.name = %(name)s::text)
ORDER BY s.name"""

# -- history --------------------------------------------------------------------------------

# Claims the periods of one tick in pgbeat_schedule_history and inserts the jobs of those it
# enqueues, in one statement. Each period (schedule, fire time, run time after jitter, key,
# kind, the definition hash it was computed from, whether the catch-up policy dropped it,
# whether an earlier due period of its schedule is in this tick, its template) joins its
# schedule's row (primary key): a period of a definition that changed or went since the
# replica computed it is dropped (compared after the join, behind MATERIALIZED: as a join
# condition, two equalities on unique values made the planner expect one row and join
# 10,000 periods in a nested loop, for minutes). So is a period of a schedule from code at
# or before the row's created_at: a replica whose copy still holds a deleted schedule that
# was created again (same definition, same hash) must not catch up the deleted span. A
# period inside the row's last pause (paused_at, resumed_at] is skipped (paused) like one
# of a current pause: a replica that never saw the pause cannot catch it up. Both are
# decided here, not from the replica's copy, so no replica races past a pause or deletion.
# Periods already decided are dropped first,
# one probe each (pgbeat_schedule_history_period): a replica that comes second does little.
# Its outcome is decided here:
# skipped (paused), missed (catch-up), skipped (overlap: the schedule has a pending or
# running job, jobs_live_schedule, or an earlier period of this tick), else enqueued. The
# history row is the period's claim (pgbeat_schedule_history_period): the first replica
# to write it decides, and only the rows this statement wrote get a job, whose id comes
# from the jobs sequence up front so the row can name it (and the job find its period by
# that id). A missed period that another replica then finds on time becomes enqueued.
# Rows go in (schedule, fire time) order so replicas lock them alike. NOT EXISTS, OFFSET 0
# and ON CONFLICT on jobs as in JOBS_INSERT_PERIODS (a job of the period may exist without
# history: one an older pgbeat inserted).
HISTORY_CLAIM_PERIODS: LiteralString = """
WITH period AS MATERIALIZED (
    SELECT p.*, s.overlap, s.catch_up, s.definition_hash = p.definition_hash AS current,
           s.paused OR coalesce(s.resumed_at > s.paused_at
                                AND to_timestamp(p.fire_epoch) > s.paused_at
                                AND to_timestamp(p.fire_epoch) <= s.resumed_at, false)
               AS paused,
           s.source = 'api' AND to_timestamp(p.fire_epoch) <= s.created_at AS before_creation
    FROM unnest(%(schedules)s::text[], %(fire_epochs)s::float8[], %(run_epochs)s::float8[],
                %(unique_keys)s::text[], %(kinds)s::text[], %(hashes)s::text[],
                %(missed)s::bool[], %(later)s::bool[], %(templates)s::int[])
         AS p(schedule, fire_epoch, run_epoch, unique_key, kind, definition_hash, missed,
              later, template)
    JOIN pgbeat_schedules AS s ON s.name = p.schedule AND s.deleted_at IS NULL
    WHERE NOT EXISTS (
        SELECT FROM pgbeat_schedule_history AS done
        WHERE done.schedule = p.schedule AND done.fire_at = to_timestamp(p.fire_epoch)
          AND done.outcome <> 'manual' AND (done.outcome <> 'missed' OR p.missed)
    )
), reasoned AS (
    SELECT period.*, CASE
        WHEN paused THEN 'paused'
        WHEN missed THEN 'catch_up=' || catch_up
        WHEN overlap = 'skip' AND (later OR EXISTS (
            SELECT FROM jobs AS j
            WHERE split_part(j.unique_key, '@', 1) = period.schedule AND j.kind = period.kind
              AND j.unique_key IS NOT NULL AND j.status IN ('pending', 'running')))
        THEN 'overlap'
    END AS reason
    FROM period WHERE current AND NOT before_creation
), decided AS (
    SELECT reasoned.*,
           CASE WHEN reason IS NULL
                THEN nextval((SELECT pg_get_serial_sequence('jobs', 'id'))::regclass) END
               AS job_id
    FROM reasoned
), claimed AS (
    INSERT INTO pgbeat_schedule_history AS h (schedule, fire_at, outcome, reason, job_id,
                                             inserted_by)
    SELECT schedule, to_timestamp(fire_epoch),
           CASE WHEN reason IS NULL THEN 'enqueued'
                WHEN missed AND NOT paused THEN 'missed' ELSE 'skipped' END,
           reason, job_id, %(by)s
    FROM decided
    ORDER BY schedule, fire_epoch
    ON CONFLICT (schedule, fire_at) WHERE outcome <> 'manual' DO UPDATE
        SET outcome = excluded.outcome, reason = NULL, job_id = excluded.job_id,
            inserted_at = excluded.inserted_at, inserted_by = excluded.inserted_by
        WHERE h.outcome = 'missed' AND excluded.outcome = 'enqueued'
    RETURNING h.schedule, h.fire_at, h.outcome, h.job_id
), inserted AS (
    INSERT INTO jobs AS j (id, kind, payload, run_at, unique_key, max_attempts, keep_until)
    OVERRIDING SYSTEM VALUE
    SELECT d.job_id, d.kind, t.payload, to_timestamp(d.run_epoch), d.unique_key,
           t.max_attempts, to_timestamp(d.run_epoch + t.keep_seconds)
    FROM claimed AS c
    JOIN decided AS d ON d.job_id = c.job_id  -- only enqueued periods have a job id
    JOIN unnest(%(template_numbers)s::int[], %(payloads)s::jsonb[], %(max_attempts)s::int[],
                %(keep_seconds)s::float8[])
         AS t(template, payload, max_attempts, keep_seconds) ON t.template = d.template
    WHERE NOT EXISTS (
          SELECT FROM jobs AS x WHERE x.kind = d.kind AND x.unique_key = d.unique_key OFFSET 0
      )
    ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING j.id
)
SELECT c.schedule, extract(epoch FROM c.fire_at)::float8 AS fire_epoch, c.outcome,
       c.job_id, i.id IS NOT NULL AS inserted
FROM claimed AS c LEFT JOIN inserted AS i ON i.id = c.job_id"""

# Serialises the claims of schedules with overlap = "skip" (transaction-level advisory locks,
# taken in name order so that replicas never deadlock): the claim that follows in the same
# transaction sees the jobs another replica's claim of an earlier period inserted.
HISTORY_LOCK_OVERLAP: LiteralString = """
SELECT count(pg_advisory_xact_lock(hashtextextended('pgbeat.overlap:' || name, 0)))
FROM (SELECT DISTINCT unnest(%(names)s::text[]) AS name ORDER BY 1) AS locked"""

# Makes the claims of replicas take turns (a transaction-level advisory lock; the key is
# "pgbeat.c" as a bigint), waiting 2 s at most: at a fire time every replica claims the same
# periods, and the first should run alone rather than share the CPU with the others'
# redundant work. Past the wait a replica claims alongside (history rows still decide).
HISTORY_WAIT_TURN: LiteralString = """
SET LOCAL lock_timeout = '2s';
SELECT pg_advisory_xact_lock(8099550642415349347);
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
    SELECT name, kind, payload, max_attempts FROM pgbeat_schedules
    WHERE name = %(name)s AND deleted_at IS NULL
), claimed AS (
    INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, job_id,
                                         inserted_by)
    SELECT name, now(), 'manual', %(reason)s,
           nextval((SELECT pg_get_serial_sequence('jobs', 'id'))::regclass), %(by)s
    FROM s
    RETURNING schedule, job_id
)
INSERT INTO jobs (id, kind, payload, run_at, unique_key, max_attempts)
OVERRIDING SYSTEM VALUE
SELECT c.job_id, s.kind, s.payload, now(), s.name || '@manual:' || c.job_id,
       coalesce(s.max_attempts, %(default_max_attempts)s)
FROM claimed AS c JOIN s ON s.name = c.schedule
RETURNING id"""

# A schedule's history, newest first, before a fire time if given, with each period's job
# (pgbeat_schedule_history_recent, then the jobs' primary key).
HISTORY_OF_SCHEDULE: LiteralString = """
SELECT h.id, h.schedule, h.fire_at, h.outcome, h.reason, h.job_id, j.status AS job_status,
       h.inserted_at, h.inserted_by, h.inserted_at - h.fire_at AS lag
FROM pgbeat_schedule_history AS h
LEFT JOIN jobs AS j ON j.id = h.job_id
WHERE h.schedule = %(name)s
  AND (%(before)s::timestamptz IS NULL OR h.fire_at < %(before)s::timestamptz)
ORDER BY h.fire_at DESC, h.id DESC
LIMIT %(limit)s"""

# Deletes one batch of history older than the retention (pgbeat_schedule_history_age).
HISTORY_PURGE_BATCH: LiteralString = """
DELETE FROM pgbeat_schedule_history WHERE id IN (
    SELECT id FROM pgbeat_schedule_history
    WHERE inserted_at < now() - %(older_than)s::interval
    LIMIT %(batch)s
)"""

# -- schedules files ------------------------------------------------------------------------

# Serialises file syncs across replicas (transaction-level, so it works behind a pooler).
FILES_LOCK: LiteralString = "SELECT pg_advisory_xact_lock(%(key)s)"

# Records a file version the first time any replica syncs it (primary key).
FILES_SEEN: LiteralString = """
INSERT INTO pgbeat_schedule_files (hash, first_seen_by, schedules)
VALUES (%(hash)s, %(by)s, %(names)s::text[])
ON CONFLICT (hash) DO NOTHING"""

# The newest file (first seen last) among this replica's and those of the other live
# scheduler replicas (a scan of pgbeat_processes, a handful of rows), and the file whose
# schedules are in the table now (the one applied last).
FILES_NEWEST_LIVE: LiteralString = """
SELECT (
    SELECT f.hash FROM pgbeat_schedule_files AS f
    WHERE f.hash = %(hash)s OR f.hash IN (
        SELECT schedules_hash FROM pgbeat_processes
        WHERE role = 'scheduler' AND id <> %(by)s AND schedules_hash IS NOT NULL
          AND heartbeat_at >= now() - %(stale_after)s::interval)
    ORDER BY f.first_seen_at DESC, f.hash DESC LIMIT 1
) AS newest, (
    SELECT hash FROM pgbeat_schedule_files WHERE applied_at IS NOT NULL
    ORDER BY applied_at DESC, hash DESC LIMIT 1
) AS in_effect"""

# Marks a file version as the one whose schedules are in the table (primary key).
FILES_APPLIED: LiteralString = """
UPDATE pgbeat_schedule_files SET applied_at = now(), applied_by = %(by)s WHERE hash = %(hash)s"""

# The file in effect and every live scheduler replica's file, for `pgbeat status`.
FILES_AGREEMENT: LiteralString = """
SELECT p.id, p.host, p.pid, p.schedules_hash, f.first_seen_at,
       p.schedules_hash IS NOT DISTINCT FROM effect.hash AS in_effect,
       effect.hash AS effect_hash, effect.applied_at AS effect_applied_at,
       effect.applied_by AS effect_applied_by
FROM pgbeat_processes AS p
LEFT JOIN pgbeat_schedule_files AS f ON f.hash = p.schedules_hash
LEFT JOIN LATERAL (
    SELECT hash, applied_at, applied_by FROM pgbeat_schedule_files
    WHERE applied_at IS NOT NULL ORDER BY applied_at DESC, hash DESC LIMIT 1
) AS effect ON true
WHERE p.role = 'scheduler' AND p.heartbeat_at >= now() - %(stale_after)s::interval
  AND p.schedules_hash IS NOT NULL
ORDER BY p.host, p.pid"""

# Which of these periods (schedule, fire time) the history has decided, whatever the outcome
# (pgbeat_schedule_history_period), for `pgbeat status`'s missing-period check.
HISTORY_DECIDED: LiteralString = """
SELECT h.schedule, h.fire_at FROM pgbeat_schedule_history AS h
JOIN unnest(%(schedules)s::text[], %(fire_ats)s::timestamptz[]) AS p(schedule, fire_at)
  ON h.schedule = p.schedule AND h.fire_at = p.fire_at AND h.outcome <> 'manual'"""
