"""The claim by queue and kind (db/sql/jobs/claim_heads.py) and the rests of held queues
without pending jobs: what the worker cannot take no longer sits in its way, and nothing it
may not take is taken. Against a real database; the expected order is written out."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.job import Job
from pgbeat.worker import due_queues
from pgbeat.worker.claiming import HELD_AHEAD, KINDS_AHEAD, Claimer
from tests.helpers import running_worker, wait_for

LEASE = timedelta(minutes=5)
PAST = datetime(2020, 1, 1, tzinfo=UTC)


def foreign_head(conn: psycopg.Connection[Any], count: int = HELD_AHEAD) -> None:
    """``count`` due jobs of a kind no claimer here handles, first in claim order."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) SELECT 'other', '{}', %s"
        " FROM generate_series(1, %s)",
        (PAST - timedelta(days=1), count),
    )


def statuses(conn: psycopg.Connection[Any], kind: str) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) FROM jobs WHERE kind = %s GROUP BY 1", (kind,))
    return {status: int(n) for status, n in rows.fetchall()}


def walked(hint: due_queues.DueQueues, conn: psycopg.Connection[Any]) -> list[str]:
    """The hint's queues after its next walk (held: the paused queue)."""
    hint.heads_for(conn, ["noop"], ["paused"])
    return hint.names


def batches(claimer: Claimer, conn: psycopg.Connection[Any], limit: int) -> list[list[Job]]:
    """Claims until one comes back empty (at most 50 claims), each claim's jobs apart (a
    claim returns its jobs in no particular order: the order is across claims)."""
    taken: list[list[Job]] = []
    for _ in range(50):
        jobs = claimer.claim(conn, limit)
        if not jobs:
            break
        taken.append(jobs)
    return taken


def drain(claimer: Claimer, conn: psycopg.Connection[Any], limit: int) -> list[Job]:
    return [job for batch in batches(claimer, conn, limit) for job in batch]


def test_foreign_kinds_at_the_head_switch_to_the_claim_by_queue_and_kind(
    conn: psycopg.Connection[Any],
) -> None:
    foreign_head(conn)
    spec = [  # (queue, priority, minutes after PAST)
        ("default", 0, 5),
        ("mail", 0, 1),
        ("default", 3, 9),
        ("mail", -1, 0),
        ("reports", 0, 3),
        ("default", 0, 2),
        ("mail", 3, 4),
    ]
    ids = {
        pgbeat.enqueue(conn, "noop", queue=q, priority=p, run_at=PAST + timedelta(minutes=m)): (
            q,
            p,
            m,
        )
        for q, p, m in spec
    }
    pgbeat.enqueue(conn, "noop", queue="mail", run_at=datetime.now(UTC) + timedelta(hours=1))
    claimer = Claimer(LEASE, ["noop"])
    taken = batches(claimer, conn, 2)
    assert claimer._by_kind()  # the head is all foreign: claimed by queue and kind
    # priority first, then run_at: 3@4 (mail), 3@9 (default), then 0@1, 0@2, 0@3, 0@5, -1@0
    expected = [{("mail", 3, 4), ("default", 3, 9)}, {("mail", 0, 1), ("default", 0, 2)}]
    expected += [{("reports", 0, 3), ("default", 0, 5)}, {("mail", -1, 0)}]
    assert [{ids[job.id] for job in batch} for batch in taken] == expected
    assert {job.kind for batch in taken for job in batch} == {"noop"}
    assert statuses(conn, "other") == {"pending": HELD_AHEAD}  # foreign kinds untouched
    assert statuses(conn, "noop") == {"running": len(spec), "pending": 1}  # not the delayed


@pytest.mark.parametrize("kinds", [["noop"], ["noop", "absent"]])
def test_one_queue_and_one_kind_are_claimed_as_by_the_claim_of_many(
    conn: psycopg.Connection[Any], kinds: list[str]
) -> None:
    """The hint names one queue: a worker of one kind or of two claims it by queue and
    kind, its unkeyed and keyed jobs merged in claim order, neither a foreign kind's job
    nor a delayed one."""
    foreign_head(conn)
    spec = [  # (limit_key, priority, minutes after PAST)
        (None, 0, 5),
        ("k1", 0, 1),
        (None, 3, 9),
        ("k2", -1, 0),
        (None, 0, 3),
        ("k1", 3, 4),
    ]
    ids = {
        pgbeat.enqueue(
            conn, "noop", limit_key=key, priority=p, run_at=PAST + timedelta(minutes=m)
        ): (key, p, m)
        for key, p, m in spec
    }
    pgbeat.enqueue(conn, "other", run_at=PAST)  # foreign, in the same queue
    pgbeat.enqueue(conn, "noop", run_at=datetime.now(UTC) + timedelta(hours=1))  # delayed
    claimer = Claimer(LEASE, kinds)
    taken = batches(claimer, conn, 2)
    assert claimer._by_kind() and claimer._due.names == ["default"]
    expected = [{("k1", 3, 4), (None, 3, 9)}, {("k1", 0, 1), (None, 0, 3)}]
    expected += [{(None, 0, 5), ("k2", -1, 0)}]
    assert [{ids[job.id] for job in batch} for batch in taken] == expected
    assert statuses(conn, "other") == {"pending": HELD_AHEAD + 1}
    assert statuses(conn, "noop") == {"running": len(spec), "pending": 1}


def test_a_few_foreign_jobs_keep_the_fast_claim(conn: psycopg.Connection[Any]) -> None:
    foreign_head(conn, KINDS_AHEAD - 1)
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", run_at=PAST) for _ in range(200)])
    claimer = Claimer(LEASE, ["noop"])
    assert len(claimer.claim(conn, 10)) == 10
    assert not claimer._by_kind()


def test_the_claim_by_kind_takes_nothing_of_held_queues_and_keeps_their_limits(
    conn: psycopg.Connection[Any],
) -> None:
    foreign_head(conn)
    pgbeat.pause_queue(conn, "paused")
    pgbeat.configure_queue(conn, "limited", concurrency=2)
    pgbeat.configure_queue(conn, "keyed", key_concurrency=1)
    fields: list[dict[str, Any]] = [{"queue": "paused"}] * 5 + [{"queue": "limited"}] * 5
    fields += [{"queue": "keyed", "limit_key": f"k{i % 2}"} for i in range(6)]
    fields += [{"queue": "default"}] * 5
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", run_at=PAST, **f) for f in fields])
    claimer = Claimer(LEASE, ["noop"])
    taken = drain(claimer, conn, 4)
    assert claimer._by_kind()
    by_queue: dict[str, int] = {}
    for job in taken:
        by_queue[job.queue] = by_queue.get(job.queue, 0) + 1
    assert by_queue == {"default": 5, "limited": 2, "keyed": 2}
    assert len({job.limit_key for job in taken if job.queue == "keyed"}) == 2


def test_a_queue_outside_the_hint_is_claimed_after_the_next_walk(
    conn: psycopg.Connection[Any],
) -> None:
    foreign_head(conn)
    first = pgbeat.enqueue(conn, "noop", run_at=PAST)
    claimer = Claimer(LEASE, ["noop"])
    assert [job.id for job in claimer.claim(conn, 5)] == [first]
    assert claimer._by_kind() and claimer._due.names == ["default"]
    late = pgbeat.enqueue(conn, "noop", queue="late")
    wait = claimer.seconds_to_next(conn)  # a due job outside the hint: not before the walk
    assert wait is not None and 0 < wait <= due_queues.WALK_MAX
    found: list[Job] = []

    def claimed() -> bool:
        found.extend(claimer.claim(conn, 5))
        return bool(found)

    wait_for(
        claimed,
        timeout=due_queues.WALK_MAX + 5,
        interval=0.05,
        message="the job of a queue the hint did not have",
    )
    assert [job.id for job in found] == [late]


def test_a_walk_visits_a_bounded_number_of_queues_and_the_next_goes_on(
    conn: psycopg.Connection[Any], monkeypatch: Any
) -> None:
    """Queues q0..q9 of delayed jobs, due jobs in q4 and q9 (one keyed), a paused queue's
    due job: three queues a walk, the hint kept for the queues a walk did not visit."""
    monkeypatch.setattr(due_queues, "WALK_CHUNK", 3)
    later = datetime.now(UTC) + timedelta(days=1)
    jobs = [pgbeat.NewJob("noop", queue=f"q{i}", run_at=later) for i in range(10)]
    jobs += [pgbeat.NewJob("noop", queue="q4", run_at=PAST)]
    jobs += [pgbeat.NewJob("noop", queue="q9", run_at=PAST, limit_key="k")]
    jobs += [pgbeat.NewJob("other", queue="q1", run_at=PAST)]  # a foreign kind: not due here
    jobs += [pgbeat.NewJob("noop", queue="paused", run_at=PAST)]
    pgbeat.enqueue_many(conn, jobs)
    hint = due_queues.DueQueues()
    seen = []
    for _ in range(4):  # paused, q0, q1 | q2, q3, q4 | q5, q6, q7 | q8, q9
        hint._next = hint._refresh = 0.0  # as if the walk were due
        seen.append(list(walked(hint, conn)))
    assert seen == [[], ["q4"], ["q4"], ["q4", "q9"]]
    assert hint._after is None and not hint._round_open  # the round ended
    conn.execute("UPDATE jobs SET run_at = %s WHERE queue = 'q9'", (later,))
    hint._next = hint._refresh = 0.0
    kept = walked(hint, conn)  # paused, q0, q1: q9 kept
    assert kept == ["q4", "q9"]
    hint._next = hint._refresh = 0.0
    walked(hint, conn)  # q2, q3, q4
    hint._next = hint._refresh = 0.0
    walked(hint, conn)  # q5, q6, q7
    hint._next = hint._refresh = 0.0
    assert walked(hint, conn) == ["q4"]  # q8, q9: q9 went


class SteppingClock:
    """A monotonic clock that moves ``step`` seconds at each reading (a walk reads it at its
    start and its end: each walk takes ``step``)."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1000.0, step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now


def test_walks_that_only_carry_a_round_on_wait_longer_than_after_a_change(
    conn: psycopg.Connection[Any], monkeypatch: Any
) -> None:
    """Fifteen queues of delayed jobs, three a walk, each walk 20 ms. The next walk of an
    unfinished round, nothing changed since, may run WALK_ROUND_SHARE times a walk after it
    (at most the refresh's wait); after a change (the first walk, jobs announced, a claim
    short), WALK_SHARE times (at least WALK_MIN) after the last walk began."""
    monkeypatch.setattr(due_queues, "WALK_CHUNK", 3)
    later = datetime.now(UTC) + timedelta(days=1)
    pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("noop", queue=f"q{i}", run_at=later) for i in range(15)]
    )
    clock = SteppingClock(0.02)
    monkeypatch.setattr(due_queues, "time", clock)
    after_change = max(due_queues.WALK_MIN, due_queues.WALK_SHARE * 0.02)
    refresh = max(due_queues.WALK_MAX, due_queues.WALK_SHARE * 0.02)
    carried_on = min(max(due_queues.WALK_MIN, due_queues.WALK_ROUND_SHARE * 0.02), refresh)
    assert after_change < carried_on
    hint = due_queues.DueQueues()
    rounds = []
    for change in (False, False, True, False):
        clock.now = max(clock.now, hint._walk_at())  # the next walk is due
        began = clock.now + clock.step  # its first reading of the clock
        hint.heads_for(conn, ["noop"], [])
        rounds.append(hint._after)
        if change:
            hint.stale()
        assert hint.wait(began) == pytest.approx(after_change if change else carried_on)
    assert rounds == ["q10", "q13", "q3", "q6"]  # name order: q0, q1, q10, q11, ...


def test_a_held_queue_without_pending_jobs_is_claimed_again_once_jobs_arrive(
    conn: psycopg.Connection[Any],
) -> None:
    pgbeat.configure_queue(conn, "limited", concurrency=1)
    claimer = Claimer(LEASE, ["noop"])
    assert claimer.claim(conn, 5) == []
    assert claimer._empty == {"limited"}  # seen empty: not claimed until jobs come
    ids = pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("noop", queue="limited", run_at=PAST) for _ in range(3)]
    )
    claimer.jobs_arrived()  # the notification
    found: list[Job] = []
    for _ in range(3):  # the held queues are read with the next fast claim, then claimed
        found += claimer.claim(conn, 5)
    assert [job.id for job in found] == ids[:1]  # its concurrency still holds


def test_a_held_queue_seen_empty_is_not_taken_by_the_fast_claim_when_jobs_come(
    conn: psycopg.Connection[Any],
) -> None:
    """The fast claim names only the held queues that had pending jobs: the limited queue's
    jobs, first in claim order, come before the next read of the held queues, and the
    update's re-check of every row's queue leaves them pending."""
    pgbeat.configure_queue(conn, "limited", concurrency=1)
    claimer = Claimer(LEASE, ["noop"])
    assert claimer.claim(conn, 5) == []
    assert claimer._empty == {"limited"} and claimer._held_pending == []
    held = [pgbeat.NewJob("noop", queue="limited", run_at=PAST) for _ in range(3)]
    free = [pgbeat.NewJob("noop", run_at=PAST + timedelta(minutes=1)) for _ in range(3)]
    pgbeat.enqueue_many(conn, held + free)
    taken = claimer._claim_fast(conn, 5)  # as the next claim, before any notification
    assert [row[Job._fields.index("queue")] for row in taken] == ["default", "default"]
    rows = conn.execute("SELECT status, count(*) FROM jobs WHERE queue = 'limited' GROUP BY 1")
    assert rows.fetchall() == [("pending", 3)]


def test_a_worker_drains_its_kinds_behind_a_foreign_backlog(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    foreign_head(conn, 5_000)
    pgbeat.pause_queue(conn, "paused")
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", queue="paused") for _ in range(3)])
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(300)])
    registry = pgbeat.Registry()
    ran: list[int] = []
    lock = threading.Lock()

    @registry.handler("noop")
    def noop(payload: Any, job: pgbeat.JobContext) -> None:
        with lock:
            ran.append(job.id)

    with running_worker(database_url, registry, concurrency=10):
        wait_for(lambda: len(ran) >= len(ids), timeout=60, message="the noop jobs run")
    assert sorted(ran) == ids
    assert statuses(conn, "other") == {"pending": 5_000}
    paused = conn.execute("SELECT count(*) FROM jobs WHERE queue = 'paused' AND status = 'pending'")
    assert paused.fetchone() == (3,)


def test_the_one_head_of_the_hint_is_claimed_alone_in_claim_order(
    conn: psycopg.Connection[Any],
) -> None:
    """Behind a foreign head, due jobs of one kind in one queue and one index: the claim reads
    that head alone (JOBS_CLAIM_ONE_HEAD), in claim order, and takes neither a foreign job,
    a delayed one, nor one of a held queue."""
    foreign_head(conn)
    spec = [(0, 5), (3, 9), (-1, 0), (0, 3), (3, 4)]  # (priority, minutes after PAST)
    ids = {
        pgbeat.enqueue(conn, "noop", priority=p, run_at=PAST + timedelta(minutes=m)): (p, m)
        for p, m in spec
    }
    pgbeat.enqueue(conn, "noop", run_at=datetime.now(UTC) + timedelta(hours=1))  # delayed
    claimer = Claimer(LEASE, ["noop", "mail"])
    first = claimer.claim(conn, 2)  # the head of the claim order is read: by queue and kind
    assert claimer._by_kind() and claimer._due.one_head == due_queues.Head("default", "noop", False)
    taken = [first, *batches(claimer, conn, 2)]
    assert [{ids[job.id] for job in batch} for batch in taken] == [
        {(3, 4), (3, 9)},
        {(0, 3), (0, 5)},
        {(-1, 0)},
    ]
    assert statuses(conn, "other") == {"pending": HELD_AHEAD}
    assert statuses(conn, "noop") == {"running": len(spec), "pending": 1}


def test_a_held_queue_is_not_claimed_by_its_one_head(conn: psycopg.Connection[Any]) -> None:
    """The hint's one head is of a queue paused since the walk: the claim's own re-check of
    the queue leaves its jobs pending."""
    foreign_head(conn)
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", queue="mail", run_at=PAST)] * 4)
    claimer = Claimer(LEASE, ["noop"])
    assert len(claimer.claim(conn, 2)) == 2
    assert claimer._due.one_head == due_queues.Head("mail", "noop", False)
    pgbeat.pause_queue(conn, "mail")  # before the next read of the held queues or walk
    assert claimer._claim_fast(conn, 2) == []
    assert statuses(conn, "noop") == {"running": 2, "pending": 2}


def test_jobs_announced_in_the_one_heads_queue_are_claimed_at_once(
    conn: psycopg.Connection[Any],
) -> None:
    """After a notification the claim reads every kind of the worker in both indexes of the
    hint's queues again, until the next walk: a new kind's job, or a keyed one, in the one
    head's queue does not wait for a walk."""
    foreign_head(conn)
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", run_at=PAST)] * 3)
    claimer = Claimer(LEASE, ["noop", "mail"])
    assert len(claimer.claim(conn, 1)) == 1
    assert claimer._due.one_head == due_queues.Head("default", "noop", False)
    mail = pgbeat.enqueue(conn, "mail", priority=5)
    keyed = pgbeat.enqueue(conn, "noop", priority=5, limit_key="k")
    claimer.jobs_arrived()  # the listener heard the insert
    assert claimer._due.one_head is None
    assert {job.id for job in claimer.claim(conn, 2)} == {mail, keyed}  # first in claim order


def test_a_job_of_another_kind_falling_due_in_the_one_heads_queue_waits_for_a_walk(
    conn: psycopg.Connection[Any],
) -> None:
    """Nothing announced: a delayed job of another of the worker's kinds in the one head's
    queue falls due; the claims read the one head until the next walk finds the new head
    (at most WALK_MAX later), then both."""
    foreign_head(conn)
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", run_at=PAST)] * 400)
    soon = datetime.now(UTC) + timedelta(seconds=1)
    mail = pgbeat.enqueue(conn, "mail", priority=5, run_at=soon)
    claimer = Claimer(LEASE, ["noop", "mail"])
    assert len(claimer.claim(conn, 1)) == 1
    assert claimer._due.one_head == due_queues.Head("default", "noop", False)
    started = datetime.now(UTC)
    found: list[Job] = []

    def claimed() -> bool:
        found.extend(job for job in claimer.claim(conn, 1) if job.kind == "mail")
        return bool(found)

    wait_for(claimed, timeout=due_queues.WALK_MAX + 5, interval=0.02, message="the mail job")
    assert [job.id for job in found] == [mail]
    assert datetime.now(UTC) - started <= timedelta(seconds=due_queues.WALK_MAX + 2)
    assert claimer._due.heads == [
        due_queues.Head("default", "mail", False),
        due_queues.Head("default", "noop", False),
    ]
