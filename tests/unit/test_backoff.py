import random
from datetime import timedelta

import pytest

from pgbeat.backoff import BackoffPolicy, reconnect_delay, retry_delay

DEFAULT = BackoffPolicy()


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [
        (1, 2),
        (2, 4),
        (3, 8),
        (4, 16),
        (10, 1024),
        (11, 2048),
        (12, 3600),
        (50, 3600),
        (10_000, 3600),
    ],
)
def test_doubles_from_two_seconds_and_caps_at_one_hour(attempt: int, ceiling: float) -> None:
    rng = random.Random(attempt)
    for _ in range(200):
        delay = retry_delay(attempt, DEFAULT, rng).total_seconds()
        assert ceiling / 2 <= delay <= ceiling


def test_seeded_generator_gives_repeatable_delays() -> None:
    first = [retry_delay(a, DEFAULT, random.Random(7)) for a in range(1, 6)]
    second = [retry_delay(a, DEFAULT, random.Random(7)) for a in range(1, 6)]
    assert first == second


def test_jitter_spreads_retries() -> None:
    rng = random.Random(42)
    delays = {retry_delay(3, DEFAULT, rng) for _ in range(100)}
    assert len(delays) > 90
    assert min(delays) < timedelta(seconds=5) < max(delays)


def test_no_jitter_is_exact() -> None:
    policy = BackoffPolicy(base=timedelta(milliseconds=10), cap=timedelta(seconds=1), jitter=0)
    rng = random.Random(0)
    assert [retry_delay(a, policy, rng) for a in (1, 2, 3, 8)] == [
        timedelta(milliseconds=10),
        timedelta(milliseconds=20),
        timedelta(milliseconds=40),
        timedelta(seconds=1),
    ]


def test_attempt_zero_is_treated_as_first() -> None:
    policy = BackoffPolicy(jitter=0)
    assert retry_delay(0, policy, random.Random(0)) == timedelta(seconds=2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": timedelta(0)},
        {"base": timedelta(hours=2), "cap": timedelta(hours=1)},
        {"jitter": 1.5},
        {"jitter": -0.1},
    ],
)
def test_rejects_nonsense_policies(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("failures", "base"), [(0, 0.5), (1, 0.5), (2, 1.0), (3, 2.0), (5, 8.0), (6, 10.0), (99, 10.0)]
)
def test_reconnects_double_from_half_a_second_to_ten(failures: int, base: float) -> None:
    assert reconnect_delay(failures, 0.0) == pytest.approx(base)


@pytest.mark.parametrize(("spread", "factor"), [(-1.0, 0.9), (1.0, 1.1), (-7.0, 0.9), (7.0, 1.1)])
def test_reconnects_spread_by_ten_percent_either_way(spread: float, factor: float) -> None:
    assert reconnect_delay(3, spread) == pytest.approx(2.0 * factor)


def test_a_fleet_of_processes_does_not_reconnect_in_lockstep() -> None:
    delays = {
        round(reconnect_delay(4, random.Random(seed).uniform(-1, 1)), 6) for seed in range(50)
    }
    assert len(delays) == 50
    assert min(delays) >= 3.6 and max(delays) <= 4.4
