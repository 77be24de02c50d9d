"""The statements of ``pgbeat_processes``: the heartbeats of workers and schedulers."""

from __future__ import annotations

from typing import LiteralString

# Registers or refreshes this process (primary key); a scheduler's file changes on reload.
PROCESSES_UPSERT: LiteralString = """
INSERT INTO pgbeat_processes (id, role, host, pid, version, schedules_hash, details)
VALUES (%(id)s, %(role)s, %(host)s, %(pid)s, %(version)s, %(schedules_hash)s, %(details)s)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), details = excluded.details,
    schedules_hash = excluded.schedules_hash"""

# Removes this process on a clean exit (primary key).
PROCESSES_DELETE: LiteralString = "DELETE FROM pgbeat_processes WHERE id = %(id)s"

# Forgets processes whose heartbeat stopped: they died without saying goodbye.
PROCESSES_PRUNE: LiteralString = """
DELETE FROM pgbeat_processes WHERE heartbeat_at < now() - %(stale_after)s::interval"""

# The live processes, with their heartbeat's age by the database clock.
PROCESSES_LIST: LiteralString = """
SELECT id, role, host, pid, version, started_at,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_s,
       schedules_hash, details
FROM pgbeat_processes
WHERE heartbeat_at >= now() - %(stale_after)s::interval
ORDER BY role, host, pid"""

# How many workers have beaten within max_age.
PROCESSES_FRESH_WORKERS: LiteralString = """
SELECT count(*) FROM pgbeat_processes
WHERE role = 'worker' AND heartbeat_at >= now() - %(max_age)s::interval"""

# Every registered process with its heartbeat's age by the database clock (a small table).
PROCESSES_ALL: LiteralString = """
SELECT id, role, host, pid, version, started_at, heartbeat_at,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_s,
       schedules_hash, details
FROM pgbeat_processes
ORDER BY role, host, pid
LIMIT 500"""
