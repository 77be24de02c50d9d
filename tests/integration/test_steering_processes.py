"""Steered jobs with real `pgbeat worker` processes: renewed leases (and kill -9 during them),
cancels of running jobs (async and sync, by id and by key, with and without LISTEN), and
cancels raced against completions, retries and a killed worker's expiring leases."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any, LiteralString

import psycopg
import pytest

import pgbeat
from tests.apps.steer_app import SETUP
from tests.helpers import PROCESS_START, CliProcess, start_cli, wait_for

ROOT = str(Path(__file__).resolve().parents[2])
APP = "tests.apps.steer_app:registry"


@pytest.fixture
def tables(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute(SETUP.encode())
    return conn


def workers(url: str, count: int, *flags: str, **env: str) -> list[CliProcess]:
    return [start_cli(["worker", APP, *flags], url, cwd=ROOT, **env) for _ in range(count)]


def stop_all(processes: list[CliProcess]) -> str:
    return "".join(p.stop(signal.SIGTERM) for p in processes)


def one(conn: psycopg.Connection[Any], sql: LiteralString, *args: object) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.slow
def test_renewed_leases_keep_long_jobs_from_being_reaped(
    database_url: str, tables: psycopg.Connection[Any], started: list[CliProcess]
) -> None:
    """Jobs four leases long under three workers: none reaped, none run twice."""
    conn = tables
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("sleepy", {"seconds": 4}) for _ in range(6)])
    flags = ("--concurrency", "2", "--lease", "1s", "--timeout", "1m")
    started += workers(database_url, 3, *flags)
    for job_id in ids:
        assert pgbeat.wait(conn, job_id, timeout=40).status == "done"
    output = stop_all(started)
    assert "lease expired" not in output
    assert one(conn, "SELECT count(*) FROM executions") == 6
    assert one(conn, "SELECT count(DISTINCT job_id) FROM executions") == 6


@pytest.mark.slow
def test_kill_9_during_renewal_frees_the_jobs_about_one_lease_later(
    database_url: str, tables: psycopg.Connection[Any], started: list[CliProcess]
) -> None:
    conn = tables
    lease = 2.0
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("sleepy", {"seconds": 60}) for _ in range(4)])
    (doomed,) = workers(database_url, 1, "--concurrency", "4", "--lease", "2s", "--timeout", "5m")
    started.append(doomed)
    wait_for(lambda: one(conn, "SELECT count(*) FROM executions") == 4, timeout=PROCESS_START)
    first = one(conn, "SELECT min(locked_until) FROM jobs WHERE kind = 'sleepy'")
    # The test is about a kill between renewals: wait until every lease was renewed once.
    renewed = "SELECT min(locked_until) > %s FROM jobs WHERE kind = 'sleepy'"
    wait_for(lambda: one(conn, renewed, first), timeout=lease * 10)
    # A reaper that runs no sleepy job: it only takes the dead worker's jobs back. The clock
    # starts once it runs (its heartbeat), not while a loaded machine still imports it.
    started += workers(database_url, 1, "--kinds", "result", "--lease", "2s")
    registered = "SELECT count(*) FROM pgbeat_processes WHERE role = 'worker'"
    wait_for(lambda: one(conn, registered) == 2, timeout=PROCESS_START)
    doomed.kill()
    killed = time.monotonic()
    pending = "SELECT count(*) FROM jobs WHERE kind = 'sleepy' AND status = 'pending'"
    wait_for(lambda: one(conn, pending) == len(ids), timeout=lease + 5)
    took = time.monotonic() - killed
    assert took <= lease + 5, took


@pytest.mark.slow
@pytest.mark.parametrize("pooled", [False, True], ids=["listen", "pooler"])
def test_cancels_reach_running_handlers_within_a_second(
    database_url: str,
    tables: psycopg.Connection[Any],
    started: list[CliProcess],
    pooled: bool,
) -> None:
    """Async and sync handlers, by id and by key; behind a pooler the renewal finds them."""
    conn = tables
    env = {"PGBEAT_POOLER": "transaction"} if pooled else {}
    started += workers(
        database_url, 1, "--concurrency", "8", "--lease", "30s", "--poll", "300ms", **env
    )
    jobs = {
        (kind, by): pgbeat.enqueue(conn, kind, {"seconds": 60}, job_key=f"{kind}-{by}")
        for kind in ("sleepy", "async_sleepy")
        for by in ("id", "key")
    }
    wait_for(lambda: one(conn, "SELECT count(*) FROM executions") == 4, timeout=PROCESS_START)
    lags = []
    for (kind, by), job_id in jobs.items():
        assert job_id is not None
        asked = time.monotonic()
        if by == "id":
            assert pgbeat.cancel_job(conn, job_id).previous_status == "running"
        else:
            assert pgbeat.cancel(conn, kind, f"{kind}-{by}") == pgbeat.Cancelled(job_id, True)
        assert pgbeat.wait(conn, job_id, timeout=10).status == "cancelled"
        lags.append(time.monotonic() - asked)
    wait_for(lambda: one(conn, "SELECT count(*) FROM ends WHERE how = 'stopped'") == 4)
    stop_all(started)
    assert max(lags) < 1.0, lags
    assert one(conn, "SELECT count(*) FROM executions") == 4  # none ran again


@pytest.mark.slow
def test_cancels_raced_against_completions_retries_and_expiring_leases(
    database_url: str, tables: psycopg.Connection[Any], started: list[CliProcess]
) -> None:
    """200 cancels (``PGBEAT_CANCEL_RACE=1000`` for the documented run), each at a random
    moment of its job's life, while runs complete, fail and retry, and one worker is
    killed -9 (its leases expire): a cancel that took is never followed by a run or a
    `done`; one that did not says how the job had ended."""
    conn = tables
    rng = random.Random(20)
    total = int(os.environ.get("PGBEAT_CANCEL_RACE", "200"))  # docs/reliability.md: 1000
    payloads = [{"seconds": rng.choice([0, 0.01, 0.05, 0.2]), "fail": 0.3} for _ in range(total)]
    flags = ("--concurrency", "8", "--lease", "1s", "--timeout", "30s")
    started += workers(database_url, 2, *flags)
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("sleepy", p, max_attempts=3) for p in payloads])
    # The attempts a job had run when its cancel committed: a run that started before it
    # may record its start later, but no later attempt may ever start.
    answers: dict[int, tuple[pgbeat.CancelResult, int]] = {}
    killed = False
    # Cancels from once a tenth of the jobs ended: begun at once, on a loaded machine every
    # cancel could land before the workers' first run ended, and no cancel would find its
    # job finished (the race's other side).
    wait_for(
        lambda: (
            one(conn, "SELECT count(*) FROM jobs WHERE status IN ('done', 'failed')") >= total // 10
        ),
        timeout=60,
        interval=0.005,
        message="a tenth of the jobs ended",
    )
    for n, job_id in enumerate(rng.sample(ids, total)):
        if n == total // 2 and not killed:
            started[0].kill()  # its running jobs' leases expire; the reaper races the cancels
            started += workers(database_url, 1, *flags)
            killed = True
        time.sleep(rng.random() * 0.01)  # pacing the cancels, not waiting for anything
        answers[job_id] = (
            pgbeat.cancel_job(conn, job_id),
            one(conn, "SELECT attempts FROM jobs WHERE id = %s", job_id),
        )
    wait_for(
        lambda: one(conn, "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')") == 0,
        timeout=60,
        message="every job ended",
    )
    stop_all(started)
    final = dict(conn.execute("SELECT id, status FROM jobs").fetchall())
    late_runs = dict(
        conn.execute(
            "SELECT e.job_id, count(*) FROM executions AS e "
            "JOIN unnest(%s::bigint[], %s::int[]) AS c(id, attempts) ON c.id = e.job_id "
            "WHERE e.attempt > c.attempts GROUP BY e.job_id",
            (list(answers), [attempts for _, attempts in answers.values()]),
        ).fetchall()
    )
    took = [job_id for job_id, (answer, _) in answers.items() if answer.accepted]
    assert late_runs == {}, "attempts started after their job's cancel committed"
    assert [j for j in took if final[j] != "cancelled"] == []
    for job_id, (answer, _) in answers.items():
        if not answer.accepted:  # the run finished first, and the cancel said so
            assert answer.previous_status == final[job_id] != "running"
    assert 0 < len(took) < total  # both sides of the race were hit
    found = [answer.previous_status for answer, _ in answers.values()]
    print({status: found.count(status) for status in sorted(set(found))})  # shown with -s
