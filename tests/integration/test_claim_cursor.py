"""The claim's cursor (worker/claim_cursor.py, db/sql/jobs/claim_after.py): a drain goes on
from where its last claim stopped in the index, in claim order; a job that comes before that
position is claimed next once announced, after CURSOR_MAX at most when it is not. Against a
real database; the expected order is written out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import claim_after
from pgbeat.worker import claim_cursor, claimed_rows, claiming
from pgbeat.worker.claiming import Claimer

LEASE = timedelta(minutes=5)
PAST = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The claim statements the worker's claims run, in order."""
    statements: list[str] = []
    fetch = claimed_rows.fetch_jobs

    def recorded(statement: str, cursor: psycopg.Cursor[Any]) -> list[Any]:
        statements.append(statement)
        return fetch(statement, cursor)

    monkeypatch.setattr(claiming, "fetch_jobs", recorded)
    return statements


@pytest.fixture
def long_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A position that outlives the test: only what the test does ends it."""
    monkeypatch.setattr(claim_cursor, "CURSOR_MAX", 3600.0)


def enqueue(conn: psycopg.Connection[Any], spec: list[tuple[int, int]]) -> dict[int, Any]:
    """Jobs of (priority, minutes after PAST), by id."""
    ids: dict[int, Any] = {}
    for p, m in spec:
        job_id = pgbeat.enqueue(conn, "noop", priority=p, run_at=PAST + timedelta(minutes=m))
        assert job_id is not None
        ids[job_id] = (p, m)
    return ids


def claimed(
    claimer: Claimer, conn: psycopg.Connection[Any], ids: dict[int, Any], limit: int
) -> set[Any]:
    """What one claim took, as the jobs' specs."""
    return {ids[job.id] for job in claimer.claim(conn, limit)}


def test_a_drain_goes_on_from_its_last_claim_in_claim_order(
    conn: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    spec = [(0, m) for m in range(12)] + [(2, 30), (2, 20), (-1, 0)]
    ids = enqueue(conn, spec)
    claimer = Claimer(LEASE, ["noop"])
    batches = [claimed(claimer, conn, ids, 3) for _ in range(6)]
    assert batches == [
        {(2, 20), (2, 30), (0, 0)},
        {(0, 1), (0, 2), (0, 3)},
        {(0, 4), (0, 5), (0, 6)},
        {(0, 7), (0, 8), (0, 9)},
        {(0, 10), (0, 11), (-1, 0)},
        set(),
    ]
    assert ran[0] == claim_sql.JOBS_CLAIM
    assert ran[1:5] == [claim_after.JOBS_CLAIM_AFTER] * 4


def test_a_claim_whose_priority_ran_out_takes_the_rest_from_the_head(
    conn: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    ids = enqueue(conn, [(5, 1), (5, 2), (0, 0), (0, 3), (0, 4)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, conn, ids, 2) == {(5, 1), (5, 2)}
    assert claimed(claimer, conn, ids, 2) == {(0, 0), (0, 3)}  # one claim, full
    assert ran == [claim_sql.JOBS_CLAIM, claim_after.JOBS_CLAIM_AFTER, claim_sql.JOBS_CLAIM]


def test_jobs_announced_before_the_position_are_claimed_next(
    conn: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    ids = enqueue(conn, [(0, m) for m in range(10, 20)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, conn, ids, 2) == {(0, 10), (0, 11)}
    assert claimed(claimer, conn, ids, 2) == {(0, 12), (0, 13)}
    ids |= enqueue(conn, [(3, 30), (0, 1)])  # a higher priority, and an older run_at
    claimer.jobs_arrived()  # the listener's notification
    assert claimed(claimer, conn, ids, 2) == {(3, 30), (0, 1)}
    assert claimed(claimer, conn, ids, 2) == {(0, 14), (0, 15)}


def test_a_job_made_pending_before_the_position_unannounced_waits_for_cursor_max(
    conn: psycopg.Connection[Any],
    ran: list[str],
    long_cursor: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lease reclaimed by another worker keeps its run_at and announces nothing: the
    chain of claims from the position passes it by until CURSOR_MAX after its claim from
    the head."""
    ids = enqueue(conn, [(0, m) for m in range(10)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, conn, ids, 2) == {(0, 0), (0, 1)}
    assert claimed(claimer, conn, ids, 2) == {(0, 2), (0, 3)}
    reclaimed = next(i for i, spec in ids.items() if spec == (0, 0))
    conn.execute(  # as a reclaimed lease: pending again, its run_at kept
        "UPDATE jobs SET status = 'pending', locked_until = NULL WHERE id = %s", (reclaimed,)
    )
    assert claimed(claimer, conn, ids, 2) == {(0, 4), (0, 5)}  # from the position
    monkeypatch.setattr(claim_cursor, "CURSOR_MAX", 0.0)  # the chain's time is up
    assert claimed(claimer, conn, ids, 2) == {(0, 0), (0, 6)}
    assert ran[-1] == claim_sql.JOBS_CLAIM


def test_a_change_of_the_held_queues_sends_the_next_claim_to_the_head(
    conn: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    """A paused queue's jobs are skipped by the claim (JOBS_CLAIM_SKIPPING); resumed, the
    jobs it skipped before the position are claimed next."""
    pgbeat.enqueue(conn, "noop", queue="paused", run_at=PAST)  # a held queue with a job
    pgbeat.pause_queue(conn, "paused")
    ids = enqueue(conn, [(0, m) for m in range(1, 10)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, conn, ids, 2) == {(0, 1), (0, 2)}
    assert claimed(claimer, conn, ids, 2) == {(0, 3), (0, 4)}
    assert ran == [claim_sql.JOBS_CLAIM_SKIPPING, claim_after.JOBS_CLAIM_SKIPPING_AFTER]
    pgbeat.resume_queue(conn, "paused")
    claimer.settings_changed()  # the notification of the change
    jobs = claimer.claim(conn, 2)
    assert [job.queue for job in sorted(jobs, key=lambda job: job.run_at)] == ["paused", "default"]
