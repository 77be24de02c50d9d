"""Flow control in the claim, in-process against a real database: order, queues, pauses,
concurrency and rate limits whole-queue and per key, reaped slots, unreadable rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

import pgbeat
from pgbeat.db.named_statements import NamedStatements
from pgbeat.db.sql.jobs import claim_limited as limited_sql
from pgbeat.worker import claiming, limited_claims, locked_claim, operations
from tests.helpers import noop_registry, wait_for
from tests.helpers import running_worker as running

LEASE = timedelta(minutes=5)


def claim(conn: psycopg.Connection[Any], limit: int = 100, **kw: Any) -> list[pgbeat.Job]:
    return operations.claim_jobs(conn, limit, kw.pop("lease", LEASE), None, **kw)


def enqueue_many(conn: psycopg.Connection[Any], count: int, **fields: Any) -> list[int]:
    ids: list[int] = pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("noop", **fields) for _ in range(count)]
    )
    return ids


def finish(conn: psycopg.Connection[Any], jobs: list[pgbeat.Job]) -> None:
    operations.complete_jobs(conn, jobs)


def test_claim_order_is_priority_then_run_at_then_id(conn: psycopg.Connection[Any]) -> None:
    past = datetime(2020, 1, 1, tzinfo=UTC)
    low = pgbeat.enqueue(conn, "noop", priority=-5, run_at=past)
    default_late = pgbeat.enqueue(conn, "noop")
    default_early = pgbeat.enqueue(conn, "noop", run_at=past)
    high = pgbeat.enqueue(conn, "noop", priority=10)
    default_tie = pgbeat.enqueue(conn, "noop", run_at=past)
    order = [job.id for _ in range(5) for job in claim(conn, 1)]
    assert order == [high, default_early, default_tie, default_late, low]


def test_claimed_jobs_carry_queue_priority_and_limit_key(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue(conn, "noop", {"a": 1}, queue="mail", priority=3, limit_key="customer:1")
    (job,) = claim(conn)
    assert (job.queue, job.priority, job.limit_key, job.payload) == (
        "mail",
        3,
        "customer:1",
        {"a": 1},
    )


def test_workers_take_only_their_queues(conn: psycopg.Connection[Any]) -> None:
    mail = enqueue_many(conn, 2, queue="mail")
    enqueue_many(conn, 3, queue="reports")
    assert sorted(job.id for job in claim(conn, queues=["mail"])) == mail
    assert len(claim(conn, queues=["mail", "other"])) == 0
    assert len(claim(conn)) == 3


def test_a_paused_queue_starts_nothing_until_resumed(conn: psycopg.Connection[Any]) -> None:
    enqueue_many(conn, 3, queue="reports")
    other = enqueue_many(conn, 2)
    pgbeat.pause_queue(conn, "reports")
    assert sorted(job.id for job in claim(conn)) == other
    assert claim(conn, queues=["reports"]) == []
    pgbeat.resume_queue(conn, "reports")
    assert len(claim(conn)) == 3


def test_queue_concurrency_counts_running_jobs(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "reports", concurrency=3)
    enqueue_many(conn, 10, queue="reports")
    free = enqueue_many(conn, 4)
    first = claim(conn)
    assert sum(job.queue == "reports" for job in first) == 3
    assert {job.id for job in first if job.queue == "default"} == set(free)
    assert claim(conn) == []
    finish(conn, [job for job in first if job.queue == "reports"][:2])
    assert len(claim(conn)) == 2


def test_a_failed_limited_claim_leaves_no_transaction_open(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A limited claim sends its row lock and the claim in one pipeline, one implicit
    transaction: when one fails (here the row lock times out), the transaction is rolled
    back, nothing is claimed, and the next claim on the same connection runs."""
    pgbeat.configure_queue(conn, "reports", concurrency=3)
    enqueue_many(conn, 2, queue="reports")
    with (
        psycopg.connect(database_url, autocommit=True) as worker,
        psycopg.connect(database_url) as holder,
    ):
        holder.execute("SELECT 1 FROM pgbeat_queues WHERE name = 'reports' FOR UPDATE")
        worker.execute("SET lock_timeout = '50ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            claim(worker)
        assert worker.info.transaction_status == TransactionStatus.IDLE
        assert conn.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone() == (0,)
        holder.rollback()
        assert len(claim(worker)) == 2


# A claim statement that says, as its ``mode``, whether the row lock before it took a
# transaction id in the same transaction (locking a row assigns one), and, as its
# ``last_key``, whether the lock is still held: what the lock serialises.
_LOCK_SEEN = """
SELECT NULL::bigint AS id, NULL AS kind, NULL AS payload, NULL AS attempt,
       NULL AS max_attempts, NULL AS run_at, NULL AS created_at, NULL AS unique_key,
       NULL AS queue, NULL AS priority, NULL AS limit_key, NULL AS job_key, NULL AS tags,
       0 AS budget, NULL AS rate_left, NULL AS rate_wait,
       (pg_current_xact_id_if_assigned() IS NOT NULL)::text AS mode, NULL AS timed,
       NULL AS scanned,
       (SELECT count(*) FROM pg_locks
        WHERE pid = pg_backend_pid() AND locktype = 'transactionid' AND granted)::text
           AS last_key
WHERE %(queue)s::text IS NOT NULL"""


@pytest.mark.parametrize("named", [True, False], ids=["named", "pipelined"])
def test_a_limited_claim_runs_in_the_transaction_of_its_row_lock(
    conn: psycopg.Connection[Any], named: bool
) -> None:
    """No BEGIN or COMMIT is sent: the row lock and the claim after it are one implicit
    transaction (the lock still held by the claim), committed at the simple query's or
    the pipeline's end."""
    pgbeat.configure_queue(conn, "reports", concurrency=3)
    conn.execute("SET lock_timeout = '5s'")
    statements = NamedStatements() if named else None
    for _ in range(2):  # the second time with both statements prepared
        rows, budget = locked_claim.claim_locked(
            conn, _LOCK_SEEN, {"queue": "reports"}, None, statements
        )
        assert rows == []
        assert budget is not None
        assert budget[3] == "true"  # the lock's transaction id, seen by the claim
        assert budget[6] == "1"  # and held
        assert conn.info.transaction_status == TransactionStatus.IDLE


def test_a_batch_never_takes_two_jobs_of_a_saturated_key(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", key_concurrency=1)
    for key in ("a", "b", "c"):
        enqueue_many(conn, 5, queue="api", limit_key=key)
    unkeyed = enqueue_many(conn, 2, queue="api")
    first = claim(conn)
    assert sorted(job.limit_key or "" for job in first) == ["", "", "a", "b", "c"]
    assert {job.id for job in first if job.limit_key is None} == set(unkeyed)
    assert claim(conn) == []
    finish(conn, [job for job in first if job.limit_key == "b"])
    (again,) = claim(conn)
    assert again.limit_key == "b"


def test_saturated_keys_clogging_the_backlog_head_do_not_hide_the_others(
    conn: psycopg.Connection[Any],
) -> None:
    pgbeat.configure_queue(conn, "api", key_concurrency=1)
    enqueue_many(conn, 300, queue="api", limit_key="a")  # the first 256+ rows: one key
    for key in ("b", "c", "d"):
        enqueue_many(conn, 2, queue="api", limit_key=key)
    first = claim(conn)
    assert sorted(job.limit_key or "" for job in first) == ["a", "b", "c", "d"]
    assert claim(conn) == []


def test_key_concurrency_within_queue_concurrency(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", key_concurrency=2, concurrency=3)
    for key in ("a", "b"):
        enqueue_many(conn, 5, queue="api", limit_key=key)
    jobs = claim(conn)
    assert len(jobs) == 3
    assert max(sum(j.limit_key == k for j in jobs) for k in ("a", "b")) == 2


def test_queue_rate_counts_starts_in_the_window(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", rate="4/1h")
    enqueue_many(conn, 10, queue="api")
    first = claim(conn)
    assert len(first) == 4
    finish(conn, first)  # finished jobs still count: the window is of starts
    assert claim(conn) == []
    conn.execute("UPDATE pgbeat_queue_starts SET started_at = started_at - interval '2 hours'")
    assert len(claim(conn)) == 4


def test_key_rate_counts_starts_per_key(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", key_rate="2/1h")
    for key in ("a", "b"):
        enqueue_many(conn, 5, queue="api", limit_key=key)
    jobs = claim(conn)
    assert sorted(job.limit_key or "" for job in jobs) == ["a", "a", "b", "b"]
    finish(conn, jobs)
    assert claim(conn) == []


def test_a_key_budget_counts_its_running_jobs_and_its_starts_apart(
    conn: psycopg.Connection[Any],
) -> None:
    """key_concurrency counts the key's running jobs with the batch's, key_rate its starts
    with the batch's: each limit against its own count (the head claim numbers both in one
    window per key)."""
    pgbeat.configure_queue(conn, "api", key_concurrency=3, key_rate="4/1h")
    enqueue_many(conn, 10, queue="api", limit_key="a")
    first = claim(conn, limit=2)
    assert len(first) == 2  # running 2, starts 2
    (second,) = claim(conn)  # concurrency leaves 1, the rate 2
    finish(conn, first)
    (third,) = claim(conn)  # running 1, starts 3: concurrency leaves 2, the rate 1
    assert claim(conn) == []
    finish(conn, [second, third])
    assert claim(conn) == []  # nothing runs, the rate is spent


def test_a_reaped_lease_frees_its_slot(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", concurrency=1)
    enqueue_many(conn, 2, queue="api")
    assert len(claim(conn, lease=timedelta(milliseconds=1))) == 1
    assert claim(conn) == []  # the slot is held until the lease is reaped
    wait_for(lambda: operations.reap_expired(conn), message="the lease reaped")
    assert len(claim(conn)) == 1


def test_clearing_limits_returns_the_queue_to_the_fast_path(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", concurrency=1)
    enqueue_many(conn, 3, queue="api")
    assert len(claim(conn)) == 1
    settings = pgbeat.configure_queue(conn, "api", concurrency=None)
    assert settings.concurrency is None
    assert len(claim(conn)) == 2


def test_configure_keeps_the_limits_it_was_not_given(conn: psycopg.Connection[Any]) -> None:
    pgbeat.configure_queue(conn, "api", concurrency=5, rate="10/1s")
    settings = pgbeat.configure_queue(conn, "api", key_rate="1/500ms")
    assert (settings.concurrency, settings.rate, settings.key_rate) == (5, "10/1s", "1/500ms")


def test_settings_follow_the_callers_transaction(database_url: str) -> None:
    with psycopg.connect(database_url) as tx:
        pgbeat.configure_queue(tx, "api", concurrency=2)
        pgbeat.pause_queue(tx, "mail")
        tx.rollback()
        assert tx.execute("SELECT count(*) FROM pgbeat_queues").fetchone() == (0,)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: pgbeat.configure_queue(c, "q", concurrency=-1), "concurrency"),
        (lambda c: pgbeat.configure_queue(c, "q", rate="5/0s"), "rate"),
        (lambda c: pgbeat.configure_queue(c, "q", rate="banana"), "rate"),
        (lambda c: pgbeat.configure_queue(c, "q", key_rate="0/1s"), "key_rate"),
        (lambda c: pgbeat.configure_queue(c, "q"), "at least one"),
        (lambda c: pgbeat.configure_queue(c, "x" * 201, concurrency=1), "queue"),
        (lambda c: pgbeat.pause_queue(c, ""), "queue"),
        (lambda c: pgbeat.enqueue(c, "noop", priority=40_000), "priority"),
        (lambda c: pgbeat.enqueue(c, "noop", queue="q" * 201), "queue"),
        (lambda c: pgbeat.enqueue(c, "noop", limit_key=""), "limit_key"),
        (lambda c: pgbeat.enqueue_many(c, [pgbeat.NewJob("n", priority=-40_000)]), "priority"),
    ],
)
def test_bad_values_raise_before_any_statement(
    conn: psycopg.Connection[Any], call: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        call(conn)
    assert conn.execute("SELECT count(*) FROM pgbeat_queues").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_keyed_enqueue_carries_the_flow_fields(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue(conn, "noop", job_key="k", queue="mail", priority=2, limit_key="c1")
    pgbeat.enqueue(conn, "noop", job_key="k", on_conflict="replace", queue="mail", priority=7)
    row = conn.execute("SELECT queue, priority, limit_key, count(*) OVER () FROM jobs").fetchone()
    assert row == ("mail", 7, None, 1)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("run_at", "'4713-01-01 BC'"),
        ("run_at", "'-infinity'"),
        ("created_at", "'10000-01-01'"),
        ("created_at", "'infinity'"),
        ("max_attempts", "8"),
    ],
)
def test_a_row_the_worker_cannot_read_fails_alone(
    conn: psycopg.Connection[Any], column: str, value: str
) -> None:
    healthy = enqueue_many(conn, 3)
    payload = "'{}'"
    if column == "max_attempts":  # a payload nested deeper than Python's decoder goes
        payload = "(repeat('[', 5000) || repeat(']', 5000))::jsonb"
    (bad,) = conn.execute(
        f"INSERT INTO jobs (kind, payload, {column}) "  # noqa: S608
        f"VALUES ('noop', {payload}, {value}) RETURNING id"
    ).fetchone() or (None,)
    claimed = claim(conn)
    assert sorted(job.id for job in claimed) == healthy
    status, error = conn.execute(
        "SELECT status, last_error FROM jobs WHERE id = %s", (bad,)
    ).fetchone() or (None, None)
    assert status == "failed"
    assert "could not read" in str(error)


@pytest.mark.slow
def test_a_real_worker_runs_the_healthy_jobs_next_to_a_bad_row(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    healthy = enqueue_many(conn, 5)
    conn.execute("INSERT INTO jobs (kind, payload, run_at) VALUES ('noop', '{}', '4713-01-01 BC')")
    conn.execute(
        "INSERT INTO jobs (kind, payload) VALUES "
        "('noop', (repeat('[', 5000) || repeat(']', 5000))::jsonb)"
    )
    with running(database_url, noop_registry("noop")):
        wait_for(
            lambda: (
                conn.execute(
                    "SELECT count(*) FILTER (WHERE status = 'done'), "
                    "count(*) FILTER (WHERE status = 'failed') FROM jobs"
                ).fetchone()
                == (5, 2)
            ),
            message="healthy jobs done, bad rows failed",
        )
    assert len(healthy) == 5


@pytest.mark.slow
def test_a_worker_claims_only_its_registrys_kinds(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    new = pgbeat.enqueue(conn, "new_kind")
    done = pgbeat.enqueue(conn, "old")
    with running(database_url, noop_registry("old")):
        wait_for(
            lambda: (
                conn.execute("SELECT status FROM jobs WHERE id = %s", (done,)).fetchone()
                == ("done",)
            ),
            message="the known kind done",
        )
        # Claims after the known kind's were made, and the other job is still pending.
        assert conn.execute("SELECT status FROM jobs WHERE id = %s", (new,)).fetchone() == (
            "pending",
        )


def test_a_keyed_head_shrinks_to_what_it_needed_and_a_clogged_one_still_serves_the_others(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a head claim that filled its budget, the next reads about the rows it needed
    (plus HEAD_SCAN_SLACK), not 2 x the claim; saturated keys clogging that smaller head
    send the claim on key by key, and the next head is the full one again."""
    scans: list[int] = []

    def claim_locked(
        c: psycopg.Connection[Any],
        statement: Any,
        params: dict[str, Any],
        kept: Any = None,
        named: Any = None,
    ) -> Any:
        if statement is limited_sql.JOBS_CLAIM_LIMITED_HEAD:
            scans.append(params["scan"])
        return locked_claim.claim_locked(c, statement, params, kept, named)

    monkeypatch.setattr(limited_claims, "claim_locked", claim_locked)
    pgbeat.configure_queue(conn, "api", key_concurrency=1)
    for i in range(20):
        enqueue_many(conn, 1, queue="api", limit_key=f"k{i:02}")
    claimer = claiming.Claimer(LEASE)
    first = claimer.claim(conn, 10)
    assert len({job.limit_key for job in first}) == 10
    enqueue_many(conn, 100, queue="api", limit_key="a", priority=1)  # ahead of every k
    claimer.jobs_arrived()  # the listener's notification: the next claim reads the head
    second = claimer.claim(conn, 10)
    taken = {job.limit_key for job in second}
    assert taken == {"a"} | {f"k{i}" for i in range(10, 19)} and len(second) == 10, taken
    finish(conn, second)
    claimer.claim(conn, 10)
    full = max(limited_claims.HEAD_SCAN_MIN, limited_claims.HEAD_SCAN_FACTOR * 10)
    assert scans == [full, 10 + limited_claims.HEAD_SCAN_SLACK, full], scans
