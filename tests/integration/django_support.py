"""What the Django tests share: running a worker of tests/django_project in a process
until the test's condition holds, then stopping it as a deployment would (SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

from tests.helpers import wait_for
from tests.integration.conftest import DJANGO_PROJECT

ROOT = DJANGO_PROJECT.parents[1]


def project_env() -> dict[str, str]:
    """This environment without DATABASE_URL and PYTHONPATH: the project finds its own."""
    return {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH")}


def manage_py(*args: str) -> list[str]:
    """The command line of the project's ``manage.py`` with these arguments."""
    return [sys.executable, str(DJANGO_PROJECT / "manage.py"), *args]


def run_worker(
    command: Sequence[str], env: dict[str, str], done: Callable[[], bool], timeout: float = 60
) -> str:
    """Run the worker until ``done()``; it must still run then and exit 0 on SIGTERM within
    30 s. Returns what it printed."""
    worker = subprocess.Popen(
        command,
        cwd=str(ROOT.parent),  # anywhere: the project is found by its path, as in a deployment
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(
            lambda: worker.poll() is not None or done(),
            timeout=timeout,
            interval=0.1,
            message="the worker to run the jobs",
        )
        assert worker.poll() is None, "the worker exited early"
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            output, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # never leave it running; say what it printed
            worker.kill()
            output, _ = worker.communicate(timeout=10)
            raise AssertionError(f"the worker ignored SIGTERM for 30 s:\n{output}") from None
    assert worker.returncode == 0, output
    return output
