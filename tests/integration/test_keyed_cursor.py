"""The position of a key-limited queue's head claim (worker/limited_claims.py, claim_after.py's
JOBS_CLAIM_LIMITED_HEAD_AFTER): a drain goes on from where its last claim stopped in the
queue's indexes, only after a claim that passed no row of a saturated key over; a job that
comes before the position is claimed next once announced, after CURSOR_MAX at most when it
is not; a chain whose rows ran out claims from the head at once. Against a real database;
the expected order is written out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.sql.jobs import claim_after
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.worker import claim_cursor, limited_claims
from pgbeat.worker.claiming import Claimer
from pgbeat.worker.locked_claim import claim_locked

LEASE = timedelta(minutes=5)
PAST = datetime(2020, 1, 1, tzinfo=UTC)
HEAD = limited_sql.JOBS_CLAIM_LIMITED_HEAD
AFTER = claim_after.JOBS_CLAIM_LIMITED_HEAD_AFTER


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the limited claims run, in order."""
    statements: list[str] = []

    def recorded(conn: Any, statement: Any, *args: Any) -> Any:
        statements.append(statement)
        return claim_locked(conn, statement, *args)

    monkeypatch.setattr(limited_claims, "claim_locked", recorded)
    return statements


@pytest.fixture
def long_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A position that outlives the test: only what the test does ends it."""
    monkeypatch.setattr(claim_cursor, "CURSOR_MAX", 3600.0)


def enqueue(conn: psycopg.Connection[Any], spec: list[tuple[str, int]]) -> dict[int, Any]:
    """Jobs of queue "keyed", each (limit key, minutes after PAST), by id."""
    ids: dict[int, Any] = {}
    for key, m in spec:
        job_id = pgbeat.enqueue(
            conn, "noop", queue="keyed", limit_key=key, run_at=PAST + timedelta(minutes=m)
        )
        assert job_id is not None
        ids[job_id] = (key, m)
    return ids


def claimed(
    claimer: Claimer, conn: psycopg.Connection[Any], ids: dict[int, Any], limit: int
) -> set[Any]:
    """What one claim took, as the jobs' specs."""
    return {ids[job.id] for job in claimer.claim(conn, limit)}


@pytest.fixture
def keyed(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    pgbeat.configure_queue(conn, "keyed", key_concurrency=1)
    return conn


def test_a_keyed_drain_goes_on_from_its_last_claim_then_from_the_head(
    keyed: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    ids = enqueue(keyed, [(f"k{m}", m) for m in range(8)])
    claimer = Claimer(LEASE, ["noop"])
    batches = [claimed(claimer, keyed, ids, 3) for _ in range(4)]
    assert batches == [
        {("k0", 0), ("k1", 1), ("k2", 2)},
        {("k3", 3), ("k4", 4), ("k5", 5)},
        {("k6", 6), ("k7", 7)},  # the rows after the position ran out
        set(),
    ]
    assert ran == [HEAD, AFTER, AFTER, HEAD]


def test_a_claim_that_passed_a_saturated_keys_row_over_keeps_no_position(
    keyed: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    """Key a's second job waits behind its first (key_concurrency 1): the claim that
    passed it over leaves no position, so once a's first job ends the next claim, from the
    head, takes it before the jobs after it."""
    ids = enqueue(keyed, [("a", 0), ("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, keyed, ids, 2) == {("a", 0), ("b", 2)}
    first = next(i for i, spec in ids.items() if spec == ("a", 0))
    keyed.execute("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", (first,))
    assert claimed(claimer, keyed, ids, 2) == {("a", 1), ("c", 3)}
    assert ran == [HEAD, HEAD]


def test_jobs_announced_before_the_keyed_position_are_claimed_next(
    keyed: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    ids = enqueue(keyed, [(f"k{m}", m) for m in range(10, 20)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, keyed, ids, 2) == {("k10", 10), ("k11", 11)}
    assert claimed(claimer, keyed, ids, 2) == {("k12", 12), ("k13", 13)}
    ids |= enqueue(keyed, [("old", 1)])  # an older run_at, before the position
    claimer.jobs_arrived()  # the listener's notification
    assert claimed(claimer, keyed, ids, 2) == {("old", 1), ("k14", 14)}
    assert ran == [HEAD, AFTER, HEAD]


def test_a_job_made_pending_before_the_keyed_position_unannounced_waits_for_cursor_max(
    keyed: psycopg.Connection[Any],
    ran: list[str],
    long_cursor: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lease reclaimed keeps its run_at and announces nothing: the chain of claims from
    the position passes it by until CURSOR_MAX after its claim from the head."""
    ids = enqueue(keyed, [(f"k{m}", m) for m in range(10)])
    claimer = Claimer(LEASE, ["noop"])
    assert claimed(claimer, keyed, ids, 2) == {("k0", 0), ("k1", 1)}
    reclaimed = next(i for i, spec in ids.items() if spec == ("k0", 0))
    keyed.execute(  # as a reclaimed lease: pending again, its run_at kept
        "UPDATE jobs SET status = 'pending', locked_until = NULL WHERE id = %s", (reclaimed,)
    )
    assert claimed(claimer, keyed, ids, 2) == {("k2", 2), ("k3", 3)}  # from the position
    monkeypatch.setattr(claim_cursor, "CURSOR_MAX", 0.0)  # the chain's time is up
    assert claimed(claimer, keyed, ids, 2) == {("k0", 0), ("k4", 4)}
    assert ran == [HEAD, AFTER, HEAD]


def test_a_keyed_position_of_one_priority_hands_the_next_to_the_head(
    keyed: psycopg.Connection[Any], ran: list[str], long_cursor: None
) -> None:
    """The position is within a priority: its rows run out where the priority does, and
    the claim after takes the lower priority's jobs from the head."""
    ids: dict[int, Any] = {}
    for key, priority in (("p1", 5), ("p2", 5), ("p3", 5), ("q1", 0), ("q2", 0)):
        job_id = pgbeat.enqueue(
            keyed, "noop", queue="keyed", limit_key=key, priority=priority, run_at=PAST
        )
        assert job_id is not None
        ids[job_id] = key
    claimer = Claimer(LEASE, ["noop"])
    assert {ids[job.id] for job in claimer.claim(keyed, 2)} == {"p1", "p2"}
    assert {ids[job.id] for job in claimer.claim(keyed, 2)} == {"p3"}
    assert {ids[job.id] for job in claimer.claim(keyed, 2)} == {"q1", "q2"}
    assert ran == [HEAD, AFTER, HEAD]
