"""The statements of ``pgbeat_retention``: the turn that lets one worker at a time delete
old finished jobs, and the record of its rounds. The batch delete itself, which
`pgbeat jobs purge` shares, is in sql/jobs/retention.py.
"""

from __future__ import annotations

from typing import LiteralString

# Whether this role may do retention's work (a least-privilege worker role may not).
RETENTION_ALLOWED: LiteralString = """
SELECT has_table_privilege('jobs', 'DELETE')
       AND has_table_privilege('pgbeat_retention', 'UPDATE')"""

# Takes or renews the turn (pgbeat_retention's one row) for %(hold)s when it is free, ours,
# or its holder's hold ran out; returns a row when this process holds it.
RETENTION_TAKE_TURN: LiteralString = """
UPDATE pgbeat_retention SET holder = %(me)s, held_until = now() + %(hold)s::interval
WHERE holder IS NULL OR holder = %(me)s OR held_until < now()
RETURNING holder"""

# Gives the turn up at a clean exit, so another worker takes it at its next round.
RETENTION_RELEASE_TURN: LiteralString = """
UPDATE pgbeat_retention SET held_until = now() WHERE holder = %(me)s"""

# Records a round of the turn's holder: when, by whom, how many rows it deleted.
RETENTION_RECORD_ROUND: LiteralString = """
UPDATE pgbeat_retention
SET last_run_at = now(), last_run_by = %(me)s, last_deleted = %(deleted)s,
    total_deleted = total_deleted + %(deleted)s
WHERE holder = %(me)s"""

# The last round, who holds the turn, and the oldest finished job's finish time and age
# (jobs_finished: its first entry).
RETENTION_STATUS: LiteralString = """
SELECT r.holder, r.held_until > now() AS held, r.last_run_at, r.last_run_by, r.last_deleted,
       r.total_deleted, oldest.finished_at AS oldest_finished_at,
       extract(epoch FROM now() - oldest.finished_at)::float8 AS oldest_finished_age_s
FROM pgbeat_retention AS r
LEFT JOIN (SELECT min(finished_at) AS finished_at FROM jobs WHERE finished_at IS NOT NULL)
    AS oldest ON true"""
