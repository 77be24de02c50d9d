"""Pure parts of schedules as data: jitter, definition fingerprints, missed periods."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from pgbeat.scheduling.catchup import due_periods, missed_periods
from pgbeat.scheduling.definition import definition_hash, file_hash
from pgbeat.scheduling.groups import gaps_of, outside
from pgbeat.scheduling.jitter import jitter_offset
from pgbeat.scheduling.schedule import Schedule

T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_jitter_is_the_periods_own_and_known_in_advance() -> None:
    # independent of the implementation: blake2b-64 of "name@fire time", modulo the steps
    digest = hashlib.blake2b(b"report@2026-12-01T00:00:00Z", digest_size=8).digest()
    expected = timedelta(milliseconds=int.from_bytes(digest, "big") % 60_000)
    assert jitter_offset("report", T0, MINUTE) == expected
    assert jitter_offset("report", T0, MINUTE) == jitter_offset("report", T0, MINUTE)
    assert jitter_offset("report", T0, MINUTE) != jitter_offset("report", T0 + MINUTE, MINUTE)
    assert jitter_offset("report", T0, None) == timedelta(0)
    assert jitter_offset("report", T0, timedelta(microseconds=999)) == timedelta(0)


def test_jitter_spreads_evenly_over_its_range() -> None:
    offsets = [jitter_offset(f"customer_{n}", T0, MINUTE) for n in range(10_000)]
    assert all(timedelta(0) <= o < MINUTE for o in offsets)
    per_10s = Counter(int(o.total_seconds() // 10) for o in offsets)
    assert sorted(per_10s) == [0, 1, 2, 3, 4, 5]
    assert all(1500 < count < 1850 for count in per_10s.values()), per_10s  # ~1667 each


def schedule(**values: object) -> Schedule:
    return Schedule.model_validate({"name": "s", "kind": "s", "every": "1m", **values})


def test_definition_hash_follows_what_decides_periods_and_jobs() -> None:
    base = definition_hash(schedule())
    assert definition_hash(schedule(every=MINUTE)) == base  # "1m" and 60 s are one definition
    assert definition_hash(schedule(enabled=False)) == base  # not part of the definition
    assert definition_hash(schedule(name="other")) == base  # the name is the row's key
    for change in (
        {"every": "2m"},
        {"kind": "t"},
        {"payload": {"a": 1}},
        {"max_attempts": 2},
        {"catch_up": "all"},
        {"catch_up_window": "2h"},
        {"overlap": "skip"},
        {"jitter": "1s"},
        {"timezone": "Europe/Berlin"},
    ):
        assert definition_hash(schedule(**change)) != base, change
    assert definition_hash(schedule(payload={"a": 1, "b": 2})) == definition_hash(
        schedule(payload={"b": 2, "a": 1})
    )


def test_file_hash_ignores_order_but_not_names() -> None:
    a, b = schedule(name="a"), schedule(name="b")
    assert file_hash([a, b]) == file_hash([b, a])
    assert file_hash([a]) != file_hash([b])
    assert len(file_hash([])) == 12


@pytest.mark.parametrize(
    ("catch_up", "last_tick", "expected"),
    [
        ("none", T0, [1, 2, 3, 4, 5]),  # every replica down from T0 to T0 + 5m30s
        ("latest", T0, [1, 2, 3, 4]),  # the latest late period (5) is enqueued
        ("all", T0, []),
        ("none", T0 + 10 * MINUTE, []),  # ticked since: nothing late
        ("none", None, list(range(-54, 6))),  # first tick: the window's periods
    ],
)
def test_missed_periods_are_the_late_ones_the_policy_drops(
    catch_up: str, last_tick: datetime | None, expected: list[int]
) -> None:
    s = schedule(catch_up=catch_up, catch_up_window="1h")
    now = T0 + timedelta(minutes=5, seconds=30)  # no period on time (within 5 s)
    due = due_periods(s, last_tick, now)
    missed = missed_periods(s, last_tick, now, due, limit=100)
    assert [int((m - T0) / MINUTE) for m in missed] == expected
    assert not set(missed) & set(due)


def test_missed_periods_are_bounded() -> None:
    s = schedule(every="1s", catch_up="none", catch_up_window="1d")
    missed = missed_periods(s, None, T0, [], limit=100)
    assert len(missed) == 100 and missed[-1] == T0 - timedelta(seconds=5)


def test_a_code_schedule_begins_at_its_creation_and_no_pause_is_caught_up() -> None:
    created, paused, resumed = T0, T0 + 2 * MINUTE, T0 + 4 * MINUTE
    row = {"source": "api", "created_at": created, "paused_at": None, "resumed_at": None}
    fires = [T0 + n * MINUTE for n in range(-1, 6)]
    assert outside(fires, gaps_of(row)) == fires[2:]
    both = gaps_of({**row, "paused_at": paused, "resumed_at": resumed})
    assert [int((f - T0) / MINUTE) for f in outside(fires, both)] == [1, 2, 5]
    from_file = gaps_of({**row, "source": "file", "paused_at": paused, "resumed_at": resumed})
    assert [int((f - T0) / MINUTE) for f in outside(fires, from_file)] == [-1, 0, 1, 2, 5]
    still_paused = gaps_of({**row, "source": "file", "paused_at": resumed, "resumed_at": paused})
    assert still_paused == ()  # the pause goes on: the claim statement skips its periods
