"""Fair queues (a queue's limit keys taken in turn), a change of settings reaching the next
claim, and queue rows the constraints of migration 0019 refuse: in-process against a real
database, and one real worker for the change that must reach a worker that rests."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.jobs import queues
from pgbeat.worker import operations
from pgbeat.worker.claiming import Claimer
from pgbeat.worker.fair_steps import STEPS_MAX, FairSteps
from tests.helpers import run_cli_here, running_worker, wait_for

LEASE = timedelta(minutes=5)


def _enqueue(conn: psycopg.Connection[Any], count: int, **fields: Any) -> list[int]:
    ids: list[int] = pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("noop", **fields) for _ in range(count)]
    )
    return ids


def _keys(jobs: list[pgbeat.Job]) -> Counter[str | None]:
    return Counter(job.limit_key for job in jobs)


def test_a_fair_queue_takes_its_keys_in_turn(conn: psycopg.Connection[Any]) -> None:
    _enqueue(conn, 1000, queue="api", limit_key="A")  # A's backlog, enqueued first
    b = _enqueue(conn, 3, queue="api", limit_key="B")
    unkeyed = _enqueue(conn, 2, queue="api")  # one key of their own
    assert _keys(Claimer(LEASE).claim(conn, 10)) == {"A": 10}  # not fair: claim order
    pgbeat.configure_queue(conn, "api", fair=True)
    claimed = Claimer(LEASE).claim(conn, 10)
    assert _keys(claimed) == {"A": 5, "B": 3, None: 2}
    assert {job.id for job in claimed} >= set(b) | set(unkeyed)


def test_a_fair_round_goes_on_from_claim_to_claim(conn: psycopg.Connection[Any]) -> None:
    """With more keys than a claim takes, the next claim goes on where the last stopped."""
    pgbeat.configure_queue(conn, "api", fair=True)
    for key in range(30):
        _enqueue(conn, 3, queue="api", limit_key=f"k{key:02}")
    claimer = Claimer(LEASE)
    seen: Counter[str | None] = Counter()
    for _ in range(3):
        seen += _keys(claimer.claim(conn, 10))
    assert seen == {f"k{key:02}": 1 for key in range(30)}  # every key once: one round


def test_the_key_whose_turn_just_came_takes_the_slots_others_leave(
    conn: psycopg.Connection[Any],
) -> None:
    """The round ends with the key the last claim stopped at: it is not skipped, so a
    backlog gets every slot another key does not use, and a queue of one key never reads
    as dry (a claim that took nothing rested it until the next notification)."""
    pgbeat.configure_queue(conn, "api", fair=True)
    _enqueue(conn, 100, queue="api", limit_key="A")
    claimer = Claimer(LEASE)
    assert _keys(claimer.claim(conn, 3)) == {"A": 3}
    assert _keys(claimer.claim(conn, 3)) == {"A": 3}  # went on after A: A again
    _enqueue(conn, 1, queue="api", limit_key="B")
    assert _keys(claimer.claim(conn, 3)) == {"B": 1, "A": 2}  # B first, A the rest
    _enqueue(conn, 2, queue="api", limit_key="B")
    assert _keys(claimer.claim(conn, 1)) == {"B": 1}  # the round stopped at A: B's turn
    assert _keys(claimer.claim(conn, 1)) == {"B": 1}  # A runs 8, B 2: B's round still
    assert _keys(claimer.claim(conn, 3)) == {"A": 3}


def test_a_claim_that_took_nothing_keeps_the_round(conn: psycopg.Connection[Any]) -> None:
    """A claim of a full queue stops nowhere: the round goes on after the key the last
    claim that took a job stopped at (it started again from the first key, which then won
    every slot freed one at a time)."""
    pgbeat.configure_queue(conn, "api", fair=True, concurrency=1)
    for key in "ABC":
        _enqueue(conn, 3, queue="api", limit_key=key)
    claimer = Claimer(LEASE)
    first = claimer.claim(conn, 1)
    assert _keys(first) == {"A": 1}
    assert claimer.claim(conn, 1) == []  # full
    operations.complete_jobs(conn, first)
    claimer.slots_freed({"api": 0.0})  # what the worker does once the outcome is written
    assert _keys(claimer.claim(conn, 1)) == {"B": 1}  # after A, not A again


def test_a_key_with_nothing_running_takes_the_next_free_slot(
    conn: psycopg.Connection[Any],
) -> None:
    """Within a round, the key with fewer running jobs goes first: a new key's job takes
    the next slot A frees, whichever worker claims it and wherever its round stands."""
    pgbeat.configure_queue(conn, "api", fair=True, concurrency=3)
    _enqueue(conn, 20, queue="api", limit_key="A")
    running = Claimer(LEASE).claim(conn, 3)
    assert _keys(running) == {"A": 3}  # the queue is full
    b = _enqueue(conn, 1, queue="api", limit_key="B")
    operations.complete_jobs(conn, running[:1])  # one slot frees
    fresh = Claimer(LEASE)  # another worker: its round starts from the first key, A
    assert [job.id for job in fresh.claim(conn, 1)] == b
    operations.complete_jobs(conn, running[1:2])
    assert _keys(fresh.claim(conn, 1)) == {"A": 1}  # A gets every slot B does not use


def test_fairness_composes_with_key_concurrency_and_priority(
    conn: psycopg.Connection[Any],
) -> None:
    pgbeat.configure_queue(conn, "api", fair=True, key_concurrency=2)
    _enqueue(conn, 50, queue="api", limit_key="A")
    _enqueue(conn, 50, queue="api", limit_key="B")
    urgent = _enqueue(conn, 1, queue="api", limit_key="C", priority=5)
    claimer = Claimer(LEASE)
    first = claimer.claim(conn, 10)
    assert urgent[0] in {job.id for job in first}
    assert _keys(first) == {"A": 2, "B": 2, "C": 1}  # at most 2 running per key
    assert claimer.claim(conn, 10) == []  # every key saturated


def test_fairness_composes_with_key_rate_and_pause(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", fair=True, key_rate="1/1h")
    _enqueue(conn, 20, queue="api", limit_key="A")
    _enqueue(conn, 20, queue="api", limit_key="B")
    pgbeat.pause_queue(conn, "api")
    assert Claimer(LEASE).claim(conn, 10) == []
    pgbeat.resume_queue(conn, "api")
    claimer = Claimer(LEASE)
    assert _keys(claimer.claim(conn, 10)) == {"A": 1, "B": 1}
    assert claimer.claim(conn, 10) == []


def test_no_fair_returns_the_queue_to_claim_order(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", fair=True)
    _enqueue(conn, 100, queue="api", limit_key="A")
    _enqueue(conn, 5, queue="api", limit_key="B")
    claimer = Claimer(LEASE)
    assert _keys(claimer.claim(conn, 10))["B"] == 5
    pgbeat.configure_queue(conn, "api", fair=False)
    claimer.settings_changed()  # what the notification of the change does
    assert _keys(claimer.claim(conn, 10)) == {"A": 10}  # the fast path: claim order
    assert queues.list_queues(conn).queues[0].settings.fair is False


def test_fair_from_the_cli(database_url: str, conn: psycopg.Connection[Any]) -> None:
    assert run_cli_here(["queues", "set", "api", "--fair"], database_url).returncode == 0
    listed = run_cli_here(["queues", "list", "--json"], database_url)
    assert [(row["name"], row["fair"]) for row in json.loads(listed.stdout)] == [("api", True)]
    assert run_cli_here(["queues", "set", "api", "--no-fair"], database_url).returncode == 0
    assert queues.list_queues(conn).queues[0].settings.fair is False
    both = run_cli_here(["queues", "set", "api", "--fair", "--no-fair"], database_url)
    assert both.returncode != 0
    with pytest.raises(TypeError, match="fair"):
        pgbeat.configure_queue(conn, "api", fair="yes")  # type: ignore[call-overload]


def test_a_rest_ends_when_the_settings_change(conn: psycopg.Connection[Any]) -> None:
    """A worker that saw a rate spent (resting until its window ends, an hour here) claims
    again at its next claim once the change is announced or seen in the held queues."""
    pgbeat.configure_queue(conn, "api", rate="1/1h")
    _enqueue(conn, 5, queue="api")
    claimer = Claimer(LEASE)
    assert len(claimer.claim(conn, 10)) == 1
    assert claimer.claim(conn, 10) == []  # spent: rests for the hour
    pgbeat.configure_queue(conn, "api", rate="100/1s")
    claimer.settings_changed()
    assert len(claimer.claim(conn, 10)) == 4


@pytest.mark.slow
def test_a_worker_that_saw_a_rate_spent_obeys_a_raised_rate_at_once(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    registry = pgbeat.Registry()

    @registry.handler("noop")
    def noop(payload: Any) -> None: ...

    pgbeat.configure_queue(conn, "api", rate="1/1d")
    _enqueue(conn, 5, queue="api")

    def done() -> int:
        row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
        return int(row[0]) if row else 0

    with running_worker(database_url, registry):
        wait_for(lambda: done() == 1, message="the rate's one start")
        assert (
            run_cli_here(["queues", "set", "api", "--rate", "100/1s"], database_url).returncode == 0
        )
        wait_for(lambda: done() == 5, timeout=10, message="the rest, after the change")


def _plant_invalid_row(conn: psycopg.Connection[Any]) -> None:
    """A row written by SQL before migration 0019's constraint (dropped and added back NOT
    VALID, as the migration leaves it)."""
    conn.execute("ALTER TABLE pgbeat_queues DROP CONSTRAINT pgbeat_queues_settings_valid")
    conn.execute(
        "INSERT INTO pgbeat_queues (name, rate_count, rate_period)"
        " VALUES ('broken', 5, interval '300000 years')"
    )
    conn.execute(
        "ALTER TABLE pgbeat_queues ADD CONSTRAINT pgbeat_queues_settings_valid"
        " CHECK (rate_period IS NULL OR rate_period <= interval '1 day') NOT VALID"
    )


def test_the_database_refuses_what_the_api_refuses(conn: psycopg.Connection[Any]) -> None:
    for name, period in (("x", "300000 years"), ("x", "0.5 ms"), (" x", "1 s")):
        with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
            conn.execute(
                "INSERT INTO pgbeat_queues (name, rate_count, rate_period)"
                " VALUES (%s, 5, %s::interval)",
                (name, period),
            )


def test_a_row_from_before_the_constraints_stops_nothing(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    _plant_invalid_row(conn)
    _enqueue(conn, 3, queue="broken")
    healthy = _enqueue(conn, 3)
    claimer = Claimer(LEASE)
    assert sorted(job.id for job in claimer.claim(conn, 10)) == healthy
    assert claimer.claim(conn, 10) == []
    assert [r.getMessage() for r in caplog.records if "broken" in r.getMessage()] == [
        "queue 'broken': its rate period is outside 1ms-1d; its jobs wait until it is set again"
    ]
    [state] = [s for s in queues.list_queues(conn).queues if s.settings.name == "broken"]
    assert state.settings.rate is None and state.settings.problem is not None
    listed = run_cli_here(["queues", "list"], database_url)
    assert listed.returncode == 0 and "invalid" in listed.stdout, listed.stderr
    assert run_cli_here(["queues", "list", "--json"], database_url).returncode == 0


def test_the_key_walk_is_bounded_and_goes_on_from_claim_to_claim(
    conn: psycopg.Connection[Any],
) -> None:
    """600 keys whose rate is spent clog the queue: each claim walks at most 256 keys (its
    cost does not grow with them), the next goes on, and the one free key is found."""
    pgbeat.configure_queue(conn, "api", key_rate="1/1h")
    conn.execute(
        "INSERT INTO jobs (kind, payload, queue, limit_key) SELECT 'noop', '{}', 'api',"
        " 'key' || lpad(i::text, 4, '0') FROM generate_series(1, 600) AS i"
    )
    conn.execute(
        "INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)"
        " SELECT 'api', 'key' || lpad(i::text, 4, '0'), now() FROM generate_series(1, 600) i"
    )
    [free] = _enqueue(conn, 1, queue="api", limit_key="zzz")
    claimer = Claimer(LEASE)
    claimed: list[int] = []

    def found() -> bool:  # each walk after a fruitless one waits KEYS_IDLE_PAUSE
        claimed.extend(job.id for job in claimer.claim(conn, 10))
        return bool(claimed)

    wait_for(found, timeout=30, message="the free key's job")
    assert claimed == [free]


def test_a_held_queue_with_few_jobs_is_skipped_by_the_fast_claim(
    conn: psycopg.Connection[Any],
) -> None:
    """Beside a paused queue with a few jobs the fast claim skips them in its scan (it does
    not walk every queue with a pending job); beside a paused backlog it claims by queue."""
    pgbeat.pause_queue(conn, "paused")
    _enqueue(conn, 3, queue="paused")
    healthy = _enqueue(conn, 5)
    claimer = Claimer(LEASE)
    assert sorted(job.id for job in claimer.claim(conn, 10)) == healthy
    _enqueue(conn, 150, queue="paused")
    more = _enqueue(conn, 5)
    claimer = Claimer(LEASE)
    assert sorted(job.id for job in claimer.claim(conn, 10)) == more


def _long_jobs() -> FairSteps:
    """What the claimer learns from its claims and frees, in numbers: jobs a minute long,
    claims a millisecond (STEPS_MAX steps)."""
    paced = FairSteps()
    paced.claimed("api", 0.0, 0.001)
    paced.ran({"api": 60.0})
    return paced


def test_a_fair_queue_of_long_jobs_hands_its_slots_out_in_steps(
    conn: psycopg.Connection[Any],
) -> None:
    """Jobs a minute long: STEPS_MAX steps of 50 / 25 = 2, each claim but the last saying
    the next step is due now; they reserve nothing (the last fills the queue), and a new
    key's job goes with the next step."""
    assert STEPS_MAX == 25
    pgbeat.configure_queue(conn, "api", fair=True, concurrency=50)
    _enqueue(conn, 100, queue="api", limit_key="A")
    claimer = Claimer(LEASE)
    claimer._limited_claims._steps = _long_jobs()  # the claimer times its own round trips on top
    taken = []
    for step in range(STEPS_MAX):
        if step == 10:
            b = _enqueue(conn, 1, queue="api", limit_key="B")
        claimed = claimer.claim(conn, 60)
        assert len(claimed) == 2
        assert claimer.stepped == (step < STEPS_MAX - 1)  # the last step fills the queue
        taken += claimed
    assert b[0] in {job.id for job in taken[20:22]}  # B's job went with the next step
    assert len(taken) == 50
    assert claimer.claim(conn, 50) == [] and not claimer.stepped  # every slot taken


def test_short_jobs_take_every_free_slot_at_once(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", fair=True, concurrency=40)
    _enqueue(conn, 100, queue="api", limit_key="A")
    claimer = Claimer(LEASE)
    paced = FairSteps()
    paced.claimed("api", 0.0, 0.001)
    paced.ran({"api": 0.0015})  # jobs shorter than two round trips: one step
    claimer._limited_claims._steps = paced
    assert len(claimer.claim(conn, 50)) == 40 and not claimer.stepped


@pytest.mark.parametrize("concurrency", [None, 50])
def test_a_claim_held_back_by_its_keys_is_no_step(
    conn: psycopg.Connection[Any], concurrency: int | None
) -> None:
    """Only a claim that stopped at its step's size goes on with the next step at once. One
    that took fewer because its keys' budgets allow no more (or, without a concurrency,
    steps that cap nothing) would claim again at every turn of the loop, under the queue's
    row lock, for nothing."""
    pgbeat.configure_queue(conn, "api", fair=True, key_concurrency=1, concurrency=concurrency)
    for key in "ABC":
        _enqueue(conn, 3, queue="api", limit_key=key)
    claimer = Claimer(LEASE)
    claimer._limited_claims._steps = _long_jobs()
    first = claimer.claim(conn, 60)
    if concurrency is None:  # nothing to step: one job of each key, and no step said
        assert _keys(first) == {"A": 1, "B": 1, "C": 1} and not claimer.stepped
        return
    assert len(first) == 2 and claimer.stepped  # ceil(50 / 25): the step's size
    second = claimer.claim(conn, 60)
    assert _keys(first + second) == {"A": 1, "B": 1, "C": 1}  # the keys' budgets: one more
    assert not claimer.stepped
