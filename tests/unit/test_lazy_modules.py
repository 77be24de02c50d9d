"""``import pgbeat`` then ``pgbeat.ui`` and ``pgbeat.testing``, as the README writes them: loaded
on first use (the dashboard's web stack is not imported by every worker), in a fresh
interpreter so that no other test has imported them first."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import pgbeat
assert "pgbeat.ui" not in sys.modules and "starlette" not in sys.modules
assert "pgbeat.testing" not in sys.modules
assert callable(pgbeat.ui.create_app) and callable(pgbeat.testing.drain)
assert "starlette" in sys.modules
try:
    pgbeat.nothing_here
except AttributeError as exc:
    print(exc)
"""


def test_ui_and_testing_load_on_first_use() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "module 'pgbeat' has no attribute 'nothing_here'"
