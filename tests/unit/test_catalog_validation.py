"""A replica's load validates a definition once for the rows that share it, and a retiming
(another cron or zone) by those two fields' rules alone: the answers must be the model's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pgbeat.scheduling.catalog import _readable_schedule, _Validated
from pgbeat.scheduling.groups import Definition
from pgbeat.scheduling.state import validated_schedule

CRONS = st.sampled_from(
    [
        "0 7 * * *", "*/5 * * * *", "@daily", "@Daily", "0  7 * * MON", "30 2 * * *",
        "61 * * * *", "banana", "0 7 * *", "0 0 30 2 *", "", "5-1 * * * *", "0 7 * * * *",
    ]
) | st.text(max_size=14)  # fmt: skip
ZONES = st.sampled_from(
    [
        "UTC", "Europe/Berlin", "Asia/Kathmandu", "America/St_Johns", "localtime", "posixrules",
        "right/UTC", "Mars/Olympus", "", "europe/berlin", "Europe", "../etc/passwd",
    ]
) | st.text(max_size=10)  # fmt: skip


def _row(name: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name, "source": "api", "kind": "report", "cron": None, "every": None,
        "timezone": "UTC", "payload_text": "{}", "payload_type": "object",
        "max_attempts": None, "catch_up": "latest", "catch_up_window": timedelta(hours=1),
        "overlap": "allow", "jitter": None, "start_at": None, "end_at": None,
        "pause_after_failures": None, "queue": "default", "priority": 0, "tags": None,
        "deadline": None, "on_late": None,
    }  # fmt: skip
    row.update(values)
    return row


@settings(max_examples=400)
@given(cron=CRONS, zone=ZONES, interval=st.booleans(), name=st.sampled_from(["b", "b b"]))
def test_a_row_known_from_an_earlier_one_is_known_exactly_when_the_model_accepts_it(
    cron: str, zone: str, interval: bool, name: str
) -> None:
    validated = _Validated()
    if interval:
        first = _row("a", every=timedelta(minutes=5), timezone="Asia/Tokyo")
        later = _row(name, every=timedelta(minutes=5), timezone=zone)
    else:
        first = _row("a", cron="15 3 * * *", timezone="Asia/Tokyo")
        later = _row(name, cron=cron, timezone=zone)
    assert _readable_schedule(first, False, validated)[0] is not None
    schedule, problem = validated_schedule(later)
    definition, reason = _readable_schedule(later, False, validated)
    if schedule is None:
        assert definition is None and reason == problem
    else:
        assert definition == Definition.of(schedule) and reason is None


def test_rows_alike_but_for_cron_and_zone_take_one_model_validation_between_them() -> None:
    validated = _Validated()
    rows = [
        _row(f"r{n}", cron=f"{n % 60} {n % 24} * * *", timezone=zone)
        for n, zone in enumerate(["UTC", "Europe/Berlin", "Asia/Kathmandu"] * 20)
    ]
    for row in rows:
        assert _readable_schedule(row, False, validated)[0] is not None
    assert len(validated.by_rest) == 1  # one model validation for the 60 rows
    # A row that differs in anything else is validated by the model.
    assert _readable_schedule(_row("x", cron="0 1 * * *", queue="q"), False, validated)[0]
    assert len(validated.by_rest) == 2
