"""The statements of ``pgbeat_schedules``, the schedule definitions (migrations 0005 and
0010). The history's statements, the period claim among them, are in history.py; the
versions of the schedules file in schedule_files.py.
"""

from __future__ import annotations

from typing import LiteralString

# What a replica's copy of the table reads of a row (scheduling/catalog.py), and, in a row
# of its own after them, the snapshot the rows were read in: its xmax and the transactions
# in progress (xip), whose changes were not visible yet (SCHEDULES_CHANGED). The payload
# comes as text only, with its JSON type: a replica passes it to the jobs as the text it
# is (decoding payloads it never reads slowed a start-up), and columns it does not use
# stay out (with the snapshot on every row, they slowed the read; docs/benchmarks.md).
_CATALOG_SELECT: LiteralString = """
SELECT name, source, kind, cron, every, timezone, payload::text AS payload_text,
       jsonb_typeof(payload) AS payload_type, max_attempts, catch_up, catch_up_window,
       overlap, jitter, start_at, end_at, pause_after_failures, queue, priority, tags,
       deadline, on_late, definition_hash, paused_at, resumed_at, created_at, deleted_at,
       NULL AS snapshot_xmax, NULL::text[] AS snapshot_xip
FROM pgbeat_schedules"""
_SNAPSHOT_ROW: LiteralString = """
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       pg_snapshot_xmax(pg_current_snapshot())::text,
       ARRAY(SELECT pg_snapshot_xip(pg_current_snapshot()))::text[]"""

# Every live schedule, and the snapshot's row. A full scan, at a replica's start.
SCHEDULES_ALL: LiteralString = _CATALOG_SELECT + " WHERE deleted_at IS NULL" + _SNAPSHOT_ROW

# The rows changed since the previous look: written by a transaction that was in progress
# then (xip) or began after it (>= xmax). Exact, and independent of how long unrelated
# transactions run (pgbeat_schedules_changed). Tombstones included, and the new snapshot's
# row.
SCHEDULES_CHANGED: LiteralString = (
    _CATALOG_SELECT
    + """
WHERE changed_xid >= %(xmax)s::xid8 OR changed_xid = ANY(%(xip)s::xid8[])"""
    + _SNAPSHOT_ROW
)

# Subscribes to the notifications of pgbeat_schedules_notify (migrations/0005).
SCHEDULES_LISTEN: LiteralString = "SELECT pgbeat_listen('pgbeat_schedules')"

# One schedule, live or not (primary key).
SCHEDULES_ONE: LiteralString = """
SELECT name, source, kind, cron, every, timezone, payload, max_attempts, catch_up,
       catch_up_window, overlap, jitter, start_at, end_at, pause_after_failures, queue,
       priority, tags, deadline, on_late, definition_hash, file_hash, paused, paused_at,
       paused_by,
       paused_reason, resumed_at, created_at, updated_at, updated_by, deleted_at
FROM pgbeat_schedules WHERE name = %(name)s"""

# What both upserts of a schedule (from code, from a file) set on a row that exists: the new
# definition, who wrote it, and a tombstone brought back to life as a new schedule (created
# now, not paused); a live row keeps its pause state.
_REDEFINED: LiteralString = """
    kind = excluded.kind, cron = excluded.cron, every = excluded.every,
    timezone = excluded.timezone, payload = excluded.payload,
    max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
    catch_up_window = excluded.catch_up_window, overlap = excluded.overlap,
    jitter = excluded.jitter, start_at = excluded.start_at, end_at = excluded.end_at,
    pause_after_failures = excluded.pause_after_failures, queue = excluded.queue,
    priority = excluded.priority, tags = excluded.tags, deadline = excluded.deadline,
    on_late = excluded.on_late, definition_hash = excluded.definition_hash,
    updated_at = now(), updated_by = excluded.updated_by, deleted_at = NULL,
    created_at = CASE WHEN s.deleted_at IS NULL THEN s.created_at ELSE now() END,
    paused = s.paused AND s.deleted_at IS NULL,
    paused_at = CASE WHEN s.deleted_at IS NULL THEN s.paused_at END,
    paused_by = CASE WHEN s.deleted_at IS NULL THEN s.paused_by END,
    paused_reason = CASE WHEN s.deleted_at IS NULL THEN s.paused_reason END,
    resumed_at = CASE WHEN s.deleted_at IS NULL THEN s.resumed_at END"""

# Creates or changes a schedule from code, in the caller's transaction (primary key). A row of
# a file is left alone (the caller sees no row and raises); a tombstone comes back to life as
# a new schedule. Nothing is written when the definition is the same.
SCHEDULES_UPSERT_API: LiteralString = (
    """
INSERT INTO pgbeat_schedules AS s (name, source, kind, cron, every, timezone, payload,
    max_attempts, catch_up, catch_up_window, overlap, jitter, start_at, end_at,
    pause_after_failures, queue, priority, tags, deadline, on_late, definition_hash, updated_by)
VALUES (%(name)s, 'api', %(kind)s, %(cron)s, %(every)s, %(timezone)s, %(payload)s::jsonb,
    %(max_attempts)s, %(catch_up)s, %(catch_up_window)s, %(overlap)s, %(jitter)s,
    %(start_at)s, %(end_at)s, %(pause_after_failures)s, %(queue)s, %(priority)s,
    %(tags)s::text[], %(deadline)s, %(on_late)s, %(definition_hash)s, %(by)s)
ON CONFLICT (name) DO UPDATE SET
    source = 'api', file_hash = NULL,"""
    + _REDEFINED
    + """
WHERE (s.source = 'api' AND s.definition_hash <> excluded.definition_hash)
   OR s.deleted_at IS NOT NULL
RETURNING (xmax = 0) AS created"""
)

# Who owns a schedule, to explain an upsert or delete that changed nothing (primary key).
SCHEDULES_OWNER: LiteralString = """
SELECT source, deleted_at IS NOT NULL AS deleted FROM pgbeat_schedules WHERE name = %(name)s"""

# Deletes a schedule created from code: it becomes a tombstone (primary key).
SCHEDULES_DELETE_API: LiteralString = """
UPDATE pgbeat_schedules
SET deleted_at = now(), updated_at = now(), updated_by = %(by)s
WHERE name = %(name)s AND source = 'api' AND deleted_at IS NULL
RETURNING name"""

# Writes the schedules of the file being synced, in one statement (primary key), except
# the names code owns (%(skip)s). A row whose definition is the one given is not written;
# pause state is kept. Rows go in name order so that concurrent writers lock them alike.
# Returns the names written.
SCHEDULES_UPSERT_FILE: LiteralString = (
    """
INSERT INTO pgbeat_schedules AS s (name, source, kind, cron, every, timezone, payload,
    max_attempts, catch_up, catch_up_window, overlap, jitter, start_at, end_at,
    pause_after_failures, queue, priority, tags, deadline, on_late, definition_hash,
    file_hash, updated_by)
SELECT f.name, 'file', f.kind, f.cron, f.every, f.timezone, f.payload, f.max_attempts,
       f.catch_up, f.catch_up_window, f.overlap, f.jitter, f.start_at, f.end_at,
       f.pause_after_failures, f.queue, f.priority, f.tags::text[], f.deadline, f.on_late,
       f.definition_hash,
       %(file_hash)s, %(by)s
FROM unnest(%(names)s::text[], %(kinds)s::text[], %(crons)s::text[], %(everys)s::interval[],
            %(timezones)s::text[], %(payloads)s::jsonb[], %(max_attempts)s::int[],
            %(catch_ups)s::text[], %(catch_up_windows)s::interval[], %(overlaps)s::text[],
            %(jitters)s::interval[], %(start_ats)s::timestamptz[], %(end_ats)s::timestamptz[],
            %(pause_after_failures)s::int[], %(queues)s::text[], %(priorities)s::smallint[],
            %(deadlines)s::interval[], %(on_lates)s::text[], %(definition_hashes)s::text[],
            %(tags)s::text[])
     AS f(name, kind, cron, every, timezone, payload, max_attempts, catch_up,
          catch_up_window, overlap, jitter, start_at, end_at, pause_after_failures, queue,
          priority, deadline, on_late, definition_hash, tags)
WHERE NOT (f.name = ANY(%(skip)s::text[]))
ORDER BY f.name
ON CONFLICT (name) DO UPDATE SET
    source = 'file', file_hash = excluded.file_hash,"""
    + _REDEFINED
    + """
WHERE (s.source = 'file' AND s.definition_hash <> excluded.definition_hash)
   OR s.deleted_at IS NOT NULL
RETURNING s.name"""
)

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
    SET paused = true, paused_at = now(), paused_by = %(by)s, paused_reason = NULL,
        updated_at = now()
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
    SET paused = false, resumed_at = now(), paused_reason = NULL,
        updated_at = now(), updated_by = %(by)s
    FROM target WHERE s.name = target.name AND target.paused
    RETURNING s.*
)
SELECT (SELECT count(*) FROM target) AS found, (SELECT count(*) FROM changed) AS changed,
       changed.* FROM (SELECT 1) AS one LEFT JOIN changed ON true"""

# Pauses the schedules whose period a claim skipped for failures (primary key): once, by
# the replica whose claim decided that period; paused_reason says why.
SCHEDULES_PAUSE_AFTER_FAILURES: LiteralString = """
UPDATE pgbeat_schedules
SET paused = true, paused_at = now(), paused_by = %(by)s, updated_at = now(),
    paused_reason = CASE pause_after_failures WHEN 1 THEN 'its last period failed'
                    ELSE pause_after_failures || ' consecutive periods failed' END
WHERE name = ANY(%(names)s::text[]) AND deleted_at IS NULL AND NOT paused
RETURNING name, paused_reason"""

# Removes tombstones older than %(older_than)s: replicas have long seen them go.
SCHEDULES_PURGE_TOMBSTONES: LiteralString = """
DELETE FROM pgbeat_schedules WHERE deleted_at < now() - %(older_than)s::interval"""

# Every live schedule with its latest period (history: pgbeat_schedule_history_period) and
# that period's job (primary key), for `schedules list` and the dashboard.
SCHEDULES_LIST: LiteralString = """
SELECT s.name, s.source, s.kind, s.cron, s.every, s.timezone, s.payload, s.max_attempts,
       s.catch_up, s.catch_up_window, s.overlap, s.jitter, s.start_at, s.end_at,
       s.pause_after_failures, s.queue, s.priority, s.tags, s.deadline, s.on_late,
       s.definition_hash, s.file_hash,
       s.paused, s.paused_at, s.paused_by, s.paused_reason, s.resumed_at, s.created_at,
       s.updated_at, s.updated_by, s.deleted_at,
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

# Whether any schedule exists, so a drain without schedules skips the scheduler's tick.
# Whether a schedule of this name exists (primary key): a job whose unique key is
# name@... is its period or manual run (pgbeat/jobs/reads.py).
SCHEDULES_NAMED: LiteralString = """
SELECT FROM pgbeat_schedules WHERE name = %(name)s AND deleted_at IS NULL"""

SCHEDULES_ANY: LiteralString = "SELECT EXISTS (SELECT FROM pgbeat_schedules)"

# Whether migration 0005 (schedules in the database) is applied.
SCHEDULES_TABLE_EXISTS: LiteralString = "SELECT to_regclass('pgbeat_schedules') IS NOT NULL"
