"""Jobs by key under concurrency: many connections released at once on a barrier, in
repeated rounds, with the invariants checked after every round.

The suite runs a few rounds of each; ``PGBEAT_KEY_RACE_ROUNDS=200 pytest
tests/integration/test_job_key_races.py`` runs the long version (docs/job-keys.md).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

import psycopg
import pytest

import pgbeat
from pgbeat.job import Job
from pgbeat.jobs import actions
from pgbeat.jobs.keys import OnConflict
from pgbeat.worker import operations
from tests.helpers import wait_for

T = TypeVar("T")
pytestmark = pytest.mark.slow  # rounds of threads racing on a barrier: seconds each
ROUNDS = int(os.environ.get("PGBEAT_KEY_RACE_ROUNDS", "8"))
CALLERS = 32
LEASE = timedelta(minutes=5)
KIND = "remind"


@pytest.fixture
def pool(database_url: str) -> Iterator[list[psycopg.Connection[Any]]]:
    """CALLERS connections of their own, opened once for every round of a test."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(psycopg.connect(database_url, autocommit=True))
            for _ in range(CALLERS)
        ]


def race(
    conns: list[psycopg.Connection[Any]], work: list[Callable[[psycopg.Connection[Any]], T]]
) -> list[T]:
    """Run work[i] on conns[i], all threads released at once; raise the first error."""
    barrier = threading.Barrier(len(work), timeout=30)
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work[i](conns[i])
        except BaseException as exc:  # reported below, with the round that raised it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a racing call hung"
    if errors:
        raise errors[0]
    return results


def in_transaction(conn: psycopg.Connection[Any], call: Callable[[], T]) -> T:
    """``call`` in a transaction of its own, committed, as an application would."""
    with conn.transaction():
        return call()


def live(conn: psycopg.Connection[Any], key: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT id, status, payload, run_at FROM jobs WHERE kind = %s AND job_key = %s "
        "AND superseded_at IS NULL AND status IN ('pending', 'running')",
        (KIND, key),
    ).fetchall()


def assert_invariants(conn: psycopg.Connection[Any]) -> None:
    """At most one live job per key; a superseded job never waits to run again.

    The first check cannot fail while the index jobs_live_key exists (it is a guard against
    dropping it, not evidence about the races); what the races prove is in the results each
    test compares. test_the_live_key_index_is_what_keeps_one_live_job shows the index bites.
    """
    doubled = conn.execute(
        "SELECT kind, job_key FROM jobs WHERE job_key IS NOT NULL AND superseded_at IS NULL "
        "AND status IN ('pending', 'running') GROUP BY 1, 2 HAVING count(*) > 1"
    ).fetchall()
    assert doubled == []
    revived = conn.execute(
        "SELECT id, status FROM jobs WHERE superseded_at IS NOT NULL AND status = 'pending'"
    ).fetchall()
    assert revived == []


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


# -- 32 enqueues of one key at once, in each mode ---------------------------------------------


@pytest.mark.parametrize("mode", ["ignore", "replace", "keep_earliest", "keep_latest"])
def test_concurrent_enqueues_of_one_key(
    pool: list[psycopg.Connection[Any]], mode: OnConflict
) -> None:
    check = pool[0]
    base = database_now(check) + timedelta(hours=1)

    def enqueuer(key: str, i: int) -> Callable[[psycopg.Connection[Any]], Any]:
        def call(conn: psycopg.Connection[Any]) -> Any:
            return in_transaction(
                conn,
                lambda: pgbeat.enqueue(
                    conn,
                    KIND,
                    {"i": i},
                    run_at=base + timedelta(seconds=i),
                    job_key=key,
                    on_conflict=mode,
                ),
            )

        return call

    for round_number in range(ROUNDS):
        key = f"{mode}-{round_number}"
        ids = race(pool, [enqueuer(key, i) for i in range(CALLERS)])
        ((live_id, status, payload, run_at),) = live(check, key)
        assert status == "pending"
        rows = check.execute("SELECT count(*) FROM jobs WHERE job_key = %s", (key,)).fetchone()
        assert rows == (1,)
        offset = round((run_at - base).total_seconds())
        if mode == "ignore":
            winners = [i for i, job_id in enumerate(ids) if job_id is not None]
            assert len(winners) == 1 and ids[winners[0]] == live_id
            assert payload == {"i": winners[0]} and offset == winners[0]
        else:
            assert set(ids) == {live_id}  # every call returns the one live job
        if mode == "replace":
            assert offset == payload["i"]  # payload and run_at from one single call
        if mode == "keep_latest":
            assert offset == CALLERS - 1
        if mode == "keep_earliest":
            assert offset == 0
    assert_invariants(check)


# -- replace racing workers that claim the due job ----------------------------------------------


def finish(conn: psycopg.Connection[Any], run: Job, how: str) -> None:
    """End a claimed run as a worker would: done, a retry, a release, or a death and reap."""
    if how == "complete":
        operations.complete_jobs(conn, [run])
    elif how == "retry":
        operations.retry_jobs(conn, [(run, "boom", timedelta(0))])
    elif how == "release":
        operations.release_jobs(conn, [run])
    else:
        conn.execute(
            "UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (run.id,)
        )
        operations.reap_expired(conn)


def test_replace_racing_claims_keeps_one_live_job_with_the_newest_values(
    pool: list[psycopg.Connection[Any]],
) -> None:
    """One application thread replaces the key again and again, in order, while workers
    claim the due job and end their runs in every way. After each call the job it returned
    holds that call's values and holds the key; superseded runs never run again."""
    rng = random.Random(16)
    for round_number in range(ROUNDS):
        replace_while_claiming(pool, f"claimed-{round_number}", rng)
    assert_invariants(pool[0])


def replace_while_claiming(
    pool: list[psycopg.Connection[Any]], key: str, rng: random.Random, claimers: int = 8
) -> None:
    stop = threading.Event()
    claimed: list[Any] = []

    def application(conn: psycopg.Connection[Any]) -> None:
        for n in range(1, 41):
            job_id = in_transaction(
                conn,
                partial(pgbeat.enqueue, conn, KIND, {"n": n}, job_key=key, on_conflict="replace"),
            )
            found = conn.execute(
                "SELECT payload, superseded_at FROM jobs WHERE id = %s", (job_id,)
            ).fetchone()
            assert found == ({"n": n}, None), (n, found)
        stop.set()

    def worker(conn: psycopg.Connection[Any], seed: float) -> None:
        mine = random.Random(seed)
        while not stop.is_set():
            for run in operations.claim_jobs(conn, 2, LEASE, [KIND]):
                claimed.append(run.payload)
                finish(conn, run, mine.choice(["complete", "retry", "release", "reap"]))

    seeds = [rng.random() for _ in range(claimers)]
    work: list[Callable[[psycopg.Connection[Any]], Any]] = [application]
    work += [partial(worker, seed=s) for s in seeds]
    race(pool[1 : 2 + claimers], work)
    assert_invariants(pool[0])
    # the newest values are never lost: they wait in the live job, or they ran
    final = live(pool[0], key)
    if final:
        assert (final[0][1], final[0][2]) == ("pending", {"n": 40})
    else:
        assert {"n": 40} in claimed


def test_many_writers_replacing_while_workers_claim(pool: list[psycopg.Connection[Any]]) -> None:
    """Eight writers, eight workers: no call fails, no key ever has two live jobs, and the
    live job's payload and run_at always come from one single call."""
    for round_number in range(ROUNDS):
        writers_and_workers(pool, f"writers-{round_number}")


def writers_and_workers(pool: list[psycopg.Connection[Any]], key: str, writers: int = 8) -> None:
    base = database_now(pool[0]) - timedelta(minutes=1)
    stop = threading.Event()
    done_writers = threading.Semaphore(0)

    def writer(conn: psycopg.Connection[Any], w: int) -> None:
        try:
            for n in range(15):
                value = w * 100 + n
                in_transaction(
                    conn,
                    partial(
                        pgbeat.enqueue,
                        conn,
                        KIND,
                        {"v": value},
                        run_at=base + timedelta(milliseconds=value),
                        job_key=key,
                        on_conflict="replace",
                    ),
                )
                assert_invariants(conn)
        finally:
            done_writers.release()

    def worker(conn: psycopg.Connection[Any]) -> None:
        while not stop.is_set():
            for run in operations.claim_jobs(conn, 2, LEASE, [KIND]):
                # endings that keep run_at, which the check below reads
                finish(conn, run, random.choice(["complete", "release"]))

    def coordinator(conn: psycopg.Connection[Any]) -> None:
        for _ in range(writers):
            assert done_writers.acquire(timeout=60)
        stop.set()

    work: list[Callable[[psycopg.Connection[Any]], Any]] = [
        partial(writer, w=w) for w in range(writers)
    ]
    work += [worker] * 8 + [coordinator]
    race(pool[1 : len(work) + 1], work)
    assert_invariants(pool[0])
    for _, _, payload, run_at in live(pool[0], key):
        assert run_at == base + timedelta(milliseconds=payload["v"])


# -- an uncommitted enqueue makes a second one wait -------------------------------------------


def waiting_on_a_lock(conn: psycopg.Connection[Any], pid: int) -> bool:
    row = conn.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "Lock"


@pytest.mark.parametrize("mode", ["ignore", "replace"])
@pytest.mark.parametrize("first_ends", ["rollback", "commit"])
def test_an_uncommitted_enqueue_makes_the_second_wait(
    database_url: str, pool: list[psycopg.Connection[Any]], mode: OnConflict, first_ends: str
) -> None:
    for round_number in range(ROUNDS):
        key = f"wait-{round_number}"
        with psycopg.connect(database_url) as first:
            first_id = pgbeat.enqueue(first, KIND, {"by": "first"}, job_key=key)
            result = second_enqueue_waits(pool[0], pool[1], key, mode, first, first_ends)
        ((live_id, _, payload, _),) = live(pool[0], key)
        if first_ends == "rollback":  # the second inserts: nothing is lost
            assert result == live_id and payload == {"by": "second"}
        elif mode == "ignore":
            assert result is None and (live_id, payload) == (first_id, {"by": "first"})
        else:
            assert result == first_id and (live_id, payload) == (first_id, {"by": "second"})


def second_enqueue_waits(
    check: psycopg.Connection[Any],
    second: psycopg.Connection[Any],
    key: str,
    mode: OnConflict,
    first: psycopg.Connection[Any],
    first_ends: str,
) -> Any:
    """The second enqueue of ``key``, started while ``first`` has not committed its own:
    it must wait on a lock until ``first`` ends; returns what it returned."""
    result: list[Any] = []

    def enqueue() -> None:
        result.append(
            in_transaction(
                second,
                lambda: pgbeat.enqueue(
                    second, KIND, {"by": "second"}, job_key=key, on_conflict=mode
                ),
            )
        )

    thread = threading.Thread(target=enqueue)
    thread.start()
    pid = second.info.backend_pid
    wait_for(lambda: waiting_on_a_lock(check, pid), message="the second enqueue waits")
    assert not result
    if first_ends == "rollback":
        first.rollback()
    else:
        first.commit()
    thread.join(timeout=10)
    assert not thread.is_alive() and len(result) == 1
    return result[0]


# -- cancel racing a claim ----------------------------------------------------------------------


def test_cancel_racing_claims(pool: list[psycopg.Connection[Any]]) -> None:
    """Either cancelled and never run, or it was already running and will not run again
    (its run ends in a retry, a release, a reap or done: it ends cancelled, never back to
    pending)."""
    rng = random.Random(7)
    seen = {"cancelled first": 0, "claimed first": 0}
    for round_number in range(ROUNDS * 8):
        ending = ["retry", "release", "reap", "complete"][round_number % 4]
        seen[cancel_or_claim(pool, f"cancel-{round_number}", ending, rng)] += 1
    assert_invariants(pool[0])
    assert all(seen.values()), f"one side always won: {seen}"
    print(f"cancel racing a claim: {seen}")  # shown with -s


def cancel_or_claim(
    pool: list[psycopg.Connection[Any]], key: str, ending: str, rng: random.Random
) -> str:
    check = pool[0]
    job_id = pgbeat.enqueue(check, KIND, {}, job_key=key)
    # a random head start for either side, so both orders happen
    pauses = [rng.uniform(0, 0.003) for _ in range(2)]

    def cancel(conn: psycopg.Connection[Any]) -> Any:
        time.sleep(pauses[0])
        return in_transaction(conn, lambda: pgbeat.cancel(conn, KIND, key))

    def claim(conn: psycopg.Connection[Any]) -> list[Job]:
        time.sleep(pauses[1])
        return operations.claim_jobs(conn, 1, LEASE, [KIND])

    cancelled, runs = race(pool[1:3], [cancel, claim])
    assert cancelled is not None and cancelled.id == job_id
    if runs:
        assert cancelled.was_running
        finish(check, runs[0], ending)
        expected = "cancelled"  # asked to stop: even a run that completes ends cancelled
    else:
        assert not cancelled.was_running
        expected = "cancelled"
    status = check.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert status == (expected,)
    assert operations.claim_jobs(check, 5, LEASE, [KIND]) == []  # it never runs (again)
    return "claimed first" if runs else "cancelled first"


# -- retrying failed jobs while their keys are taken again ------------------------------------


def test_retry_failed_never_aborts_on_a_key_taken_meanwhile(
    database_url: str, pool: list[psycopg.Connection[Any]]
) -> None:
    check = pool[0]
    keys = [f"k{n}" for n in range(6)]
    for _ in range(ROUNDS):
        check.execute("DELETE FROM jobs")
        for key in keys:  # two failed jobs per key
            for _ in range(2):
                pgbeat.enqueue(check, KIND, {}, job_key=key)
                (run,) = operations.claim_jobs(check, 1, LEASE, [KIND])
                operations.fail_jobs(check, [(run, "boom")])

        def operator(conn: psycopg.Connection[Any]) -> list[int]:
            revived = []
            for _ in range(3):
                revived += actions.retry_failed(conn, KIND).ids
            return revived

        def application(conn: psycopg.Connection[Any], key: str) -> None:
            for _ in range(3):
                in_transaction(conn, lambda: pgbeat.enqueue(conn, KIND, {}, job_key=key))
                for run in operations.claim_jobs(conn, 1, LEASE, [KIND]):
                    operations.fail_jobs(conn, [(run, "boom")])

        work: list[Callable[[psycopg.Connection[Any]], Any]] = [operator, operator]
        work += [partial(application, key=key) for key in keys]
        race(pool[1:9], work)
        assert_invariants(check)


def test_the_live_key_index_is_what_keeps_one_live_job(conn: psycopg.Connection[Any]) -> None:
    """Plain SQL: a second live job for a key is refused, and a superseded one is not live."""
    insert = "INSERT INTO jobs (kind, payload, job_key, status) VALUES (%s, '{}', 'k', %s)"
    conn.execute(insert, (KIND, "pending"))
    with pytest.raises(psycopg.errors.UniqueViolation, match="jobs_live_key"):
        conn.execute(insert, (KIND, "running"))
    conn.execute("UPDATE jobs SET superseded_at = now() WHERE job_key = 'k'")
    conn.execute(insert, (KIND, "pending"))  # the key is free again
