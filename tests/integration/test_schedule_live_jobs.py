"""A schedule's live job (what ``skip``, ``buffer_one`` and ``cancel_other`` look at) is one
its scheduler inserted: a period's or a manual run's, never an application's job whose key
only looks like the schedule's (``<name>@x``, which the enqueue role may insert)."""

from __future__ import annotations

from typing import Any, Literal

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.scheduler import Scheduler
from tests.integration.test_schedule_policies import key
from tests.integration.test_schedule_state import SECOND, whole_second_after


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_a_look_alike_key_does_not_silence_a_schedule(
    conn: psycopg.Connection[Any], overlap: Literal["skip", "buffer_one"], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "report", every="1s", catch_up="none", overlap=overlap)
    pgbeat.enqueue(conn, "report", {}, unique_key="report@x")  # an application's job
    t0 = whole_second_after(conn)
    assert scheduler.tick(conn, t0).inserted == [key("report", t0)]


def test_cancel_other_leaves_an_application_job_with_a_look_alike_key_alone(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "latest", every="1s", catch_up="none", overlap="cancel_other")
    app_job = pgbeat.enqueue(conn, "latest", {}, unique_key="latest@mine")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    scheduler.tick(conn, t0 + SECOND)
    rows = dict(conn.execute("SELECT unique_key, status FROM jobs").fetchall())
    assert rows == {
        "latest@mine": "pending",
        key("latest", t0): "cancelled",
        key("latest", t0 + SECOND): "pending",
    }, app_job
