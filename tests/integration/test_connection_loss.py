"""Backends killed under a running worker and scheduler: both reconnect and lose nothing."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.scheduler import Scheduler
from tests.apps.jobs_app import SETUP, registry
from tests.helpers import in_thread, statuses, wait_for

TERMINATE = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND application_name LIKE 'pgbeat-%%'
  AND pid <> pg_backend_pid()"""


@pytest.mark.slow
def test_worker_survives_terminated_backends(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(SETUP.encode())
    # About 5 s of work at 4 slots: room for every fault however fast the worker recovers
    # (300 jobs of 10 ms were done after two faults in one CI run, and proved too little).
    total = 400
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("effect", {"sleep": 0.05}) for _ in range(total)])
    # A claim whose reply is lost with the connection leaves its jobs running until their
    # lease expires: a short lease lets the reaper bring them back within the test.
    settings = pgbeat.WorkerSettings(concurrency=4, lease=timedelta(seconds=2))
    kills = 0
    with in_thread(pgbeat.Worker(database_url, registry, settings)):
        while (done := statuses(conn).get("done", 0)) < total and kills < 6:
            kills += conn.execute(TERMINATE).fetchone()[0] > 0  # type: ignore[index]

            # the next fault only once the worker is back at work: each one hits a live loop
            def progressed(done: int = done) -> bool:
                return statuses(conn).get("done", 0) > done

            wait_for(progressed, timeout=30, message="progress after the connection loss")
        wait_for(lambda: statuses(conn) == {"done": total}, timeout=60, message="all done")
    assert kills >= 3, "the backends were never terminated: the test proved nothing"
    assert conn.execute("SELECT count(*) FROM effects").fetchone() == (total,)


@pytest.mark.slow
def test_scheduler_survives_terminated_backends(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    schedules = parse_schedules('[schedules.s]\nevery = "1s"\ncatch_up = "all"\n')
    with in_thread(Scheduler(database_url, schedules)):
        started = datetime.now(UTC)
        wait_for(lambda: statuses(conn).get("pending", 0) >= 2, timeout=20, message="first ticks")
        for _ in range(3):
            conn.execute(TERMINATE)
            # the next fault only once the scheduler has reconnected and ticked again
            ticked = statuses(conn)["pending"]

            def ticked_again(ticked: int = ticked) -> bool:
                return statuses(conn)["pending"] > ticked

            wait_for(ticked_again, timeout=20, message="a tick after the connection loss")
        before = statuses(conn)["pending"]
        wait_for(
            lambda: statuses(conn)["pending"] >= before + 3,
            timeout=20,
            message="ticks after the kills",
        )
    runs = [
        r[0]
        for r in conn.execute(
            "SELECT run_at FROM jobs WHERE run_at >= %s ORDER BY 1",
            (started.replace(microsecond=0),),
        )
    ]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(runs)]
    assert gaps and all(gap == 1.0 for gap in gaps), gaps  # catch_up = "all" filled every second
