"""The outcome writer on a real database: batches, the time window, outages, shutdown."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.connections import Connector
from pgbeat.observe.metrics import Metrics
from pgbeat.worker import operations
from pgbeat.worker.executor import Run
from pgbeat.worker.flusher import OutcomeFlusher
from pgbeat.worker.outcomes import OutcomeBuffer
from pgbeat.worker.sessions import warm_outcome_session
from tests.helpers import statuses, wait_for

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=1"


def finished_runs(conn: psycopg.Connection[Any], count: int, queue: str = "default") -> list[Run]:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", queue=queue) for _ in range(count)])
    jobs = operations.claim_jobs(conn, count, timedelta(minutes=5), None)
    now = time.monotonic()
    return [Run(job, None, None, now + 60, now, settled=True, finished_at=now) for job in jobs]


class Writer:
    """An OutcomeFlusher with a recorder, started, and closed at the end of the test."""

    def __init__(
        self, url: str, batch: int, window: float, freeing_window: float | None = None
    ) -> None:
        self.recorder = OutcomeBuffer(pgbeat.BackoffPolicy(), random.Random(1), Metrics())
        self.failures: list[str] = []
        self.writer = OutcomeFlusher(
            Connector(url, "test-outcomes"),
            self.recorder,
            batch=batch,
            window=window,
            freeing_window=freeing_window,
            on_failure=lambda: self.failures.append("failed"),
        )
        self.writer.start()

    def add(self, runs: list[Run]) -> None:
        for run in runs:  # as the worker pokes (worker._on_settled)
            waiting, first_freeing = self.recorder.add(run)
            if waiting == 1 or first_freeing:
                self.writer.poke()
        self.writer.poke()


@pytest.fixture
def make_writer() -> Iterator[Any]:
    made: list[Writer] = []

    def make(
        url: str, batch: int = 10, window: float = 0.002, freeing_window: float | None = None
    ) -> Writer:
        made.append(Writer(url, batch, window, freeing_window))
        return made[-1]

    yield make
    for writer in made:
        writer.writer.close()


def writes(conn: psycopg.Connection[Any]) -> int:
    """How many statements wrote the finished jobs (each sets finished_at to its now())."""
    row = conn.execute("SELECT count(DISTINCT finished_at) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_a_full_batch_is_written_at_once(
    database_url: str, conn: psycopg.Connection[Any], make_writer: Any
) -> None:
    writer = make_writer(database_url, batch=10, window=3600.0)  # the window never ends
    writer.add(finished_runs(conn, 3))  # these wait for the batch to fill...
    writer.add(finished_runs(conn, 7))
    wait_for(lambda: statuses(conn) == {"done": 10}, timeout=5, message="batch written")
    assert writes(conn) == 1  # ...and share its write


def test_a_partial_batch_is_written_when_the_window_ends(
    database_url: str, conn: psycopg.Connection[Any], make_writer: Any
) -> None:
    writer = make_writer(database_url, batch=100, window=0.2)
    writer.add(finished_runs(conn, 3))
    wait_for(lambda: statuses(conn) == {"done": 3}, timeout=5, message="partial batch written")
    assert writes(conn) == 1


def test_a_limited_queues_outcome_is_written_within_its_own_short_window(
    database_url: str, conn: psycopg.Connection[Any], make_writer: Any
) -> None:
    """A watched (limited) queue's slot is free for a claim only once its job's outcome is
    written: it waits the short window, not the batch's; other outcomes wait for theirs."""
    writer = make_writer(database_url, batch=100, window=3600.0, freeing_window=0.001)
    writer.recorder.watched = frozenset({"limited"})
    writer.add(finished_runs(conn, 2))  # of an unlimited queue: they wait for the batch
    assert writer.recorder.freeing_since() is None
    limited = finished_runs(conn, 1, queue="limited")
    writer.add(limited)  # the first of a watched queue: written at once, the others with it
    wait_for(lambda: statuses(conn) == {"done": 3}, timeout=5, message="freeing write")
    assert writes(conn) == 1 and writer.recorder.freeing_since() is None
    writer.add(finished_runs(conn, 2))  # unlimited again: they wait for the batch
    assert statuses(conn) == {"done": 3, "running": 2}


def test_close_writes_what_is_left(
    database_url: str, conn: psycopg.Connection[Any], make_writer: Any
) -> None:
    writer = make_writer(database_url, batch=100, window=3600.0)
    writer.add(finished_runs(conn, 5))
    assert writer.writer.close() == 0
    assert statuses(conn) == {"done": 5}


@pytest.mark.slow
def test_close_gives_up_on_an_unreachable_database_and_counts_the_loss(
    conn: psycopg.Connection[Any], make_writer: Any
) -> None:
    writer = make_writer(UNREACHABLE, batch=100, window=3600.0)
    writer.add(finished_runs(conn, 4))
    unwritten: list[int] = []
    closing = threading.Thread(target=lambda: unwritten.append(writer.writer.close()))
    closing.start()
    wait_for(lambda: not closing.is_alive(), timeout=30, message="close to give up")
    assert unwritten == [4]  # kept, not dropped: their leases expire, they run again
    assert writer.failures == []  # an outage is not a bug: the worker keeps going


def test_an_unexpected_error_is_handed_to_the_worker(
    empty_database_url: str, conn: psycopg.Connection[Any], make_writer: Any
) -> None:
    writer = make_writer(empty_database_url, batch=1)  # no jobs table there: a bug, not an outage
    writer.add(finished_runs(conn, 1))
    wait_for(lambda: writer.failures == ["failed"], timeout=5, message="failure reported")
    assert isinstance(writer.writer.failure, psycopg.errors.UndefinedTable)
    assert writer.writer.close() == 1  # the outcome is still there, not dropped


def test_a_write_names_the_watched_queues_its_jobs_left(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A limited queue's slot is free once its job's outcome is committed: the writer tells
    the claiming loop which watched queues had jobs leave running, after the write."""
    freed: list[Mapping[str, float]] = []
    recorder = OutcomeBuffer(pgbeat.BackoffPolicy(), random.Random(1), Metrics())
    writer = OutcomeFlusher(
        Connector(database_url, "test-outcomes"),
        recorder,
        batch=3,
        window=3600.0,
        on_failure=lambda: None,
        on_freed=freed.append,
    )
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", queue=q) for q in ("api", "bulk", "default")])
    jobs = operations.claim_jobs(conn, 3, timedelta(minutes=5), None)
    now = time.monotonic()
    recorder.watched = frozenset({"api", "bulk", "quiet"})
    writer.start()
    try:
        for job in jobs:
            ran = {"api": 0.5, "bulk": 0.25, "default": 0.125}[job.queue]
            recorder.add(Run(job, None, None, now + 60, now - ran, settled=True, finished_at=now))
        writer.poke()
        wait_for(lambda: freed)
        assert freed == [{"api": 0.5, "bulk": 0.25}]  # each with its jobs' longest run
        assert statuses(conn) == {"done": 3}  # written before it was said
    finally:
        writer.close()


def test_a_new_outcome_connection_calls_the_workflow_advance_once_on_nothing(
    database_url: str,
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE advance_calls (ended bigint[])")
        conn.execute(
            "CREATE OR REPLACE FUNCTION pgbeat_workflow_advance_round(ended bigint[])"
            " RETURNS bigint[] LANGUAGE sql AS $$ INSERT INTO advance_calls VALUES (ended)"
            " RETURNING '{}'::bigint[] $$"
        )
        warm_outcome_session(conn)  # a step that cannot exist: plans the round's statements
        assert conn.execute("SELECT ended FROM advance_calls").fetchall() == [([0],)]


def test_a_database_without_the_advance_leaves_the_connection_usable(
    empty_database_url: str,
) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        warm_outcome_session(conn)  # no pgbeat schema here: the function does not exist
        assert conn.execute("SELECT 1").fetchone() == (1,)
