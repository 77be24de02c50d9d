"""A reader that leaves early (``pgbeat ... --json | head``) gets no traceback from pgbeat."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_pipe_ends_the_command_without_a_traceback() -> None:
    command = [sys.executable, "-m", "pgbeat", "schedules", "next", "--count", "10000"]
    command += ["--schedules", str(ROOT / "schedules.toml"), "--json"]
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().strip() == "["  # the output began
        process.stdout.close()  # the reader leaves, as head does, long before the end
        errors = process.stderr.read()
        assert process.wait(timeout=60) == 1
    assert "Traceback" not in errors, errors
