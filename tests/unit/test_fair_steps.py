"""The pace of a fair queue's steps (worker/fair_steps.py): job length and round trip in,
steps out. Times are plain numbers standing for monotonic seconds."""

from __future__ import annotations

import pytest

from pgbeat.worker.fair_steps import SMOOTHING, STEPS_MAX, FairSteps


def _paced(job: float, round_trip: float) -> FairSteps:
    steps = FairSteps()
    steps.claimed("api", 0.0, round_trip, took=True)
    steps.freed({"api"}, round_trip + job)
    return steps


def test_one_step_until_the_queue_was_measured() -> None:
    steps = FairSteps()
    assert steps.steps("api") == 1
    steps.claimed("api", 0.0, 0.001, took=True)
    assert steps.steps("api") == 1  # no free seen yet: the job's length is unknown
    steps.freed({"other"}, 1.0)
    assert steps.steps("api") == 1


@pytest.mark.parametrize(
    ("job", "round_trip", "expected"),
    [
        (0.0001, 0.001, 1),  # no-op jobs: every slot at once, the claims set the pace
        (0.003, 0.001, 1),  # shorter than two steps of two round trips
        (0.004, 0.001, 2),
        (0.021, 0.002, 5),
        (0.020, 0.001, STEPS_MAX),  # 10 fit: capped
        (60.0, 0.001, STEPS_MAX),
        (0.020, 0.0, 1),  # a round trip too short to time: no steps
    ],
)
def test_steps_follow_the_job_length_in_round_trips(
    job: float, round_trip: float, expected: int
) -> None:
    assert _paced(job, round_trip).steps("api") == expected


def test_a_claim_that_took_nothing_times_the_round_trip_only() -> None:
    steps = _paced(0.020, 0.001)
    steps.claimed("api", 5.0, 5.004, took=False)  # slower: 0.001 + 0.2 * 0.003
    steps.freed({"api"}, 9.0)  # no claim outstanding: not a job's length
    assert steps.steps("api") == int(0.020 / (2 * (0.001 + SMOOTHING * 0.003)))


def test_the_oldest_claim_not_followed_by_a_free_is_timed() -> None:
    steps = FairSteps()
    steps.claimed("api", 0.0, 0.004, took=True)
    steps.claimed("api", 0.005, 0.009, took=True)  # still the first one's jobs pending
    steps.freed({"api"}, 0.024)
    assert steps.steps("api") == 2  # 0.020 / (2 x 0.004), timed from 0.004; not 0.015


def test_estimates_move_towards_new_samples() -> None:
    steps = _paced(0.020, 0.001)
    steps.claimed("api", 1.0, 1.001, took=True)
    steps.freed({"api"}, 1.001)  # jobs now end at once
    job = 0.020 + SMOOTHING * (0.0 - 0.020)
    assert steps.steps("api") == min(STEPS_MAX, int(job / 0.002))


def test_queues_are_paced_apart() -> None:
    steps = _paced(0.020, 0.001)
    steps.claimed("other", 0.0, 0.001, took=True)
    steps.freed({"other"}, 0.0015)
    assert (steps.steps("api"), steps.steps("other")) == (STEPS_MAX, 1)
