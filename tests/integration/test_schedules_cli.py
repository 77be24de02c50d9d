"""`pgbeat schedules check|next` as a user runs them (no database needed)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers import run_cli_here, schedules_toml

pytestmark = pytest.mark.slow  # every test runs pgbeat in a subprocess

GOOD = """
[defaults]
timezone = "UTC"

[schedules.daily_report]
cron = "30 2 * * *"
timezone = "Europe/Berlin"
payload = { format = "pdf" }

[schedules.heartbeat]
every = "30s"
"""


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    path = schedules_toml(tmp_path, GOOD)
    return path


def test_check_accepts_a_valid_file(good_file: Path) -> None:
    result = run_cli_here(["schedules", "check", str(good_file)], database_url=None)
    assert result.returncode == 0, result.stderr
    assert "2 schedules OK" in result.stdout


def test_check_reports_every_problem_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[schedules.a]\ncron = "99 * * * *"\n\n'
        '[schedules.b]\nevery = "1m"\ntimezone = "Mars/Olympus"\n\n'
        '[schedules.c]\nevery = "1m"\ncron = "* * * * *"\n\n'
        '[schedules.d]\nevery = "1m"\ntimezon = "UTC"\n'
    )
    result = run_cli_here(["schedules", "check", str(path)], database_url=None)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 4, result.stderr
    for name, line in zip("abcd", lines, strict=True):
        assert f"'{name}'" in line and "bad.toml" in line
    assert "Traceback" not in result.stderr


def test_check_names_the_line_of_a_toml_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[schedules.a]\nevery = "1m"\ncron = \n')
    result = run_cli_here(["schedules", "check", str(path)], database_url=None)
    assert result.returncode == 1
    assert "line 3" in result.stderr
    assert result.stderr.count("\n") == 1


def test_check_missing_file(tmp_path: Path) -> None:
    result = run_cli_here(["schedules", "check", str(tmp_path / "none.toml")], database_url=None)
    assert result.returncode == 1
    assert "none.toml" in result.stderr


def test_next_json_crosses_the_spring_gap(good_file: Path) -> None:
    result = run_cli_here(
        [
            "schedules",
            "next",
            "daily_report",
            "--schedules",
            str(good_file),
            "--after",
            "2026-03-27T12:00:00+00:00",
            "--count",
            "3",
            "--json",
        ],
        database_url=None,
    )
    assert result.returncode == 0, result.stderr
    fires = json.loads(result.stdout)
    assert [f["schedule"] for f in fires] == ["daily_report"] * 3
    assert [datetime.fromisoformat(f["fire_at"]).isoformat() for f in fires] == [
        "2026-03-28T01:30:00+00:00",  # 02:30 CET
        "2026-03-29T01:00:00+00:00",  # 02:30 does not exist: right after the gap, 03:00 CEST
        "2026-03-30T00:30:00+00:00",  # 02:30 CEST
    ]
    assert fires[1]["unique_key"] == "daily_report@2026-03-29T01:00:00Z"
    assert fires[1]["fire_at_local"].startswith("2026-03-29T03:00:00+02:00")


def test_next_text_shows_utc_and_local(good_file: Path) -> None:
    result = run_cli_here(
        [
            "schedules",
            "next",
            "--schedules",
            str(good_file),
            "--after",
            "2026-06-01T00:00:00Z",
            "--count",
            "2",
        ],
        database_url=None,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("heartbeat") and "2026-06-01T00:00:30Z" in lines[0]
    assert any("2026-06-01 02:30:00 CEST" in line for line in lines)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["schedules", "next", "nope"], "no schedule named 'nope'"),
        (["schedules", "next", "--after", "yesterday"], "bad ISO-8601"),
        (["schedules", "next", "--count", "0"], "at least 1"),
    ],
)
def test_next_bad_input(good_file: Path, args: list[str], fragment: str) -> None:
    result = run_cli_here([*args, "--schedules", str(good_file)], database_url=None)
    assert result.returncode == 1
    assert fragment in result.stderr
    assert result.stderr.count("\n") == 1
