"""BackgroundLoop: pauses, wake-ups, stopping, exit hooks and errors, on real threads."""

from __future__ import annotations

import threading
import time

import pytest

from pgbeat.background import UNTIL_WOKEN, BackgroundLoop

DEADLINE = 5.0  # seconds a thread gets to do what the test waits for; never reached if it works


def test_run_calls_the_step_until_it_returns_none_then_the_exit_hook() -> None:
    calls: list[int] = []
    exits: list[str] = []

    def step() -> float | None:
        calls.append(len(calls))
        return None if len(calls) == 3 else 0

    BackgroundLoop("t", step, on_exit=lambda: exits.append("exit")).run()
    assert calls == [0, 1, 2]
    assert exits == ["exit"]


def test_an_error_in_the_foreground_propagates_after_the_exit_hook() -> None:
    exits: list[str] = []

    def step() -> float | None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        BackgroundLoop("t", step, on_exit=lambda: exits.append("exit")).run()
    assert exits == ["exit"]


def test_wake_ends_a_pause_that_would_never_end_otherwise() -> None:
    steps = threading.Semaphore(0)

    def step() -> float:
        steps.release()
        return UNTIL_WOKEN

    loop = BackgroundLoop("t", step)
    loop.start()
    try:
        assert steps.acquire(timeout=DEADLINE)
        loop.wake()
        assert steps.acquire(timeout=DEADLINE), "the wake did not end the pause"
    finally:
        loop.stop()
        assert loop.join(DEADLINE)


def test_a_wake_during_the_step_is_not_lost() -> None:
    count = 0
    second = threading.Event()
    loop: BackgroundLoop

    def step() -> float | None:
        nonlocal count
        count += 1
        if count == 1:
            loop.wake()  # arrives while the step runs: the next pause must end at once
            return UNTIL_WOKEN
        second.set()
        return None

    loop = BackgroundLoop("t", step)
    loop.start()
    assert second.wait(DEADLINE), "the wake sent during the step was lost"
    assert loop.join(DEADLINE)


def test_stop_ends_a_long_pause_and_runs_no_further_step() -> None:
    count = 0
    exited = threading.Event()

    def step() -> float | None:
        nonlocal count
        count += 1
        return 3600.0

    loop = BackgroundLoop("t", step, on_exit=exited.set)
    loop.start()
    loop.stop()
    assert loop.join(DEADLINE)
    assert exited.is_set()
    assert count <= 1
    assert not loop.is_alive()


def test_an_error_in_a_thread_is_kept_and_handed_over() -> None:
    handed: list[BaseException] = []
    error = ValueError("unexpected")

    def step() -> float | None:
        raise error

    loop = BackgroundLoop("t", step, on_failure=handed.append)
    loop.start()
    assert loop.join(DEADLINE)
    assert loop.failure is error
    assert handed == [error]


def test_join_of_a_loop_never_started_returns_at_once() -> None:
    assert BackgroundLoop("t", lambda: None).join(0)


def test_pause_outside_a_step_ends_when_woken() -> None:
    loop = BackgroundLoop("t", lambda: None)
    waker = threading.Timer(0.01, loop.wake)
    started = time.monotonic()
    waker.start()
    loop.pause(DEADLINE)
    assert time.monotonic() - started < DEADLINE / 2, "the pause ran to its end"
