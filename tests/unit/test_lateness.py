"""The pure rules of deadlines: which values make sense, and when a replica judges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pgbeat.errors import ConfigError
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.lateness import RECHECK, Watch, deadline_problem, shortest_period
from pgbeat.scheduling.schedule import Schedule

T0 = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("timing", "shortest"),
    [
        ({"every": "90s"}, timedelta(seconds=90)),
        ({"cron": "*/5 * * * *"}, timedelta(minutes=5)),
        ({"cron": "0 2 * * *"}, timedelta(hours=24)),
        ({"cron": "0 2,3 * * *"}, timedelta(hours=1)),
        ({"cron": "0 9 * * 1-5"}, timedelta(hours=24)),
        ({"cron": "0 0 1 * *"}, timedelta(days=28)),
        # a 02:30 job fires at 03:00 on the spring-forward night: 23.5 h after the day before
        ({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}, timedelta(hours=23, minutes=30)),
        ({"cron": "0 0 29 2 *"}, timedelta(days=4 * 365 + 1)),
    ],
)
def test_shortest_period(timing: dict[str, str], shortest: timedelta) -> None:
    schedule = Schedule.model_validate({"name": "s", "kind": "s", **timing})
    assert shortest_period(schedule) == shortest


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"every": "1h", "deadline": "30m"}, None),
        ({"every": "1h", "deadline": "2h"}, None),  # overlap allow: a deadline past the period
        ({"every": "1h", "deadline": "1h", "overlap": "skip"}, None),
        ({"every": "1h", "deadline": "61m", "overlap": "skip"}, "deadline: 1h1m is longer"),
        ({"cron": "0 2,3 * * *", "deadline": "2h", "overlap": "skip"}, "(1h at its shortest)"),
        ({"every": "1h", "on_late": "alert"}, "on_late: needs a deadline"),
        ({"every": "1h", "deadline": "1m", "on_late": "s"}, "on_late: must name another kind"),
        ({"every": "1h", "deadline": "1m", "on_late": "alert"}, None),
    ],
)
def test_deadline_problem(values: dict[str, str], problem: str | None) -> None:
    schedule = Schedule.model_validate({"name": "s", "kind": "s", **values})
    found = deadline_problem(schedule)
    assert (found is None) == (problem is None)
    assert problem is None or (found is not None and problem in found and "\n" not in found)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ('deadline = "soon"', "schedule 'b': deadline: bad duration 'soon'"),
        ('deadline = "0s"', "schedule 'b': deadline: bad duration '0s': must be greater"),
        ('deadline = "2h"\noverlap = "skip"', "schedule 'b': deadline: 2h is longer than"),
        ('deadline = "1m"\non_late = ""', "schedule 'b': on_late: must name a job kind"),
        ("deadline = 30", "schedule 'b': deadline: expected a duration"),
    ],
)
def test_a_schedules_file_with_a_bad_deadline_is_refused_in_one_line(
    entry: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_schedules(f'[schedules.b]\nevery = "1h"\n{entry}\n', source="f.toml")
    [line] = refused.value.problems
    assert line.startswith("f.toml: ") and problem in line


def test_defaults_may_give_on_late_and_each_schedule_its_deadline() -> None:
    text = '[defaults]\non_late = "alert"\n[schedules.b]\nevery = "1h"\ndeadline = "10m"\n'
    [schedule] = parse_schedules(text)
    assert schedule.on_late == "alert" and schedule.deadline == timedelta(minutes=10)


def test_watch_judges_at_start_when_due_and_after_claims() -> None:
    watch = Watch()
    assert watch.due(T0, deadlines=False)  # the first tick always judges
    watch.judged(T0, next_due=T0 + 30 * S, full=False)
    assert not watch.due(T0 + 29 * S, deadlines=True)
    assert watch.due(T0 + 30 * S, deadlines=True)
    assert watch.wake_at(T0 + 60 * S) == T0 + 30 * S
    watch.judged(T0 + 30 * S, next_due=None, full=False)
    assert watch.wake_at(T0 + 60 * S) == T0 + 60 * S
    assert not watch.due(T0 + 31 * S, deadlines=False)  # nothing watched, none to come
    assert watch.due(T0 + 30 * S + RECHECK, deadlines=True)  # others may have claimed


def test_a_full_batch_judges_again_at_the_next_tick() -> None:
    watch = Watch()
    watch.judged(T0, next_due=T0 + 10 * S, full=True)
    assert watch.due(T0, deadlines=False)


def test_the_readme_schedules_example_is_valid_and_shows_a_deadline() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## schedules.toml", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    schedules = {s.name: s for s in parse_schedules(example)}
    report = schedules["daily_report"]
    assert report.deadline == timedelta(minutes=30) and report.on_late == "schedule_late"
