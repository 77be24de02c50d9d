"""RetentionPolicy and the retention flags' values: what a round deletes, how long a turn lasts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pgbeat.worker.retention_policy import (
    DEFAULT_FAILED_RETENTION,
    DEFAULT_RETENTION,
    RetentionPolicy,
    format_retention,
    parse_retention,
)
from pgbeat.worker.settings import WorkerSettings


def test_defaults_are_seven_and_thirty_days() -> None:
    policy = RetentionPolicy()
    assert timedelta(days=7) == DEFAULT_RETENTION
    assert timedelta(days=30) == DEFAULT_FAILED_RETENTION
    assert policy.passes() == [
        (("done", "cancelled"), timedelta(days=7)),
        (("failed",), timedelta(days=30)),
    ]
    assert policy.enabled and WorkerSettings().retention == policy


@pytest.mark.parametrize(
    ("retention", "failed", "passes"),
    [
        (None, timedelta(days=2), [(("failed",), timedelta(days=2))]),
        (timedelta(hours=1), None, [(("done", "cancelled"), timedelta(hours=1))]),
        (None, None, []),
    ],
)
def test_off_drops_its_pass(
    retention: timedelta | None, failed: timedelta | None, passes: list[Any]
) -> None:
    policy = RetentionPolicy(retention, failed)
    assert policy.passes() == passes
    assert policy.enabled is bool(passes)


@pytest.mark.parametrize(("text", "value"), [("off", None), (" OFF ", None), ("7d", timedelta(7))])
def test_parse_retention(text: str, value: timedelta | None) -> None:
    assert parse_retention(text) == value
    assert parse_retention(format_retention(value)) == value


@pytest.mark.parametrize("text", ["", "0s", "never", "-1d", "7 days"])
def test_parse_retention_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_retention(text)


def test_hold_and_budget_follow_the_round() -> None:
    policy = RetentionPolicy(every=timedelta(seconds=10))
    assert policy.hold() == timedelta(seconds=30)
    assert policy.round_budget() == timedelta(seconds=10)
    assert RetentionPolicy(every=timedelta(minutes=5)).round_budget() == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"retention": timedelta(0)}, ValueError),
        ({"failed_retention": timedelta(seconds=-1)}, ValueError),
        ({"retention": 7}, TypeError),
        ({"every": timedelta(0)}, ValueError),
        ({"batch": 0}, ValueError),
    ],
)
def test_bad_values_name_the_argument(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=next(iter(kwargs)).split("_")[0]):
        RetentionPolicy(**kwargs)


def test_worker_settings_refuse_a_non_policy() -> None:
    with pytest.raises(TypeError, match="retention"):
        WorkerSettings(retention=timedelta(days=1))  # type: ignore[arg-type]
