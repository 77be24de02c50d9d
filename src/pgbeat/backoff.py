"""When to retry a failed job: exponential backoff with jitter, as a pure function.

The random generator is a parameter so tests can seed it, and the policy is a value so a
worker (or a test) can shrink it without touching the code that applies it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class BackoffPolicy:
    """``base * 2**(attempt-1)`` capped at ``cap``, minus up to ``jitter`` of itself."""

    base: timedelta = timedelta(seconds=2)
    cap: timedelta = timedelta(hours=1)
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.base <= timedelta(0) or self.cap < self.base:
            raise ValueError("backoff needs 0 < base <= cap")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("backoff jitter must be between 0 and 1")


def retry_delay(attempt: int, policy: BackoffPolicy, rng: random.Random) -> timedelta:
    """Delay before the retry that follows failed attempt number ``attempt`` (1-based).

    Attempt 1 waits up to 2 s, attempt 2 up to 4 s, ... never more than ``cap``. The
    exponent is clamped before it is applied, so attempt 10,000 cannot overflow.
    """
    ceiling_s = policy.cap.total_seconds()
    exponent = min(max(attempt, 1) - 1, 62)
    full_s = min(policy.base.total_seconds() * (2**exponent), ceiling_s)
    return timedelta(seconds=full_s * (1.0 - policy.jitter * rng.random()))


RECONNECT_FIRST = 0.5  # seconds before the first reconnect
RECONNECT_MAX = 10.0  # seconds: an outage is never waited out longer between tries
RECONNECT_JITTER = 0.1  # +/-10 %: processes that lost the database together spread out


def reconnect_delay(failures: int, spread: float) -> float:
    """Seconds before reconnect try number ``failures`` + 1: doubling from 0.5 s up to 10 s,
    times 1 + 10 % of ``spread`` (a number in [-1, 1], random per process), so that every
    process of a fleet does not knock at once when a restarted database comes back."""
    base = min(RECONNECT_FIRST * 2.0 ** min(max(failures, 1) - 1, 6), RECONNECT_MAX)
    return base * (1.0 + RECONNECT_JITTER * max(-1.0, min(1.0, spread)))
