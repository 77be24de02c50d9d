"""The executor without a database: slots, settling once, timeouts, async batches."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import pgbeat
from pgbeat.errors import Released, TimedOut
from pgbeat.job import Job
from pgbeat.worker.executor import Executor, Run
from tests.helpers import until_cancelled, wait_for

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def make_run(registry: pgbeat.Registry, kind: str, job_id: int, timeout: float = 60.0) -> Run:
    job = Job(job_id, kind, {}, 1, 3, NOW, NOW, None)
    started = time.monotonic()
    return Run(job, registry.get(kind), None, started + timeout, started)


class Recorded:
    def __init__(self) -> None:
        self.settled: list[Run] = []
        self.freed: list[int] = []
        self.lock = threading.Lock()

    def on_settled(self, run: Run) -> None:
        with self.lock:
            self.settled.append(run)

    def on_slot_freed(self, free: int) -> None:
        with self.lock:
            self.freed.append(free)


@pytest.fixture
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture
def executor(recorded: Recorded) -> Iterator[Executor]:
    executor = Executor(4, recorded.on_settled, recorded.on_slot_freed)
    yield executor
    executor.shutdown()


def test_a_batch_runs_and_each_run_settles_once_with_its_slot_freed(
    executor: Executor, recorded: Recorded
) -> None:
    registry = pgbeat.Registry()
    registry.register("ok", lambda payload: None)

    def fail(payload: Any) -> None:
        raise ValueError("no")

    registry.register("fails", fail)
    runs = [
        make_run(registry, "ok", 1),
        make_run(registry, "fails", 2),
        make_run(registry, "ok", 3),
    ]
    executor.submit_many(runs)
    wait_for(lambda: len(recorded.settled) == 3, timeout=5, message="three settled")
    wait_for(lambda: executor.free_slots() == 4, timeout=5, message="slots free")
    errors = {run.job.id: run.error for run in recorded.settled}
    assert errors[1] is None and errors[3] is None and isinstance(errors[2], ValueError)
    assert sorted(recorded.freed)[-1] == 4  # the last return freed every slot
    assert executor.unsettled() == []


def test_expire_waits_for_the_earliest_deadline_then_settles_as_timed_out(
    executor: Executor, recorded: Recorded
) -> None:
    release = threading.Event()
    registry = pgbeat.Registry()
    registry.register("slow", lambda payload: release.wait(10))
    short, long = make_run(registry, "slow", 1, timeout=0.2), make_run(registry, "slow", 2)
    executor.submit_many([short, long])
    assert executor.expire(time.monotonic()) == pytest.approx(short.deadline)
    assert recorded.settled == []
    wait_for(lambda: time.monotonic() > short.deadline, timeout=5, message="deadline")
    assert executor.expire(time.monotonic()) == pytest.approx(long.deadline)
    assert recorded.settled == [short] and isinstance(short.error, TimedOut)
    assert executor.busy() == 2  # a sync handler keeps its slot until it returns
    release.set()
    wait_for(lambda: executor.busy() == 0, timeout=5, message="slots back")
    assert recorded.settled == [short, long] and long.error is None  # short's late result dropped


def test_async_runs_start_together_and_cancel_when_abandoned(
    executor: Executor, recorded: Recorded
) -> None:
    started = threading.Event()
    registry = pgbeat.Registry()

    async def quick(payload: Any) -> None:
        await asyncio.sleep(0)

    async def stuck(payload: Any) -> None:
        started.set()
        await asyncio.sleep(30)

    registry.register("quick", quick)
    registry.register("stuck", stuck)
    runs = [make_run(registry, "quick", i) for i in range(3)]
    hanging = make_run(registry, "stuck", 9)
    executor.submit_many([*runs, hanging])
    wait_for(lambda: len(recorded.settled) == 3, timeout=5, message="quick ones settled")
    assert started.wait(5)
    assert executor.release_all() == [hanging]
    assert isinstance(hanging.error, Released)
    wait_for(lambda: executor.busy() == 0, timeout=5, message="the cancelled task freed its slot")


def test_results_of_sync_and_async_handlers_are_kept(
    executor: Executor, recorded: Recorded
) -> None:
    registry = pgbeat.Registry()

    async def async_value(payload: Any) -> dict[str, int]:
        return {"a": 1}

    registry.register("sync", lambda payload: [1, 2])
    registry.register("async", async_value)
    runs = [make_run(registry, "sync", 1), make_run(registry, "async", 2)]
    executor.submit_many(runs)
    wait_for(lambda: len(recorded.settled) == 2)
    assert {run.job.id: run.result for run in recorded.settled} == {1: [1, 2], 2: {"a": 1}}


def test_cancel_settles_a_running_run_at_once_and_tells_its_handler(
    executor: Executor, recorded: Recorded
) -> None:
    registry = pgbeat.Registry()
    heard = threading.Event()
    registry.register("forever", until_cancelled(heard))
    run = make_run(registry, "forever", 7)
    executor.submit_many([run])
    wait_for(lambda: run._task is not None)
    assert executor.cancel({7, 8}) == 1
    assert recorded.settled == [run]
    assert type(run.error).__name__ == "CancelRequested"
    wait_for(heard.is_set, message="the task heard CancelledError")
    wait_for(lambda: executor.busy() == 0)
    assert executor.cancel({7}) == 0  # settled once


def submit_short_leased(executor: Executor, job_id: int) -> tuple[Run, threading.Event]:
    """A run submitted to ``executor`` whose lease lapses in 50 ms, and the gate its handler
    waits for (10 s at most)."""
    registry = pgbeat.Registry()
    gate = threading.Event()
    registry.register("wait", lambda payload: gate.wait(10))
    run = make_run(registry, "wait", job_id)
    run.lease_expires = time.monotonic() + 0.05
    executor.submit_many([run])
    return run, gate


def test_a_run_whose_lease_lapsed_is_given_up(executor: Executor, recorded: Recorded) -> None:
    run, gate = submit_short_leased(executor, 3)
    wait_for(lambda: executor.expire(time.monotonic()) is None and recorded.settled)
    assert isinstance(run.error, TimedOut) and "lease" in str(run.error)
    gate.set()


def test_a_renewed_lease_keeps_the_run_going(executor: Executor, recorded: Recorded) -> None:
    run, gate = submit_short_leased(executor, 4)
    executor.lease_renewed([run], time.monotonic() + 60)
    assert executor.expire(time.monotonic() + 1) is not None
    assert recorded.settled == []
    gate.set()
    wait_for(lambda: recorded.settled == [run])
    assert run.error is None


def test_blocking_handlers_run_together_on_every_slot(
    recorded: Recorded,
) -> None:
    """40 handlers that each wait for all 40 to be running only finish if every one of
    them got a thread of its own."""
    slots = 40
    executor = Executor(slots, recorded.on_settled, recorded.on_slot_freed)
    together = threading.Barrier(slots, timeout=10)
    registry = pgbeat.Registry()
    registry.register("meet", lambda payload: together.wait())
    try:
        executor.submit_many([make_run(registry, "meet", i) for i in range(slots)])
        wait_for(lambda: len(recorded.settled) == slots, timeout=15, message="all settled")
        assert [run.error for run in recorded.settled] == [None] * slots
    finally:
        executor.shutdown()


def test_blocked_threads_make_room_for_a_later_batch(recorded: Recorded) -> None:
    """A batch submitted while other runs block in their handlers runs beside them."""
    executor = Executor(8, recorded.on_settled, recorded.on_slot_freed)
    release = threading.Event()
    registry = pgbeat.Registry()
    registry.register("hold", lambda payload: release.wait(10))
    met = threading.Barrier(4, timeout=10)
    registry.register("meet", lambda payload: met.wait())
    try:
        executor.submit_many([make_run(registry, "hold", i) for i in range(4)])
        wait_for(lambda: executor.busy() == 4, timeout=5, message="four held")
        executor.submit_many([make_run(registry, "meet", 10 + i) for i in range(4)])
        wait_for(lambda: len(recorded.settled) == 4, timeout=15, message="the four met")
        assert {run.job.id for run in recorded.settled} == {10, 11, 12, 13}
        release.set()
        wait_for(lambda: len(recorded.settled) == 8, timeout=15, message="all settled")
    finally:
        release.set()
        executor.shutdown()
