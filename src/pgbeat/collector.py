"""Python's cyclic garbage collector, kept off a bulk of long-lived objects.

Each collection scans the objects made since the last, and every so often all of them.
Building a large replica's copy of the schedules (none of them in a cycle) set off passes
that took a good share of its start-up; once built, the copy made a tick pause whenever a
full pass came round (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """No collection while the block builds; then what exists is left out of every scan.

    ``gc.freeze`` before the collector is on again: switched on with the objects still
    young, its next pass would scan them all at once. Frozen objects are still freed by
    reference counting; only a cycle among them would never be.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
