"""What the outcome statements send is always storable: errors escaped, retry times clamped."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from pgbeat.worker.operations import (
    EARLIEST_RUN_AT,
    LATEST_RUN_AT,
    MAX_RETRY_DELAY,
    printable,
    truncate_error,
    writable_retry_time,
)


@pytest.mark.parametrize(
    ("error", "stored"),
    [
        ("plain", "plain"),
        ("nul\x00byte", "nul\\x00byte"),
        ("OSError: " + os.fsdecode(b"\xff.csv"), "OSError: \\udcff.csv"),
        ("é and 日本", "é and 日本"),  # encodable text is left alone
    ],
)
def test_truncate_error_makes_text_storable(error: str, stored: str) -> None:
    assert truncate_error(error) == stored
    truncate_error(error).encode()  # encodes without error


def test_a_huge_error_keeps_its_head_and_stays_encodable() -> None:
    stored = truncate_error("\udcff" * 50_000)
    stored.encode()
    assert stored.endswith("[truncated, 50000 characters in all]")


def test_printable_escapes_only_what_cannot_be_encoded() -> None:
    assert printable("a\udcffb") == "a\\udcffb"
    assert printable("ok") == "ok"


@pytest.mark.parametrize(
    ("when", "written"),
    [
        (timedelta(seconds=30), timedelta(seconds=30)),
        (timedelta(days=2 * 10**8), MAX_RETRY_DELAY),
        (timedelta(days=-(10**8)), -MAX_RETRY_DELAY),
        (datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC)),
        (datetime.max.replace(tzinfo=UTC), LATEST_RUN_AT),
        (datetime.min.replace(tzinfo=UTC), EARLIEST_RUN_AT),
    ],
)
def test_retry_times_are_clamped_to_a_storable_range(
    when: datetime | timedelta, written: datetime | timedelta
) -> None:
    assert writable_retry_time(when) == written
