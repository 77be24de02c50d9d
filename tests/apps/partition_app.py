"""Handlers for the network partition scenarios (`pgbeat worker tests.apps.partition_app:registry`).

Workers run on hosts named by ``PGBEAT_TEST_HOST``. ``work`` sleeps ``payload["seconds"]``,
then records its run in ``runs`` (job, attempt, host); on the host named in
``payload["fail_on"]`` it raises instead, so a late outcome from that host is a failure
that must not overwrite the success of the attempt that ran elsewhere since.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pgbeat

registry = pgbeat.Registry()

SETUP = """
CREATE TABLE IF NOT EXISTS runs (job_id bigint NOT NULL, attempt int NOT NULL,
                                 host text NOT NULL,
                                 at timestamptz NOT NULL DEFAULT clock_timestamp());
"""

HOST = os.environ.get("PGBEAT_TEST_HOST", "local")


@registry.handler("work")
def work(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    time.sleep(float(payload.get("seconds", 0)))
    if payload.get("fail_on") == HOST:
        raise RuntimeError(f"late failure from {HOST}, attempt {job.attempt}")
    with job.connection() as conn:
        conn.execute(
            "INSERT INTO runs (job_id, attempt, host) VALUES (%s, %s, %s)",
            (job.id, job.attempt, HOST),
        )


def tick(payload: dict[str, Any]) -> None:
    """What the scenarios' schedules enqueue: nothing to do."""


for _kind in ("tick", "all_tick", "latest_tick"):
    registry.register(_kind, tick)
