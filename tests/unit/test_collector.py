"""collector.long_lived: no collection inside the block, what it built frozen after, and the
collector's own state (on or off) given back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pgbeat.collector import long_lived


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_no_collection_runs_inside_and_what_was_built_is_frozen() -> None:
    gc.enable()
    gc.unfreeze()
    collections: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(phase)

    gc.callbacks.append(count)
    try:
        with long_lived():
            assert not gc.isenabled()
            built = [[n] for n in range(50_000)]  # far past gen 0's threshold of 700
            inside = len(collections)
        assert gc.isenabled()
        assert inside == 0
        assert gc.get_freeze_count() >= len(built)
    finally:
        gc.callbacks.remove(count)


def test_a_collector_that_was_off_stays_off_and_an_error_leaves_it_as_it_was() -> None:
    gc.disable()
    with long_lived():
        pass
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), long_lived():
        raise RuntimeError("a load that fails")
    assert gc.isenabled()
