"""The pace of a fair queue's steps (worker/fair_steps.py): job length and round trip in,
steps out. Times are plain numbers of seconds."""

from __future__ import annotations

import pytest

from pgbeat.worker.fair_steps import (
    GROW,
    LONG_JOB,
    ROUND_TRIPS_PER_STEP,
    SHRINK,
    SMOOTHING,
    STEPS_MAX,
    FairSteps,
)


def _paced(job: float, round_trip: float) -> FairSteps:
    steps = FairSteps()
    steps.claimed("api", 0.0, round_trip)
    steps.ran({"api": job})
    return steps


def test_one_step_until_the_queue_was_measured() -> None:
    steps = FairSteps()
    assert steps.steps("api") == 1
    steps.claimed("api", 0.0, 0.001)
    assert steps.steps("api") == 1  # no job of it ended yet: its length is unknown
    steps.ran({"other": 1.0})
    assert steps.steps("api") == 1
    fresh = FairSteps()
    fresh.ran({"api": 1.0})
    assert fresh.steps("api") == 1  # no claim timed yet


@pytest.mark.parametrize(
    ("job", "round_trip", "expected"),
    [
        (0.0001, 0.001, 1),  # no-op jobs: every slot at once, the claims set the pace
        (0.0019, 0.001, 1),  # shorter than LONG_JOB round trips
        (0.002, 0.001, 4),  # long enough: a step every half round trip
        (0.021, 0.004, 10),
        (0.020, 0.001, STEPS_MAX),  # 40 fit: capped
        (60.0, 0.001, STEPS_MAX),
        (0.020, 0.0, 1),  # a round trip too short to time: no steps
    ],
)
def test_steps_follow_the_job_length_in_round_trips(
    job: float, round_trip: float, expected: int
) -> None:
    assert _paced(job, round_trip).steps("api") == expected


def test_the_constants_agree_with_the_table_above() -> None:
    assert (LONG_JOB, ROUND_TRIPS_PER_STEP, STEPS_MAX) == (2, 0.5, 25)


def test_round_trips_move_towards_new_samples() -> None:
    steps = _paced(0.020, 0.001)
    steps.claimed("api", 5.0, 5.004)  # slower: 0.001 + 0.2 * 0.003
    round_trip = 0.001 + SMOOTHING * 0.003
    assert steps.steps("api") == min(STEPS_MAX, int(0.020 / (0.5 * round_trip)))


def test_job_lengths_move_towards_new_samples() -> None:
    steps = _paced(0.020, 0.002)
    steps.ran({"api": 0.0})  # jobs now end at once
    job = 0.020 + SMOOTHING * (0.0 - 0.020)
    assert steps.steps("api") == int(job / 0.001)
    for _ in range(20):
        steps.ran({"api": 0.0})
    assert steps.steps("api") == 1  # short now: every slot at once


def test_a_negative_run_is_ignored() -> None:
    steps = _paced(0.020, 0.002)
    steps.ran({"api": -1.0})  # a clock that went back: not a sample
    assert steps.steps("api") == 20


def test_queues_are_paced_apart() -> None:
    steps = _paced(0.020, 0.001)
    steps.claimed("other", 0.0, 0.001)
    steps.ran({"other": 0.0005})
    assert (steps.steps("api"), steps.steps("other")) == (STEPS_MAX, 1)


def test_stepped_claims_that_fall_behind_take_larger_steps() -> None:
    """A lone worker's steps come one after another: when the free slots grow from one
    stepped claim to the next, the frees outpace the claims, and the steps shrink."""
    steps = _paced(0.020, 0.002)  # 20 steps estimated
    steps.took("api", 10, stepped=True)
    assert steps.steps("api") == 20  # one stepped claim says nothing yet
    steps.took("api", 12, stepped=True)  # more free than before: behind
    assert steps.steps("api") == int(20 * SHRINK)
    steps.took("api", 12, stepped=True)  # not fewer either
    assert steps.steps("api") == int(20 * SHRINK * SHRINK)


def test_stepped_claims_working_a_wave_off_keep_their_steps() -> None:
    """Several workers' steps interleave: a wave of free slots shrinks from claim to claim."""
    steps = _paced(0.020, 0.002)
    for free in (50, 40, 31, 20, 12, 3):
        steps.took("api", free, stepped=True)
    assert steps.steps("api") == 20


def test_stepped_claims_that_catch_up_grow_the_steps_back() -> None:
    """A lone worker at the edge of keeping up: free slots that went down through a step
    say smaller steps may keep up too, so the steps settle where the frees are matched."""
    steps = _paced(0.020, 0.002)
    for free in (10, 12, 14):
        steps.took("api", free, stepped=True)  # behind twice
    assert steps.steps("api") == int(20 * SHRINK * SHRINK)
    steps.took("api", 9, stepped=True)  # caught up
    assert steps.steps("api") == int(20 * SHRINK * SHRINK * GROW)
    steps.took("api", 9, stepped=True)  # level: behind again
    assert steps.steps("api") == int(20 * SHRINK * SHRINK * GROW * SHRINK)


def test_claims_that_take_every_free_slot_grow_the_steps_back() -> None:
    steps = _paced(0.020, 0.002)
    for free in (10, 11, 12):
        steps.took("api", free, stepped=True)  # behind twice
    share = SHRINK * SHRINK
    steps.took("api", 3, stepped=False)
    assert steps.steps("api") == int(20 * share * GROW)
    for _ in range(100):
        steps.took("api", 3, stepped=False)
    assert steps.steps("api") == 20  # back to the estimate, never past it


def test_the_steps_never_shrink_below_one() -> None:
    steps = _paced(0.020, 0.002)
    for free in range(1, 200):
        steps.took("api", free, stepped=True)
    assert steps.steps("api") == 1
    steps.took("other", 5, stepped=True)
    assert steps.steps("other") == 1  # never measured: one step
