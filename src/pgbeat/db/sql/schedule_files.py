"""The statements of ``pgbeat_schedule_files``: the versions of the schedules file that
replicas synced, which one is in effect, and which one each live scheduler holds."""

from __future__ import annotations

from typing import LiteralString

# Serialises file syncs across replicas (transaction-level, so it works behind a pooler).
FILES_LOCK: LiteralString = "SELECT pg_advisory_xact_lock(pgbeat_lock_key(%(key)s))"

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

# The schedules file in effect (applied last) and what is known of each file the registered
# schedulers hold (primary key probes; a handful of rows).
SCHEDULE_FILES_OF_PROCESSES: LiteralString = """
SELECT f.hash, f.first_seen_at, f.first_seen_by, f.applied_at, f.applied_by,
       cardinality(f.schedules) AS schedule_count,
       f.hash = (SELECT hash FROM pgbeat_schedule_files WHERE applied_at IS NOT NULL
                 ORDER BY applied_at DESC, hash DESC LIMIT 1) AS in_effect
FROM pgbeat_schedule_files AS f
WHERE f.hash IN (SELECT schedules_hash FROM pgbeat_processes WHERE schedules_hash IS NOT NULL)
   OR f.hash = (SELECT hash FROM pgbeat_schedule_files WHERE applied_at IS NOT NULL
                ORDER BY applied_at DESC, hash DESC LIMIT 1)"""
