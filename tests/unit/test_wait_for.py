"""The suite's wait: a process the condition depends on that exits fails the wait at once,
with its output, instead of being waited out to the deadline."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from tests.helpers import CliProcess, wait_for


def test_a_watched_process_that_exits_fails_the_wait_with_its_output() -> None:
    script = "print('could not start: too many clients'); raise SystemExit(3)"
    process = CliProcess([sys.executable, "-c", script], dict(os.environ), None)
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"exited 3;.*\n.*too many clients"):
        wait_for(lambda: False, timeout=60, message="a round", watching=[process])
    assert time.monotonic() - began < 30  # long before the deadline


def test_a_wait_whose_condition_holds_returns_its_value_with_a_live_process() -> None:
    waits = "import signal; signal.pause()"  # alive until signalled
    process = CliProcess([sys.executable, "-c", waits], {}, None)
    try:
        assert wait_for(lambda: 7, timeout=5, watching=[process]) == 7
    finally:
        process.stop(signal.SIGKILL)
