"""schedules.toml parsing: valid files, defaults, and one precise line per mistake."""

from __future__ import annotations

from datetime import timedelta
from operator import attrgetter
from pathlib import Path

import pytest

from pgbeat.errors import ConfigError
from pgbeat.scheduling.file import load_schedules, parse_schedules

DESIGN_EXAMPLE = """
[defaults]                  # optional; every key may be overridden per schedule
timezone = "UTC"            # IANA name, resolved with zoneinfo + tzdata
catch_up = "latest"         # after downtime: "none" | "latest" | "all" (within catch_up_window)
catch_up_window = "1h"

[schedules.daily_report]    # the table key is the schedule's name
cron = "0 2 * * *"          # 5-field cron or @hourly/@daily/@weekly/@monthly/@yearly
timezone = "Europe/Berlin"
kind = "daily_report"       # defaults to the schedule's name
payload = { format = "pdf" }
max_attempts = 3

[schedules.heartbeat]
every = "30s"               # fixed interval instead of cron, aligned to the Unix epoch
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_schedules(text, source="cfg.toml")
    return caught.value.problems


def test_design_example_parses() -> None:
    report, heartbeat = parse_schedules(DESIGN_EXAMPLE)
    assert report.name == report.kind == "daily_report"
    assert report.cron == "0 2 * * *"
    assert report.timezone == "Europe/Berlin"
    assert report.payload == {"format": "pdf"}
    assert report.max_attempts == 3
    assert report.catch_up == "latest"
    assert report.catch_up_window == timedelta(hours=1)
    assert heartbeat.name == heartbeat.kind == "heartbeat"
    assert heartbeat.every == timedelta(seconds=30)
    assert heartbeat.cron is None
    assert heartbeat.timezone == "UTC"
    assert heartbeat.enabled is True


def test_schedules_sorted_by_name_and_kind_defaults_to_name() -> None:
    text = """
    [schedules.zeta]
    every = "1m"
    [schedules.alpha]
    every = "1m"
    kind = "shared_kind"
    """
    alpha, zeta = parse_schedules(text)
    assert (alpha.name, alpha.kind) == ("alpha", "shared_kind")
    assert (zeta.name, zeta.kind) == ("zeta", "zeta")


def test_defaults_merge_and_are_overridden() -> None:
    text = """
    [defaults]
    timezone = "Europe/Berlin"
    catch_up = "all"
    catch_up_window = "6h"
    max_attempts = 5
    enabled = false
    payload = { source = "defaults" }

    [schedules.inherits]
    cron = "0 2 * * *"

    [schedules.overrides]
    cron = "0 3 * * *"
    timezone = "America/New_York"
    catch_up = "none"
    catch_up_window = "10m"
    max_attempts = 1
    enabled = true
    payload = { source = "schedule" }
    """
    fields = attrgetter(
        "timezone", "catch_up", "catch_up_window", "max_attempts", "enabled", "payload"
    )
    assert [fields(schedule) for schedule in parse_schedules(text)] == [
        ("Europe/Berlin", "all", timedelta(hours=6), 5, False, {"source": "defaults"}),
        ("America/New_York", "none", timedelta(minutes=10), 1, True, {"source": "schedule"}),
    ]  # inherits, overrides


@pytest.mark.parametrize(
    "text", ["", "# nothing yet\n", "[defaults]\ntimezone = 'UTC'\n", "[schedules]\n"]
)
def test_no_schedules_is_valid(text: str) -> None:
    assert parse_schedules(text) == []


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            'cron = "0 2 * * *"\ntimezon = "Europe/Berlin"',
            "schedule 'job': unknown key 'timezon' (did you mean 'timezone'?)",
        ),
        (
            'cron = "61 * * * *"',
            "schedule 'job': cron: bad cron expression '61 * * * *': "
            "minute 61 is out of range 0-59",
        ),
        (
            'cron = "0 0 30 2 *"',
            "schedule 'job': cron: bad cron expression '0 0 30 2 *': "
            "never fires: feb has no day 30",
        ),
        (
            'cron = "@reboot"',
            "schedule 'job': cron: bad cron expression '@reboot': "
            "@reboot is not a period: a schedule needs times to fire at",
        ),
        (
            'cron = "0 0 * * 5#2"',
            "schedule 'job': cron: bad cron expression '0 0 * * 5#2': day-of-week field "
            "'5#2': '5#2' is not a value, range or step (Debian cron has no L, W, #, ? or H)",
        ),
        (
            'cron = "0 2 * * *"\ntimezone = "Mars/Base"',
            "schedule 'job': timezone: unknown time zone 'Mars/Base' "
            "(use an IANA name like 'Europe/Berlin')",
        ),
        (
            'cron = "0 2 * * *"\nevery = "1h"',
            "schedule 'job': set either 'cron' or 'every', not both",
        ),
        (
            "payload = { a = 1 }",
            "schedule 'job': missing 'cron' or 'every' (set exactly one)",
        ),
        (
            'every = "soon"',
            "schedule 'job': every: bad duration 'soon': "
            "expected e.g. 500ms, 30s, 5m, 2h, 1d or 1h30m",
        ),
        (
            'every = "1500ms"',
            "schedule 'job': every: must be a whole number of seconds, at least 1s (got 1s500ms)",
        ),
        (
            "every = 30",
            "schedule 'job': every: expected a duration such as '30s' or '1h30m', got 30",
        ),
        (
            'every = "1m"\ncatch_up_window = "0s"',
            "schedule 'job': catch_up_window: bad duration '0s': must be greater than zero",
        ),
        (
            'every = "1m"\nmax_attempts = "3"',
            "schedule 'job': max_attempts: input should be a valid integer, got '3'",
        ),
        (
            'every = "1m"\nmax_attempts = 0',
            "schedule 'job': max_attempts: input should be greater than or equal to 1, got 0",
        ),
        (
            'every = "1m"\nenabled = "yes"',
            "schedule 'job': enabled: input should be a valid boolean, got 'yes'",
        ),
        (
            'every = "1m"\ncatch_up = "sometimes"',
            "schedule 'job': catch_up: input should be 'none', 'latest' or 'all', got 'sometimes'",
        ),
        (
            'every = "1m"\ntimezone = 5',
            "schedule 'job': timezone: input should be a valid string, got 5",
        ),
        (
            'every = "1m"\npayload = "x"',
            "schedule 'job': payload: input should be a valid dictionary, got 'x'",
        ),
        (
            'every = "1m"\npayload = { at = 2026-03-29T01:00:00Z }',
            "schedule 'job': payload: must be JSON data "
            "(Object of type datetime is not JSON serializable)",
        ),
        (
            'every = "1m"\nkind = ""',
            "schedule 'job': kind: string should have at least 1 character, got ''",
        ),
        (
            'every = "1m"\nname = "other"',
            "schedule 'job': unknown key 'name' (expected one of: catch_up, catch_up_window, "
            "cron, deadline, enabled, end_at, every, jitter, kind, max_attempts, on_late, "
            "overlap, pause_after_failures, payload, priority, queue, start_at, tags, timezone)",
        ),
    ],
)
def test_schedule_mistake_names_file_schedule_and_key(table: str, expected: str) -> None:
    assert problems_of(f"[schedules.job]\n{table}\n") == [f"cfg.toml: {expected}"]


def test_bad_schedule_name() -> None:
    assert problems_of('[schedules."my report"]\nevery = "1m"\n') == [
        "cfg.toml: schedule 'my report': name: "
        "'my report' has characters other than letters, digits and _ . : -"
    ]


def test_schedule_that_is_not_a_table() -> None:
    assert problems_of('[schedules]\nheartbeat = "30s"\n') == [
        "cfg.toml: schedule 'heartbeat': must be a table ([schedules.heartbeat]), got '30s'"
    ]


def test_schedules_that_is_not_a_table() -> None:
    assert problems_of('schedules = "all"\n') == [
        "cfg.toml: schedules: must be [schedules.NAME] tables, got 'all'"
    ]


def test_unknown_top_level_table() -> None:
    assert problems_of('[schedule.job]\nevery = "1m"\n') == [
        "cfg.toml: top level: unknown key 'schedule' (did you mean 'schedules'?)"
    ]


def test_unknown_and_misplaced_defaults() -> None:
    text = '[defaults]\ntimezon = "UTC"\ncron = "* * * * *"\n'
    assert problems_of(text) == [
        "cfg.toml: defaults: cron: cannot be a default, set it in each schedule",
        "cfg.toml: defaults: unknown key 'timezon' (did you mean 'timezone'?)",
    ]


def test_bad_default_reported_once_not_per_schedule() -> None:
    text = """
    [defaults]
    timezone = "Mars/Base"
    [schedules.a]
    cron = "0 2 * * *"
    [schedules.b]
    cron = "0 3 * * *"
    """
    assert problems_of(text) == [
        "cfg.toml: defaults: timezone: unknown time zone 'Mars/Base' "
        "(use an IANA name like 'Europe/Berlin')"
    ]


def test_toml_syntax_error_names_the_line() -> None:
    text = '[schedules.job]\ncron = "0 2 * * *"\nmax_attempts = \n'
    assert problems_of(text) == ["cfg.toml: line 3: Invalid value"]


def test_toml_error_at_end_of_file() -> None:
    assert problems_of('[schedules.job]\ncron = """0 2 * * *') == [
        "cfg.toml: end of file: Unterminated string"
    ]


def test_duplicate_schedule_names() -> None:
    text = """[schedules.daily_report]
cron = "0 2 * * *"

[schedules.daily_report]
cron = "0 3 * * *"
"""
    assert problems_of(text) == ["cfg.toml: line 4: schedule 'daily_report' is defined twice"]


def test_all_problems_reported_at_once() -> None:
    text = """
    timezon = "UTC"
    [defaults]
    catch_up = "sometimes"
    [schedules.daily_report]
    cron = "61 * * * *"
    [schedules.heartbeat]
    every = "30s"
    max_attempts = "3"
    [schedules.cleanup]
    cron = "@daily"
    timezone = "Europe/Berln"
    [schedules.fine]
    every = "1m"
    """
    with pytest.raises(ConfigError) as caught:
        parse_schedules(text, source="cfg.toml")
    problems = caught.value.problems
    assert problems == [
        "cfg.toml: top level: unknown key 'timezon' (expected one of: defaults, schedules)",
        "cfg.toml: defaults: catch_up: input should be 'none', 'latest' or 'all', got 'sometimes'",
        "cfg.toml: schedule 'daily_report': cron: bad cron expression '61 * * * *': "
        "minute 61 is out of range 0-59",
        "cfg.toml: schedule 'heartbeat': max_attempts: input should be a valid integer, got '3'",
        "cfg.toml: schedule 'cleanup': timezone: unknown time zone 'Europe/Berln' "
        "(use an IANA name like 'Europe/Berlin')",
    ]
    assert str(caught.value) == "\n".join(problems)
    assert all("\n" not in problem for problem in problems)


@pytest.mark.parametrize(
    "text",
    [
        "[schedules.a]\nevery = []\n",
        "[schedules.a]\ncron = 0\n",
        "[schedules.a]\ncron = { x = 1 }\n",
        "[schedules.a]\ncatch_up_window = 1.5\nevery = '1s'\n",
        "[[schedules]]\nname = 'a'\n",
        "defaults = [1, 2]\n",
        "[schedules.a.b]\nevery = '1s'\n",
        "\x00",
    ],
)
def test_odd_documents_give_one_line_problems(text: str) -> None:
    problems = problems_of(text)
    assert problems
    assert all(problem.startswith("cfg.toml: ") and "\n" not in problem for problem in problems)


def test_load_schedules_reads_file(tmp_path: Path) -> None:
    path = tmp_path / "schedules.toml"
    path.write_text(DESIGN_EXAMPLE, encoding="utf-8")
    assert [s.name for s in load_schedules(path)] == ["daily_report", "heartbeat"]
    assert [s.name for s in load_schedules(str(path))] == ["daily_report", "heartbeat"]


def test_load_schedules_accepts_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "schedules.toml"
    path.write_bytes(b"\xef\xbb\xbf" + DESIGN_EXAMPLE.encode())
    assert len(load_schedules(path)) == 2


def test_load_schedules_names_the_path_in_problems(tmp_path: Path) -> None:
    path = tmp_path / "schedules.toml"
    path.write_text('[schedules.job]\ncron = "61 * * * *"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_schedules(path)
    assert caught.value.problems == [
        f"{path}: schedule 'job': cron: bad cron expression '61 * * * *': "
        "minute 61 is out of range 0-59"
    ]


def test_load_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as caught:
        load_schedules(path)
    assert caught.value.problems == [f"{path}: file not found"]


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_schedules(tmp_path)
    assert caught.value.problems == [f"{tmp_path}: cannot read file: Is a directory"]


def test_load_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "schedules.toml"
    path.write_bytes(b"[schedules.job]\nevery = '\xff'\n")
    with pytest.raises(ConfigError) as caught:
        load_schedules(path)
    assert caught.value.problems == [f"{path}: not UTF-8 text (byte 25)"]
