"""The statement Django's task framework reads a result with (pgbeat.contrib.django.tasks):
a job's state, return value and times; its errors come from ATTEMPTS_OF_JOB (attempts.py).
"""

from __future__ import annotations

from typing import LiteralString

# One job as a task result (primary key). JSON as text: Django's connection loads jsonb as text.
JOBS_TASK_RESULT: LiteralString = """
SELECT id, kind, status, payload::text AS payload, result::text AS result, queue, priority,
       attempts, last_error, created_at, started_at, finished_at
FROM jobs WHERE id = %(id)s"""
