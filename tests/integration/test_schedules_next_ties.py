"""``pgbeat schedules next`` with no NAME lists schedules that fire at the same instant.

It used to sort (fire time, Schedule) pairs and crashed with a TypeError on the first
tie: the repository's own schedules.toml has one every 30 s (``every = "10s"`` and
``every = "15s"``). Ties are listed by schedule name. No database is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgbeat.cli.main import main
from tests.helpers import run_cli, schedules_toml

ROOT = Path(__file__).resolve().parents[2]


def test_repository_schedules_file_previews_without_a_traceback() -> None:
    # 00:00:30Z: heartbeat (10 s) and signups (15 s) both fire.
    result = run_cli(
        ["schedules", "next", "--after", "2026-01-01T00:00:00Z", "--count", "3"],
        None,
        cwd=str(ROOT),
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = [line.split()[:2] for line in result.stdout.splitlines()]
    assert rows == [
        ["heartbeat", "2026-01-01T00:00:10Z"],
        ["signups", "2026-01-01T00:00:15Z"],
        ["heartbeat", "2026-01-01T00:00:20Z"],
        ["heartbeat", "2026-01-01T00:00:30Z"],
        ["signups", "2026-01-01T00:00:30Z"],
        ["signups", "2026-01-01T00:00:45Z"],
        ["daily_report", "2026-01-01T01:00:00Z"],  # 02:00 in Berlin (CET)
        ["daily_report", "2026-01-02T01:00:00Z"],
        ["daily_report", "2026-01-03T01:00:00Z"],
    ]


TWINS = """
[schedules.zeta]
cron = "0 0 * * *"

[schedules.alpha]
cron = "0 0 * * *"
"""


@pytest.mark.parametrize("as_json", [False, True])
def test_identical_schedules_are_listed_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool, monkeypatch: Any
) -> None:
    # the file alone: with DATABASE_URL set, the schedules of that database would join in
    monkeypatch.delenv("DATABASE_URL", raising=False)
    path = schedules_toml(tmp_path, TWINS)
    argv = ["schedules", "next", "--schedules", str(path), "--after", "2026-01-01T12:00:00Z"]
    assert main([*argv, "--count", "2", *(["--json"] if as_json else [])]) == 0
    out = capsys.readouterr().out
    rows: list[tuple[str, ...]]
    if as_json:
        rows = [(row["schedule"], row["fire_at"]) for row in json.loads(out)]
    else:
        rows = [tuple(line.split()[:2]) for line in out.splitlines()]
    day_two, day_three = "2026-01-02T00:00:00", "2026-01-03T00:00:00"
    suffix = "+00:00" if as_json else "Z"
    assert rows == [
        ("alpha", day_two + suffix),
        ("zeta", day_two + suffix),
        ("alpha", day_three + suffix),
        ("zeta", day_three + suffix),
    ]
