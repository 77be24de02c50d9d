"""Flow control with real `pgbeat worker` processes racing for one database: per-key and
whole-queue concurrency, rates, pauses and kill -9 (the small sizes of tests/chaos/flow_race.py)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import pgbeat
from tests.apps.flow_app import SETUP, spans
from tests.chaos.flow_race import KeyRace, key_race, queue_race, rate_race, workers
from tests.helpers import wait_for


@pytest.mark.slow
def test_key_concurrency_1_never_overlaps_a_key(database_url: str) -> None:
    result = key_race(database_url, KeyRace(processes=2, slots=10, jobs=200, keys=20))
    assert result["overlaps"] == 0, result
    assert result["most_running"] > 1, result  # the keys did run side by side


@pytest.mark.slow
def test_key_concurrency_holds_when_a_worker_is_killed(database_url: str) -> None:
    race = KeyRace(processes=2, slots=8, jobs=200, keys=20, sleep=0.02, kill=True)
    result = key_race(database_url, race)
    assert result["overlaps"] == 0, result
    assert result["killed"] == 1 and result["reaped"] > 0, result  # the kill stranded jobs


@pytest.mark.slow
def test_a_fair_queue_with_key_concurrency_1_never_overlaps_a_key_under_kill(
    database_url: str,
) -> None:
    race = KeyRace(processes=2, slots=8, jobs=200, keys=20, sleep=0.02, kill=True, fair=True)
    result = key_race(database_url, race)
    assert result["overlaps"] == 0, result
    assert result["killed"] == 1 and result["most_running"] > 1, result


@pytest.mark.slow
def test_queue_concurrency_across_processes(database_url: str) -> None:
    assert queue_race(database_url, concurrency=3, jobs=40, processes=2, slots=10) <= 3


@pytest.mark.slow
def test_a_fair_queue_in_steps_keeps_its_concurrency_across_processes(database_url: str) -> None:
    assert queue_race(database_url, concurrency=8, jobs=200, processes=2, slots=10, fair=True) <= 8


@pytest.mark.slow
def test_rate_across_processes(database_url: str) -> None:
    most, seconds = rate_race(database_url, "10/500ms", jobs=30, processes=2)
    assert most <= 10
    assert seconds >= 1.0  # 30 starts at 10 per 500 ms take at least two more windows


@pytest.mark.slow
def test_a_paused_queue_starts_nothing_while_others_drain(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(SETUP.encode())
    pgbeat.pause_queue(conn, "held")
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("span", queue="held") for _ in range(20)])
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("span", queue="free") for _ in range(60)])
    with workers(database_url, 2, ["--concurrency", "5", "--poll", "200ms"]):
        wait_for(
            lambda: sum(s.queue == "free" for s in spans(conn)) == 60, timeout=60, interval=0.05
        )
        assert not any(s.queue == "held" for s in spans(conn))
        pgbeat.resume_queue(conn, "held")
        wait_for(lambda: len(spans(conn)) == 80, timeout=60, interval=0.05)
    assert sum(s.queue == "held" for s in spans(conn)) == 20


@pytest.mark.slow
def test_workers_behind_a_foreign_backlog_take_each_job_once(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Three worker processes whose head of the claim order is a foreign kind's backlog
    claim by queue and kind at once: every job runs once, none of the foreign kind is
    taken."""
    conn.execute(SETUP.encode())
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) SELECT 'other', '{}', now() - interval '1 day'"
        " FROM generate_series(1, 200)"
    )
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("span") for _ in range(600)])
    with workers(database_url, 3, ["--concurrency", "10", "--poll", "200ms"]):
        wait_for(lambda: len(spans(conn)) >= 600, timeout=120, interval=0.05)
    ran = [s.job_id for s in spans(conn)]
    assert sorted(ran) == sorted(ids)  # each once
    rows = conn.execute("SELECT status, count(*) FROM jobs WHERE kind = 'other' GROUP BY 1")
    assert rows.fetchall() == [("pending", 200)]
