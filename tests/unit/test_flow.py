"""flow.py's checks and rates, and the claim's row decoding (claiming.py): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pgbeat import flow
from pgbeat.flow import QueueLimits, Rate
from pgbeat.job import Job
from pgbeat.worker.claimed_rows import decode_row, decode_rows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100/10s", Rate(100, timedelta(seconds=10))),
        (" 5/1m ", Rate(5, timedelta(minutes=1))),
        ("1/500ms", Rate(1, timedelta(milliseconds=500))),
        ("3/1h30m", Rate(3, timedelta(hours=1, minutes=30))),
        ("7/1d", Rate(7, timedelta(days=1))),
    ],
)
def test_parse_rate(text: str, expected: Rate) -> None:
    assert flow.parse_rate(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("banana", "expected N/DURATION"),
        ("5/0s", "greater than zero"),
        ("0/1s", "between 1 and"),
        ("-1/1s", "expected N/DURATION"),
        ("5/", "bad duration"),
        ("/1s", "expected N/DURATION"),
        ("5/2d", "at most 1d"),
        ("1.5/1s", "expected N/DURATION"),
        ("99999999999/1s", "between 1 and"),
    ],
)
def test_bad_rates(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        flow.parse_rate(text, "rate")


def test_rate_round_trips_as_text() -> None:
    assert str(flow.parse_rate("100/10s")) == "100/10s"
    assert flow.rate_text(3, timedelta(minutes=90)) == "3/1h30m"
    assert flow.rate_text(None, None) is None


@pytest.mark.parametrize("value", [0, -1, 2**31, True, 1.5, "3"])
def test_bad_limits(value: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="concurrency"):
        flow.limit_value(value, "concurrency")


@pytest.mark.parametrize(
    ("queue", "problem"),
    [
        ("", "non-empty"),
        ("x" * 201, "201 characters"),
        ("a\x00b", "NUL"),
        (" mail", "spaces"),
        (3, "non-empty string"),
    ],
)
def test_bad_queue_names(queue: Any, problem: str) -> None:
    assert problem in (flow.queue_problem(queue) or "")
    with pytest.raises(ValueError, match="queue"):
        flow.check_queue(queue)


def test_good_queue_names() -> None:
    assert flow.check_queue("x" * 200) == "x" * 200
    assert flow.queue_problem("mail:eu-1") is None


@pytest.mark.parametrize("priority", [-32768, 0, 32767])
def test_priorities_in_smallint(priority: int) -> None:
    assert flow.check_priority(priority) == priority


@pytest.mark.parametrize("priority", [-32769, 32768, 10**9])
def test_priorities_outside_smallint(priority: int) -> None:
    with pytest.raises(ValueError, match="priority"):
        flow.check_priority(priority)


@pytest.mark.parametrize("priority", [1.0, "1", None, False])
def test_priorities_of_another_type(priority: Any) -> None:
    with pytest.raises(TypeError, match="priority"):
        flow.check_priority(priority)


@pytest.mark.parametrize("key", ["", 5, "a\x00"])
def test_bad_limit_keys(key: Any) -> None:
    with pytest.raises(ValueError, match="limit_key"):
        flow.check_limit_key(key)


def test_merged_limits_replace_only_what_is_given() -> None:
    current = QueueLimits(concurrency=5, rate=Rate(1, timedelta(seconds=1)))
    merged = flow.merged_limits(current, key_concurrency=2, rate=None)
    assert merged == QueueLimits(concurrency=5, key_concurrency=2)
    assert flow.merged_limits(current, concurrency="none").concurrency is None
    assert flow.limited(merged) and not flow.limited(QueueLimits())


def test_merged_limits_check_every_value() -> None:
    with pytest.raises(ValueError, match="key_rate"):
        flow.merged_limits(QueueLimits(), concurrency=3, key_rate="5/0s")


AT = datetime(2026, 12, 1, tzinfo=UTC)
ROW = (7, "noop", '{"a": 1}', 1, 8, AT, AT + timedelta(microseconds=5), None, "mail", 3, "k", None)


def test_decode_row() -> None:
    job = decode_row(ROW)
    assert job.run_at == datetime(2026, 12, 1, tzinfo=UTC)
    assert job.created_at - job.run_at == timedelta(microseconds=5)
    assert (job.payload, job.queue, job.priority, job.limit_key) == ({"a": 1}, "mail", 3, "k")
    assert decode_row((*ROW[:2], "{}", *ROW[3:])).payload == {}


def test_decode_row_of_every_column_makes_the_same_job() -> None:
    """A claim's row has all of Job's fields and takes a shorter way: the same Job."""
    job = decode_row((*ROW, ["t"]))
    assert type(job) is Job
    assert job == Job(
        7,
        "noop",
        {"a": 1},
        1,
        8,
        AT,
        AT + timedelta(microseconds=5),
        None,
        "mail",
        3,
        "k",
        None,
        ["t"],
    )
    assert (job.tags, job.job_key, job.queue) == (["t"], None, "mail")


@pytest.mark.parametrize(
    ("index", "value", "reason"),
    [
        (5, None, "run_at is outside"),
        (6, None, "created_at is outside"),
        (2, "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (2, "{bad", "could not read"),
    ],
)
def test_unreadable_rows_are_set_apart(index: int, value: Any, reason: str) -> None:
    bad = list(ROW)
    bad[0], bad[index] = 8, value
    jobs, unreadable = decode_rows([ROW, tuple(bad)])
    assert [job.id for job in jobs] == [7]
    assert unreadable[0][0] == 8 and reason in unreadable[0][1]


def test_unserved_kinds() -> None:
    pending = [("a", "default", 3), ("b", "default", 1), ("a", "mail", 2), ("c", "mail", 4)]
    workers: list[dict[str, Any]] = [
        {"kinds": ["a", "b"], "queues": ["default"]},
        {"kinds": ["c"]},  # every queue (a worker from before queues existed says nothing)
    ]
    assert flow.unserved_kinds(pending, workers) == [("a", "mail", 2)]
    assert flow.unserved_kinds(pending, []) == pending
