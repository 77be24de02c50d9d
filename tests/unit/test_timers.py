"""The claiming loop's timers: when it looks for work, reaps, and how long it may sleep."""

from __future__ import annotations

import pytest

from pgbeat.worker.timers import MIN_DUE_WAIT, ClaimTimers


def timers(**state: float | bool | None) -> ClaimTimers:
    return ClaimTimers(poll_every=1.0, reap_every=10.0, window=0.002, **state)  # type: ignore[arg-type]


def test_a_new_loop_claims_and_reaps_at_once() -> None:
    fresh = timers()
    assert fresh.maybe_more
    assert fresh.reap_due(0.0)


@pytest.mark.parametrize(
    ("notified", "now", "next_due", "looks"),
    [
        (True, 100.0, None, True),  # a notification
        (False, 101.0, None, True),  # the poll timer (next_poll = 101)
        (False, 100.5, 100.5, True),  # a delayed job fell due
        (False, 100.5, 100.6, False),  # nothing yet
        (False, 100.5, None, False),
    ],
)
def test_reasons_to_look_for_work(
    notified: bool, now: float, next_due: float | None, looks: bool
) -> None:
    t = timers(next_poll=101.0, next_due=next_due, maybe_more=False)
    t.note(now, notified)
    assert t.maybe_more is looks


def test_a_short_claim_stops_looking_until_the_next_poll() -> None:
    t = timers()
    t.claimed(50.0, asked=10, got=3)
    assert not t.maybe_more
    assert t.next_poll == 51.0
    t.claimed(51.0, asked=10, got=10)
    assert t.maybe_more


def test_the_next_due_job_is_never_awaited_in_a_busy_spin() -> None:
    t = timers()
    t.next_job_in(10.0, -3.0)  # due already: another worker holds it
    assert t.next_due == 10.0 + MIN_DUE_WAIT
    t.next_job_in(10.0, 4.0)
    assert t.next_due == 14.0
    t.next_job_in(10.0, None)
    assert t.next_due is None
    t.next_job_in(10.0, 4.0)
    t.claimed(11.0, asked=5, got=5)
    assert t.next_due is None  # a claim forgets it: the next short claim asks again


def test_reaping_sets_the_next_reap() -> None:
    t = timers()
    t.reaped(5.0)
    assert not t.reap_due(14.9)
    assert t.reap_due(15.0)


@pytest.mark.parametrize(
    ("state", "deadline", "free", "wake"),
    [
        # no free slot: only the reaper and the earliest timeout matter
        ({"maybe_more": True}, None, False, 30.0),
        ({"maybe_more": True}, 25.0, False, 25.0),
        # free slots and more work likely: the claim window
        ({"maybe_more": True}, None, True, 20.002),
        # free slots and nothing to claim: the poll timer, or a delayed job falling due
        ({"maybe_more": False}, None, True, 21.0),
        ({"maybe_more": False, "next_due": 20.5}, None, True, 20.5),
        ({"maybe_more": False, "next_due": 20.5}, 20.1, True, 20.1),
    ],
)
def test_next_wake(
    state: dict[str, float | bool], deadline: float | None, free: bool, wake: float
) -> None:
    t = timers(last_claim=20.0, next_poll=21.0, next_reap=30.0, **state)
    assert t.next_wake(deadline, free) == pytest.approx(wake)


def test_the_claim_window() -> None:
    t = timers(last_claim=20.0)
    assert not t.window_ended(20.001)
    assert t.window_ended(20.0025)


@pytest.mark.parametrize(
    ("maybe_more", "now", "free", "size"),
    [
        (True, 100.0, 0, 0),  # no slot free
        (False, 100.0, 10, 0),  # a short claim: nothing to look for until a reason comes
        (True, 100.0, 4, 4),  # half the slots (the threshold): claim for them at once
        (True, 100.0, 10, 8),  # every slot free: as many as a claim takes (batch)
        (True, 100.0005, 1, 0),  # one slot free, within the window: await a few more
        (True, 100.003, 1, 1),  # the window ended: claim for the one
        (True, 100.0005, 3, 0),
    ],
)
def test_the_claims_size(maybe_more: bool, now: float, free: int, size: int) -> None:
    loop = timers(maybe_more=maybe_more, last_claim=100.0)
    assert loop.claim_size(now, free=free, threshold=4, batch=8) == size
