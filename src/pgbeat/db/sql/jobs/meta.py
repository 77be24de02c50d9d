"""The statements on ``jobs.meta``, what travels with a job besides its payload (its
trace context)."""

from __future__ import annotations

from typing import LiteralString

# The meta of claimed jobs, read only when tracing is configured (primary key).
JOBS_META: LiteralString = "SELECT id, meta FROM jobs WHERE id = ANY(%(ids)s::bigint[])"
