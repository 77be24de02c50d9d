"""Handlers for the chaos suite (`pgbeat worker tests.apps.chaos_app:registry`).

`effect` records every execution in `executions` and its effect once per job in `effects`
(job_id primary key), so lost jobs and re-runs are counted apart. It also handles the kinds
that the chaos schedules enqueue. The `poison_*` handlers never succeed: one kills its
process, two hang past any timeout (sync and async), one raises a 10 MB message.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import pgbeat

registry = pgbeat.Registry()

SETUP = """
CREATE TABLE IF NOT EXISTS effects (job_id bigint PRIMARY KEY, pid int NOT NULL,
                                    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS executions (job_id bigint NOT NULL, pid int NOT NULL,
                                       at timestamptz NOT NULL DEFAULT clock_timestamp());
"""

# Kinds enqueued by the chaos scenarios' schedules; `effect` runs them all.
SCHEDULED_KINDS = ("tick", "tick7", "kathmandu", "new_york", "all_tick", "none_tick")
HUGE_ERROR_CHARS = 10 * 1024 * 1024


def effect(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    """Record this execution, sleep ``payload["sleep"]`` seconds, record the effect once."""
    with job.connection() as conn:
        conn.execute("INSERT INTO executions (job_id, pid) VALUES (%s, %s)", (job.id, os.getpid()))
    time.sleep(float(payload.get("sleep", 0)) if isinstance(payload, dict) else 0.0)
    with job.connection() as conn:
        conn.execute(
            "INSERT INTO effects (job_id, pid) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (job.id, os.getpid()),
        )


for _kind in ("effect", *SCHEDULED_KINDS):
    registry.register(_kind, effect)


@registry.handler("poison_exit")
def poison_exit(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    """Record this execution, then kill the whole worker process, on every attempt."""
    if payload.get("record", True):
        with job.connection() as conn:
            conn.execute(
                "INSERT INTO executions (job_id, pid) VALUES (%s, %s)", (job.id, os.getpid())
            )
    os._exit(17)


@registry.handler("poison_hang")
def poison_hang(payload: dict[str, Any]) -> None:
    """Hang far past any sensible timeout, ignoring ``job.cancelled``."""
    threading.Event().wait(float(payload.get("seconds", 60)))


@registry.handler("poison_hang_async")
async def poison_hang_async(payload: dict[str, Any]) -> None:
    """Hang far past any sensible timeout, in the async flavour (cancellable at its await)."""
    await asyncio.sleep(float(payload.get("seconds", 60)))


@registry.handler("poison_huge_error")
def poison_huge_error(payload: dict[str, Any]) -> None:
    """Raise an exception whose message is 10 MB long."""
    raise RuntimeError("x" * int(payload.get("chars", HUGE_ERROR_CHARS)))
