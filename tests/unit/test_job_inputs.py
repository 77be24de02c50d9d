"""The API's argument checks (job_inputs.py): the edges of the time range, types, payload text."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from pgbeat import job_inputs

PLUS_14 = timezone(timedelta(hours=14))


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("run_at", None, True),
        ("run_at", datetime(2026, 3, 29, tzinfo=UTC), True),
        ("run_at", datetime(1, 1, 3, tzinfo=UTC), True),
        ("run_at", datetime(1, 1, 2, 23, 59, tzinfo=UTC), False),
        ("run_at", datetime(1, 1, 1, tzinfo=PLUS_14), False),
        ("run_at", datetime(9999, 12, 29, tzinfo=UTC), True),
        ("run_at", datetime(9999, 12, 29, 0, 0, 1, tzinfo=UTC), False),
        ("delay", None, True),
        ("delay", timedelta(0), True),
        ("delay", timedelta(seconds=-5), True),
        ("delay", job_inputs.MAX_DELAY, True),
        ("delay", -job_inputs.MAX_DELAY, True),
        ("delay", job_inputs.MAX_DELAY + timedelta(microseconds=1), False),
        ("delay", timedelta(days=-800_000), False),
        ("delay", timedelta(days=3_000_000), False),
    ],
)
def test_time_ranges(field: str, value: datetime | timedelta | None, ok: bool) -> None:
    check = getattr(job_inputs, f"check_{field}")  # check_run_at, check_delay
    if ok:
        check(value)
    else:
        with pytest.raises(ValueError, match=rf"{field} .* out of range"):
            check(value)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (datetime(2026, 1, 1), ValueError),  # noqa: DTZ001 (naive on purpose)
        ("2026-01-01", TypeError),
        (1_700_000_000, TypeError),
    ],
)
def test_run_at_types(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="run_at"):
        job_inputs.check_run_at(value)


@pytest.mark.parametrize("value", [3600, 1.5, "1h", True])
def test_a_delay_must_be_a_timedelta(value: Any) -> None:
    with pytest.raises(TypeError, match=r"delay must be a datetime\.timedelta"):
        job_inputs.check_delay(value)


def test_max_wait_is_checked_by_name() -> None:
    with pytest.raises(ValueError, match="max_wait must not be negative"):
        job_inputs.check_times(None, None, timedelta(seconds=-1))
    with pytest.raises(TypeError, match="max_wait"):
        job_inputs.check_times(None, None, 60)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": "plain"}, None),
        ({"a": "\\u0000 written out"}, None),  # a backslash, not a NUL
        ({"emoji": "\U0001f600"}, None),  # a surrogate pair in the JSON text, fine
        ({"a": "x\x00y"}, "NUL"),
        ({"k\x00": 1}, "NUL"),
        ([["deep", ["\ud800"]]], "surrogate"),
    ],
)
def test_payload_text_problems(value: Any, problem: str | None) -> None:
    found = job_inputs.payload_text_problem(json.dumps(value), value)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_names_must_be_text() -> None:
    job_inputs.check_names(kind="k", job_key="j")
    with pytest.raises(TypeError, match="job_key must be a string"):
        job_inputs.check_names(kind="k", job_key=3)
    with pytest.raises(ValueError, match="kind must not be empty"):
        job_inputs.check_names(kind="", job_key="j")
