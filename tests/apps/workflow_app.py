"""Handlers for workflow races with real worker processes
(`pgbeat worker tests.apps.workflow_app:registry`): every run of a step is recorded with
its start and, if its handler returned, its end, so an audit can check the order of steps
and count runs (tests/chaos/workflow_race.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pgbeat

registry = pgbeat.Registry()

SETUP = """
CREATE TABLE IF NOT EXISTS wf_runs (
    job_id bigint NOT NULL, pid int NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz);
CREATE INDEX IF NOT EXISTS wf_runs_job ON wf_runs (job_id);
"""


@registry.handler("wstep")
def wstep(payload: dict[str, Any], job: pgbeat.JobContext) -> int:
    """Record the start, sleep, fail if told to, record the end; return the job id."""
    with job.connection() as conn:
        row = conn.execute(
            "INSERT INTO wf_runs (job_id, pid) VALUES (%s, %s) RETURNING ctid::text",
            (job.id, os.getpid()),
        ).fetchone()
    time.sleep(float(payload.get("sleep", 0)))
    if payload.get("fail"):
        raise pgbeat.PermanentError("this step fails")
    assert row is not None
    with job.connection() as conn:
        conn.execute(
            "UPDATE wf_runs SET ended_at = clock_timestamp() WHERE job_id = %s AND ctid::text = %s",
            (job.id, row[0]),
        )
    return job.id
