"""The statements of ``pgbeat_job_attempts``, the attempts history (migration 0006).

Workers write the attempts that did not succeed, one statement per outcome batch; the
dashboard reads a job's attempts.
"""

from __future__ import annotations

from typing import LiteralString

# Records the runs of one outcome batch that ended in a retry, a failure or a release,
# from parallel arrays: ids[i] ran as attempts[i] (no index used; appends only).
ATTEMPTS_INSERT: LiteralString = """
INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, duration_s, worker, error)
SELECT job_id, attempt, outcome, duration_s, %(worker)s, error
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(outcomes)s::text[],
            %(durations)s::float8[], %(errors)s::text[])
     AS a(job_id, attempt, outcome, duration_s, error)"""

# The recorded attempts of one job, oldest first (pgbeat_job_attempts_job).
ATTEMPTS_OF_JOB: LiteralString = """
SELECT attempt, outcome, finished_at, duration_s, worker, error
FROM pgbeat_job_attempts WHERE job_id = %(id)s
ORDER BY finished_at, attempt LIMIT 200"""
