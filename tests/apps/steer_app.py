"""Handlers for tests of steered jobs (`pgbeat worker tests.apps.steer_app:registry`).

Every run records its start in `executions` and how it ended in `ends` (``done``, or
``stopped`` when told to stop by a cancel), so tests count re-runs and see that cancels
reach handlers, in processes of their own.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any, LiteralString

import pgbeat

registry = pgbeat.Registry()

SETUP = """
CREATE TABLE IF NOT EXISTS executions (job_id bigint NOT NULL, attempt int NOT NULL,
                                       pid int NOT NULL,
                                       at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS ends (job_id bigint NOT NULL, how text NOT NULL,
                                 at timestamptz NOT NULL DEFAULT clock_timestamp());
"""


def _record(job: pgbeat.JobContext, sql: LiteralString, *args: object) -> None:
    with job.connection() as conn:
        conn.execute(sql, args)


def _started(job: pgbeat.JobContext) -> None:
    _record(
        job,
        "INSERT INTO executions (job_id, attempt, pid) VALUES (%s, %s, %s)",
        job.id,
        job.attempt,
        os.getpid(),
    )


def _ended(job: pgbeat.JobContext, how: str) -> None:
    _record(job, "INSERT INTO ends (job_id, how) VALUES (%s, %s)", job.id, how)


@registry.handler("sleepy")
def sleepy(payload: dict[str, Any], job: pgbeat.JobContext) -> dict[str, Any]:
    """Sleep ``seconds`` unless cancelled (a sync handler checks ``job.cancelled``)."""
    _started(job)
    if job.cancelled.wait(float(payload.get("seconds", 0))):
        _ended(job, "stopped")
        return {"stopped": True}
    if random.random() < float(payload.get("fail", 0)):
        raise RuntimeError("a planned failure")
    _ended(job, "done")
    return {"slept": payload.get("seconds", 0), "pid": os.getpid()}


@registry.handler("async_sleepy")
async def async_sleepy(payload: dict[str, Any], job: pgbeat.JobContext) -> dict[str, Any]:
    """Sleep ``seconds`` on the event loop; a cancel arrives as CancelledError.

    The start is recorded inside the try: a test cancels as soon as it sees that row, which
    can be before this coroutine resumed from the thread that wrote it (the cancel then
    arrived at that await, and the end went unrecorded: CI saw it)."""
    try:
        await asyncio.to_thread(_started, job)
        await asyncio.sleep(float(payload.get("seconds", 0)))
    except asyncio.CancelledError:
        await asyncio.shield(asyncio.to_thread(_ended, job, "stopped"))
        raise
    await asyncio.to_thread(_ended, job, "done")
    return {"slept": payload.get("seconds", 0)}


@registry.handler("result")
def result(payload: dict[str, Any], job: pgbeat.JobContext) -> Any:
    """Return ``payload["value"]``, or ``size`` bytes of text."""
    if "size" in payload:
        return {"blob": "x" * int(payload["size"])}
    return payload.get("value")


@registry.handler("snoozer")
def snoozer(payload: dict[str, Any], job: pgbeat.JobContext) -> dict[str, int]:
    """Snooze until it has run ``times`` times, then finish."""
    _started(job)
    with job.connection() as conn:
        row = conn.execute("SELECT count(*) FROM executions WHERE job_id = %s", (job.id,))
        runs = int(row.fetchone()[0])  # type: ignore[index]
    if runs < int(payload["times"]):
        raise pgbeat.Snooze(float(payload.get("after", 0)))
    return {"runs": runs}
