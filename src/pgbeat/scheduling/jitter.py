"""Deterministic jitter: each period's offset from its fire time, the same on every replica.

Pure. The offset comes from a hash of the period's unique key (the schedule's name and the
fire time), so replicas agree on it without talking, a period keeps its offset however often
it is computed, and the unique key stays the period's own: jitter moves ``run_at`` only.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from pgbeat.scheduling.schedule import unique_key_suffix

_RESOLUTION = timedelta(milliseconds=1)


def jitter_offset(name: str, fire_at: datetime, jitter: timedelta | None) -> timedelta:
    """The delay in [0, jitter) of the period of schedule ``name`` firing at ``fire_at``.

    Whole milliseconds, uniform over the range (blake2b of ``name@fire time``); zero
    without jitter or with one under a millisecond.
    """
    steps = 0 if jitter is None else jitter // _RESOLUTION
    if steps <= 0:
        return timedelta(0)
    digest = hashlib.blake2b(f"{name}@{unique_key_suffix(fire_at)}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") % steps * _RESOLUTION
