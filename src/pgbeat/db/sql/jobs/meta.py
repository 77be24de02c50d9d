"""The statements on ``jobs.meta``, what travels with a job besides its payload (its
trace context)."""

from __future__ import annotations

from typing import LiteralString

# The trace context in the meta of claimed jobs, read only when tracing is configured
# (primary key): the two keys as text, so no meta (nested deep, of any shape or type,
# written by any role that may insert jobs) is decoded by the worker.
JOBS_META: LiteralString = """
SELECT id, meta ->> 'traceparent', meta ->> 'tracestate'
FROM jobs WHERE id = ANY(%(ids)s::bigint[])"""
