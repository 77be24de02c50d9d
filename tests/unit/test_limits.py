"""What the jobs table can hold is checked before the database refuses it (limits.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgbeat.errors import ConfigError
from pgbeat.limits import (
    MAX_ATTEMPTS,
    MAX_KEY_BYTES,
    MAX_KIND_LENGTH,
    check_job_text,
    key_problem,
    kind_problem,
    payload_problem,
)
from pgbeat.scheduling.file import parse_schedules


@pytest.mark.parametrize(
    ("problem_of", "value", "problem"),
    [
        (kind_problem, "k" * MAX_KIND_LENGTH, None),
        (kind_problem, "日" * MAX_KIND_LENGTH, None),
        (kind_problem, "k" * (MAX_KIND_LENGTH + 1), "at most 200"),
        (kind_problem, "a\x00b", "NUL"),
        (key_problem, "k" * MAX_KEY_BYTES, None),
        (key_problem, "k" * (MAX_KEY_BYTES + 1), "1001 bytes"),
        (key_problem, "é" * 300, None),  # 600 bytes
        (key_problem, "日" * 334, "1002 bytes"),  # 334 characters, three bytes each
        (key_problem, "k" * 3000, "3000 bytes"),
        (key_problem, "a\x00", "NUL"),
        (payload_problem, {"a": ["b", {"c": 1.5}], "d": None}, None),
        (payload_problem, {"a": ["b", {"c": "x\x00"}]}, "NUL"),
        (payload_problem, {"k\x00": 1}, "NUL"),
    ],
)
def test_problems(problem_of: Callable[[Any], str | None], value: Any, problem: str | None) -> None:
    found = problem_of(value)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_deeply_nested_payload_is_scanned_without_recursion() -> None:
    payload: object = "x\x00"
    for _ in range(100_000):
        payload = [payload]
    assert payload_problem(payload) is not None


def test_check_job_text_names_the_key_and_shortens_it() -> None:
    with pytest.raises(ValueError, match="job_key 'kkkk") as raised:
        check_job_text("kind", "k" * 3000, "job_key")
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('kind = "a\\u0000b"', "kind: contains a NUL character"),
        ('payload = { note = "a\\u0000" }', "payload: the string 'a\\x00' contains a NUL"),
        ('payload = { "k\\u0000" = 1 }', "NUL character"),
        (
            "max_attempts = 99999999999",
            f"max_attempts: input should be less than or equal to {MAX_ATTEMPTS}",
        ),
        (f'kind = "{"k" * 201}"', "kind: string should have at most 200 characters"),
    ],
)
def test_schedules_the_database_would_refuse_are_rejected_at_load(toml: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_schedules(f'[schedules.s]\nevery = "1m"\n{toml}\n')
    assert any(fragment in problem for problem in raised.value.problems), raised.value.problems


def test_a_huge_schedule_name_is_one_short_line_per_problem() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_schedules(f'[schedules.{"n" * 10_000}]\nevery = "1m"\n')
    problems = raised.value.problems
    assert any("name: string should have at most 200 characters" in p for p in problems)
    assert all(len(p) < 300 for p in problems), [len(p) for p in problems]


def test_the_largest_accepted_schedule_loads() -> None:
    name = "n" * MAX_KIND_LENGTH
    (schedule,) = parse_schedules(
        f'[schedules.{name}]\nevery = "1m"\nmax_attempts = {MAX_ATTEMPTS}\n'
    )
    assert schedule.kind == name
