"""Handlers for tests that run real worker processes (`pgbeat worker tests.apps.jobs_app:registry`).

Effects are recorded idempotently in an `effects` table (one row per job) and every
execution in `executions`, so a test can count lost jobs and re-runs separately.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pgbeat

registry = pgbeat.Registry()

SETUP = """
CREATE TABLE IF NOT EXISTS effects (job_id bigint PRIMARY KEY, pid int NOT NULL);
CREATE TABLE IF NOT EXISTS executions (job_id bigint NOT NULL, pid int NOT NULL,
                                       at timestamptz NOT NULL DEFAULT clock_timestamp());
"""


@registry.handler("effect")
def effect(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    """Record this execution, sleep, then record the effect once per job."""
    with job.connection() as conn:
        conn.execute("INSERT INTO executions (job_id, pid) VALUES (%s, %s)", (job.id, os.getpid()))
    time.sleep(float(payload.get("sleep", 0)))
    with job.connection() as conn:
        conn.execute(
            "INSERT INTO effects (job_id, pid) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (job.id, os.getpid()),
        )


@registry.handler("noop")
def noop(payload: dict[str, Any]) -> None:
    return None


@registry.handler("crash")
def crash(payload: dict[str, Any]) -> None:
    os._exit(3)
